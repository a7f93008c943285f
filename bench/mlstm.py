#!/usr/bin/env python3
"""mLSTM forward: kgen against a PyTorch chunkwise implementation (eager and
torch.compile'd), same process, same inputs.

    python3 bench/mlstm.py                                # the issue's shapes
    python3 bench/mlstm.py --only small --out bench/results/{gpu}-mlstm.md
    python3 bench/mlstm.py --variants                     # each kgen variant too

Shapes (bf16 unless --dtype): the xLSTM-7B heads (NH=8, DQK=256, DV=512) with
B*S = 65536 (S = 2048, 8192) and B=1, S=8192; NH=16, DQK=128, DV=256, B=4,
S=8192; the seed's small heads DQK=DV=64 and 128, B in {1, 2, 4}, S in
{2048, 4096}, NH=8; and the decoding step (S=1, states updated in place), B in
{1, 16, 64}, NH=8, DQK=256, DV=512.

The peer (torch_chunkwise below) is the issue's chunkwise form written with
torch ops: gate math and states in fp32, q k^T and the chunk's k^T v in the
input dtype (tensor cores), a Python loop over the chunks for the state
recurrence. The step's peer is the recurrent step in torch ops.

Timing as bench/gemm.py: CUDA-graph replay of calls over rotating input
copies (> 64 MB), the median per call; time-capped (time_calls) so the whole
list finishes in ~4 minutes on an H100/H200. torch.compile of the chunkwise
peer unrolls its Python loop over the chunks and takes minutes for long
sequences: it is compiled only while --compile-budget seconds of compile
time last and for at most --compile-max-chunks chunks, else the table says
"skip". At the end the number of kgen kernels compiled in the process is
printed (0 when every kernel came from the disk cache or a bundle). Reported:
us, TFLOP/s counting the chunkwise form's FLOPs (per token 2 L (DQK + DV) +
4 DQK DV, L = 64 for every side so the numbers compare), GB/s (q, k, v, gates
read, h written; plus the states read and written for the step), and the
speedup peer time / kgen time. Each shape is checked once: max|kgen - ref| /
max|ref| against the fp32 torch chunkwise result, printed.

Needs torch with CUDA and libkgen.so (build/lib, or $KGEN_LIB).
"""

from __future__ import annotations

import argparse
import datetime
import math
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

from gemm import git_commit  # noqa: E402
from timing import ROTATE_BYTES, time_calls  # noqa: E402

# Time-capped: one timed call sizes the replayed batch (~2 ms), and a shape
# stops after 400 ms of trials, so the whole list fits the bench's budget.
CAPPED = dict(min_trials=20, batch_ms=2.0, max_ms=400.0)

FLOP_CHUNK = 64

BIG = [(8, 8, 8192, 256, 512), (32, 8, 2048, 256, 512), (1, 8, 8192, 256, 512), (4, 16, 8192, 128, 256)]
SMALL = [(b, 8, s, d, d) for d in (64, 128) for b in (1, 2, 4) for s in (2048, 4096)]
STEP = [(b, 8, 1, 256, 512) for b in (1, 16, 64)]


def torch_chunkwise(torch, q, k, v, i, f, chunk=64, eps=1e-6):
    """The issue's chunkwise form in torch ops; returns h in q's dtype."""
    F = torch.nn.functional
    B, NH, S, DQK = q.shape
    DV = v.shape[-1]
    L = chunk
    pad = (-S) % L
    if pad:  # padded tokens come after every real one: causal, so h is exact
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
        i = F.pad(i, (0, pad), value=-1e4)
        f = F.pad(f, (0, pad), value=1e4)
    NC = (S + pad) // L
    qc, kc, vc = (t.reshape(B, NH, NC, L, -1) for t in (q, k, v))
    lf = F.logsigmoid(f.float()).reshape(B, NH, NC, L)
    ig = i.float().reshape(B, NH, NC, L)
    b = lf.cumsum(-1)
    g = b[..., -1]
    a = ig + g[..., None] - b
    amax = a.max(-1).values
    C = torch.zeros(B, NH, DQK, DV, device=q.device, dtype=torch.float32)
    n = torch.zeros(B, NH, DQK, device=q.device, dtype=torch.float32)
    m = torch.zeros(B, NH, device=q.device, dtype=torch.float32)
    Cs, ns, ms = [], [], []
    for c in range(NC):
        Cs.append(C)
        ns.append(n)
        ms.append(m)
        mnew = torch.maximum(g[:, :, c] + m, amax[:, :, c])
        w = torch.exp(a[:, :, c] - mnew[..., None])
        kw = kc[:, :, c] * w[..., None].to(q.dtype)
        decay = torch.exp(g[:, :, c] + m - mnew)
        C = decay[..., None, None] * C + (kw.transpose(-1, -2) @ vc[:, :, c]).float()
        n = decay[..., None] * n + (kc[:, :, c].float() * w[..., None]).sum(-2)
        m = mnew
    Cp, nP, mP = torch.stack(Cs, 2), torch.stack(ns, 2), torch.stack(ms, 2)
    logD = b[..., :, None] - b[..., None, :] + ig[..., None, :]
    causal = torch.ones(L, L, device=q.device, dtype=torch.bool).tril()
    logD = logD.masked_fill(~causal, float("-inf"))
    mcomb = torch.maximum(b + mP[..., None], logD.max(-1).values)
    s = DQK ** -0.5
    P = (qc @ kc.transpose(-1, -2)).float() * s * torch.exp(logD - mcomb[..., None])
    qbar = qc.float() * (s * torch.exp(b + mP[..., None] - mcomb))[..., None]
    num = qbar @ Cp + P @ vc.float()
    z = (qbar @ nP[..., None]).squeeze(-1) + P.sum(-1)
    h = num / (torch.maximum(z.abs(), torch.exp(-mcomb)) + eps)[..., None]
    return h.reshape(B, NH, NC * L, DV)[:, :, :S].to(q.dtype)


def torch_step(torch, q, k, v, i, f, C, n, m, eps=1e-6):
    """One recurrent step, states (fp32) updated in place."""
    F = torch.nn.functional
    DQK = q.shape[-1]
    lf = F.logsigmoid(f.float())[..., 0]
    it = i.float()[..., 0]
    mnew = torch.maximum(lf + m, it)
    fp, ip = torch.exp(lf + m - mnew), torch.exp(it - mnew)
    kk, vv, qq = k[:, :, 0].float(), v[:, :, 0].float(), q[:, :, 0].float() * DQK ** -0.5
    C.mul_(fp[..., None, None]).add_(ip[..., None, None] * kk[..., :, None] * vv[..., None, :])
    n.mul_(fp[..., None]).add_(ip[..., None] * kk)
    m.copy_(mnew)
    num = (qq[..., None, :] @ C).squeeze(-2)
    z = (qq * n).sum(-1)
    return (num / (torch.maximum(z.abs(), torch.exp(-mnew)) + eps)[..., None]).to(q.dtype)[:, :, None]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    ap.add_argument("--only", choices=["big", "small", "step"], help="one group of shapes")
    ap.add_argument("--variants", action="store_true", help="also time each kgen variant (its best config)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile'd peer")
    ap.add_argument("--no-graph", action="store_true")
    ap.add_argument("--compile-budget", type=float, default=60.0,
                    help="seconds of torch.compile time to spend in all (then 'skip')")
    ap.add_argument("--compile-max-chunks", type=int, default=32,
                    help="torch.compile the peer only for S / 64 <= this many chunks")
    ap.add_argument("--out", help="append the table to this file ({gpu} is replaced)")
    args = ap.parse_args()

    import torch
    import kgen
    dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[args.dtype]
    dev = torch.device("cuda")
    gpu = torch.cuda.get_device_name()
    groups = {"big": BIG, "small": SMALL, "step": STEP}
    shapes = [(g, s) for g, lst in groups.items() if not args.only or g == args.only for s in lst]
    compiled = None if args.no_compile else torch.compile(lambda *a: torch_chunkwise(torch, *a))
    rows = []
    compile_spent = 0.0
    for group, (B, NH, S, DQK, DV) in shapes:
        e = torch.finfo(dt).bits // 8
        io_bytes = B * NH * S * ((2 * DQK + 2 * DV) * e + 2 * e)
        step = group == "step"
        if step:
            io_bytes += 2 * B * NH * (DQK * DV + DQK + 1) * 4
        flops = B * NH * S * (2 * FLOP_CHUNK * (DQK + DV) + 4 * DQK * DV)
        sets = max(1, min(8, math.ceil(ROTATE_BYTES / max(io_bytes, 1))))
        gen = torch.Generator(device=dev).manual_seed(0)

        def rnd(*shape, lo=-1.0, hi=1.0, dtype=dt):
            return (torch.rand(*shape, device=dev, generator=gen) * (hi - lo) + lo).to(dtype)

        inputs = [(rnd(B, NH, S, DQK), rnd(B, NH, S, DQK), rnd(B, NH, S, DV), rnd(B, NH, S, lo=-10, hi=15),
                   rnd(B, NH, S, lo=-5, hi=10)) for _ in range(sets)]
        if step:
            states = [(rnd(B, NH, DQK, DV, dtype=torch.float32), rnd(B, NH, DQK, dtype=torch.float32),
                       rnd(B, NH, lo=-2, hi=6, dtype=torch.float32)) for _ in range(sets)]
            ours = [lambda x=x, st=st: kgen.mlstm(*x, states=st, states_out=st) for x, st in zip(inputs, states)]
            peer = [lambda x=x, st=st: torch_step(torch, *x, *st) for x, st in zip(inputs, states)]
            comp = None
            h_ours = kgen.mlstm(*inputs[0], states=tuple(t.clone() for t in states[0]), return_states=True)[0]
            h_ref = torch_step(torch, *(t.float() for t in inputs[0]), *(t.clone() for t in states[0]))
        else:
            ours = [lambda x=x: kgen.mlstm(*x) for x in inputs]
            peer = [lambda x=x: torch_chunkwise(torch, *x) for x in inputs]
            comp = None
            if compiled and S <= args.compile_max_chunks * FLOP_CHUNK and compile_spent < args.compile_budget:
                import time as _time
                t0 = _time.time()
                compiled(*inputs[0])  # the compile, outside the timing
                torch.cuda.synchronize()
                compile_spent += _time.time() - t0
                comp = [lambda x=x: compiled(*x) for x in inputs]
            h_ours = kgen.mlstm(*inputs[0])
            h_ref = torch_chunkwise(torch, *(t.float() for t in inputs[0]))
        torch.cuda.synchronize()
        rel = ((h_ours.float() - h_ref.float()).abs().max() / h_ref.float().abs().max()).item()
        t_ours = time_calls(torch, ours, not args.no_graph, **CAPPED)
        t_peer = time_calls(torch, peer, not args.no_graph, **CAPPED)
        t_comp = time_calls(torch, comp, not args.no_graph, **CAPPED) if comp else float("nan")  # nan: skipped
        row = dict(shape=f"B={B} NH={NH} S={S} {DQK}/{DV}", us=t_ours * 1e6, tflops=flops / t_ours / 1e12,
                   gbs=io_bytes / t_ours / 1e9, peer_us=t_peer * 1e6, comp_us=t_comp * 1e6,
                   speedup=t_peer / t_ours, speedup_comp=t_comp / t_ours, rel=rel, variants="")
        if args.variants and not step:
            parts = []
            for var in ("recurrent", "fused", "twophase", "chunkpar"):
                cands = [c for c in kgen_candidates(DQK, DV, B, NH, S, args.dtype) if c["variant"] == var]
                if not cands:
                    continue
                cfg = cands[0]
                fns = [lambda x=x, cfg=cfg: kgen.mlstm(*x, config=cfg) for x in inputs]
                parts.append(f"{var} {time_calls(torch, fns, not args.no_graph, **CAPPED) * 1e6:.0f}")
            row["variants"] = ", ".join(parts)
        rows.append(row)
        print(f"{row['shape']}: kgen {row['us']:.1f} us ({row['tflops']:.1f} TFLOP/s, {row['gbs']:.0f} GB/s), "
              f"torch {row['peer_us']:.1f} us, compiled {row['comp_us']:.1f} us, rel err {rel:.2e}", flush=True)

    lines = [f"## mLSTM forward, {args.dtype}: kgen vs PyTorch chunkwise ({gpu})", "",
             f"{datetime.date.today()}, commit {git_commit()}, torch {torch.__version__}, "
             f"{'CUDA-graph replay' if not args.no_graph else 'plain launches'}; TFLOP/s count the chunkwise "
             f"form's FLOPs with L = {FLOP_CHUNK}.", "",
             "| shape | kgen us | TFLOP/s | GB/s | torch us | compiled us | x torch | x compiled | rel err |"
             + (" variants us |" if args.variants else ""),
             "|---|---|---|---|---|---|---|---|---|" + ("---|" if args.variants else "")]
    for r in rows:
        lines.append(f"| {r['shape']} | {r['us']:.1f} | {r['tflops']:.2f} | {r['gbs']:.0f} | {r['peer_us']:.1f} | "
                     f"{fmt(r['comp_us'], '.1f')} | {r['speedup']:.2f} | {fmt(r['speedup_comp'], '.2f')} | {r['rel']:.1e} |"
                     + (f" {r['variants']} |" if args.variants else ""))
    compiled_n = kgen.compiled_kernels()
    lines += ["", f"compiled us 'skip': torch.compile not run for that shape (it unrolls the chunk loop; "
              f"--compile-max-chunks {args.compile_max_chunks}, --compile-budget {args.compile_budget:.0f} s). "
              f"kgen kernels compiled in this process: {compiled_n}."]
    text = "\n".join(lines) + "\n"
    print(text)
    print(f"kgen kernels compiled in this process: {compiled_n}")
    if args.out:
        path = pathlib.Path(args.out.replace("{gpu}", gpu.replace(" ", "-")))
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as fh:
            fh.write(text + "\n")


def fmt(x, spec):
    return "skip" if x != x else format(x, spec)


def kgen_candidates(dqk, dv, b, nh, s, dtype):
    """The model-ranked configs of the problem (`kgen mlstm candidates`)."""
    exe = ROOT / "build" / "bin" / "kgen"
    out = subprocess.run([str(exe), "mlstm", "candidates", "--dqk", str(dqk), "--dv", str(dv), "--b", str(b),
                          "--nh", str(nh), "--s", str(s), "--dtype", dtype, "--target", "sm_90a"],
                         capture_output=True, text=True, check=True).stdout
    cands = []
    for line in out.splitlines():
        w = line.split()
        cands.append({"variant": w[1], "chunk": int(w[3]), "blockDV": int(w[5]), "warps": int(w[7])})
    return cands


if __name__ == "__main__":
    main()
    import kgen  # the count of kernels compiled here: 0 with a tuned DB and a warm cache
    print(f"kgen kernels compiled in this process: {kgen.compiled_kernels()}")
