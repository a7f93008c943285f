#!/usr/bin/env python3
"""Flash attention forward: kgen against torch SDPA's cuDNN and flash backends,
same process, same tensors.

    python3 bench/attention.py                             # the issue's shapes
    python3 bench/attention.py --only decode               # one group
    python3 bench/attention.py --out bench/results/{gpu}.md

Shapes (issue 5): the seed's (B=4, H=8, D=256, causal, fp16, S = 512..4096);
bf16 with B*S = 16384, H = 16, D in {64, 128}, S in {512, 1024, 4096, 16384},
causal and not; decode: B in {1, 16}, Sq = 1, Sk in {4096, 32768}, H = 32
over 8 KV heads, D = 128, and at Sk = 4096 also GQA 8:1 (32 over 4) and MQA
(32 over 1); `--config` forces one kgen config (JSON, e.g.
'{"block": [32, 64], "warps": 2, "stages": 3, "splits": 32, "pack_gqa": true}')
in place of the dispatcher's heuristic (with `--head-dim D`, only that head
dim's shapes: e.g. '{"loop": "wgmma", "block": [128, 128], "warps": 8,
"stages": 2, "persistent": true}' against the same without "persistent"
for the persistent grid). Tensors are BHSD for torch; kgen reads the same
memory as BSHD views (strides), so both sides see identical bytes.

--dtype e4m3 (or e5m2; sm_90a): kgen runs fp8 Q, K and V into a bf16 O on
the same shapes, fed fp8 copies of the same random bf16 tensors (per-tensor
scale amax / the fp8 type's largest value, 448 for e4m3, passed as the
descale factors); torch has no fp8 SDPA, so the cuDNN and flash columns stay
torch SDPA on the bf16 tensors (headed "bf16") and the ratio is bf16 vendor
time / kgen fp8 time. fp8 attention takes D 128 or 256 with Dv 128 only; the
other shapes are skipped with a note. The check then compares against the
fp32 reference on the dequantized inputs, with a same-dtype naive
implementation (scores rounded to bf16, P rounded to the fp8 type for P V,
as FlashAttention-3 feeds it, O rounded to bf16; fp8_naive) in place of
torch's SDPA. `kgen tune --preset attention-fp8-bench` tunes these shapes
(in e4m3).

TFLOP/s counts 4*B*H*Sq*Sk*D (halved for causal); decode also reports GB/s
over the bytes of K and V, and with --read-floor the time one plain kernel
takes to read as many bytes (bench/stream_read.py, Triton) and its GB/s:
what a kernel of that size reaches on this GPU. Timing as bench/gemm.py:
CUDA graph replay over rotating copies of the inputs (> 64 MB), median per
call over >= 50 replays and >= 30 ms. Each shape small enough for it is
first checked against an fp32 reference (torch math backend in float32):
kgen's error must be at most 2x the error of torch's own same-dtype SDPA
(DESIGN.md's rule).

Needs torch with CUDA and libkgen.so (build/lib, or $KGEN_LIB).
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

from gemm import git_commit  # noqa: E402
from stream_read import read_time  # noqa: E402
from timing import ROTATE_BYTES, time_calls  # noqa: E402  (the GEMM bench's timing)


def shapes(only):
    out = []
    if only in (None, "seed"):
        for s in (512, 1024, 2048, 4096):
            out.append(dict(group="seed", b=4, hq=8, hkv=8, sq=s, sk=s, d=256, causal=True, dtype="f16"))
    if only in (None, "prefill"):
        for d in (64, 128):
            for s in (512, 1024, 4096, 16384):
                for causal in (False, True):
                    out.append(dict(group="prefill", b=16384 // s, hq=16, hkv=16, sq=s, sk=s, d=d, causal=causal,
                                    dtype="bf16"))
    if only in (None, "decode"):
        for b in (1, 16):
            for sk in (4096, 32768):
                out.append(dict(group="decode", b=b, hq=32, hkv=8, sq=1, sk=sk, d=128, causal=False, dtype="bf16"))
            for hkv in (4, 1):
                out.append(dict(group="decode", b=b, hq=32, hkv=hkv, sq=1, sk=4096, d=128, causal=False,
                                dtype="bf16"))
    return out


def sdpa(torch, q, k, v, causal, backend):
    from torch.nn.attention import sdpa_kernel
    import torch.nn.functional as F

    gqa = q.shape[1] != k.shape[1]
    with sdpa_kernel([backend]):
        if gqa:
            try:
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            except TypeError:  # torch < 2.5: expand the KV heads
                r = q.shape[1] // k.shape[1]
                k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def fp8_naive(torch, q, k, v, causal, fp8):
    """The same-dtype naive attention of fp8 inputs, given dequantized fp32
    BHSD tensors (the definition of test/gpu/test_python.py and the tuner's
    check): scores in fp32 rounded to bf16 (an fp8 scaled matmul into bf16),
    then scaled; fp32 softmax; P = exp(s - max) rounded to `fp8` for P V, as
    FlashAttention-3 feeds it; the sum in fp32 divided by the row sum and
    rounded to bf16."""
    if q.shape[1] != k.shape[1]:
        r = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
    sq, sk = q.shape[2], k.shape[2]
    s = (q @ k.transpose(-1, -2)).bfloat16().float() * (1.0 / math.sqrt(q.shape[-1]))
    if causal:  # bottom-right aligned: key j is visible to query i iff j <= i + sk - sq
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + sk - sq, float("-inf"))
    p = torch.exp(s - s.amax(-1, keepdim=True))
    del s
    o = (p.to(fp8).float() @ v) / p.sum(-1, keepdim=True)
    return o.to(torch.bfloat16)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["seed", "prefill", "decode"])
    ap.add_argument("--no-graph", action="store_true")
    ap.add_argument("--config", help="a kgen attention config (JSON) for every shape, in place of the heuristic")
    ap.add_argument("--head-dim", type=int, help="only the shapes of this head dim (a --config valid for one)")
    ap.add_argument("--dtype", choices=["e4m3", "e5m2"],
                    help="kgen on fp8 copies of the inputs (bf16 O, per-tensor descales) against torch SDPA on the "
                         "bf16 ones (torch has no fp8 SDPA); default: each shape's own dtype on both sides")
    ap.add_argument("--read-floor", action="store_true",
                    help="for decode, also time a plain read of K's and V's bytes (needs Triton)")
    ap.add_argument("--out", help="append a markdown table to this file ({gpu} becomes the device's name)")
    args = ap.parse_args()
    try:
        import torch
        from torch.nn.attention import SDPBackend
    except ImportError:
        raise SystemExit("bench/attention.py needs torch >= 2.3 with CUDA")
    import kgen

    if not torch.cuda.is_available():
        raise SystemExit("bench/attention.py needs a CUDA GPU")
    device = torch.cuda.get_device_name()
    method = "plain launches" if args.no_graph else "CUDA graph replay"
    fp8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}.get(args.dtype)
    print(f"kgen {kgen.version()}{' ' + args.dtype + ' -> bf16' if fp8 else ''} vs torch {torch.__version__} SDPA "
          f"(cuDNN, flash){' on bf16 (no fp8 SDPA)' if fp8 else ''} on {device}; {method}")
    side = " bf16" if fp8 else ""  # the vendor columns' dtype, where it differs from kgen's
    w = 13 if fp8 else 8
    hdr = (f"{'shape':>44} | {'kgen us':>8} {'TFLOP/s':>7} | {'cuDNN' + side + ' us':>{w}} {'TFLOP/s':>7} | "
           f"{'flash' + side + ' us':>{w}} {'TFLOP/s':>7} | {'x cuDNN':>7} {'x flash':>7} | check")
    print(hdr)
    print("-" * len(hdr))
    rows, failed = [], False
    for s in shapes(args.only):
        if args.head_dim and s["d"] != args.head_dim:
            continue
        dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[s["dtype"]]
        b, hq, hkv, sq, sk, d, causal = s["b"], s["hq"], s["hkv"], s["sq"], s["sk"], s["d"], s["causal"]
        label = (f"{s['group']} B{b} H{hq}/{hkv} Sq{sq} Sk{sk} D{d} {args.dtype or s['dtype']}"
                 + (" causal" if causal else ""))
        dv = d  # every shape here has Dv = D
        if fp8 and not (d in (128, 256) and dv == 128):
            print(f"{label:>44} | skipped: fp8 attention takes D 128 or 256 with Dv 128, not D {d} Dv {dv}")
            continue
        esize = 1 if fp8 else 2
        set_bytes = (b * hq * sq * d * 2 + b * hkv * sk * d * 2) * esize
        sets = max(1, math.ceil(ROTATE_BYTES / set_bytes))
        gen = torch.Generator(device="cuda").manual_seed(b * 131 + sq * 7 + sk + d)

        def rnd(*shape):
            return (torch.rand(shape, generator=gen, device="cuda") * 2 - 1).to(dtype)

        data = [(rnd(b, hq, sq, d), rnd(b, hkv, sk, d), rnd(b, hkv, sk, d), torch.empty(b, hq, sq, d, device="cuda",
                                                                                     dtype=dtype))
                for _ in range(sets)]
        fp8_data = []
        if fp8:
            # fp8 copies of the same tensors: per-tensor scale amax / the
            # type's largest value; the scales are kgen's descale factors.
            def quantize(t):
                scale = (t.abs().amax().float() / torch.finfo(fp8).max).clamp(min=1e-12).reshape(1)
                return (t.float() / scale).to(fp8), scale

            for q, k, v, _ in data:
                (q8, qs), (k8, ks), (v8, vs) = quantize(q), quantize(k), quantize(v)
                fp8_data.append((q8, k8, v8, torch.empty(b, hq, sq, d, device="cuda", dtype=torch.bfloat16),
                                 qs, ks, vs))

        def ours(q, k, v, o, *descales):
            # BHSD tensors seen as BSHD through strides; o written in place.
            extra = dict(zip(("q_descale", "k_descale", "v_descale"), descales))
            kgen.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=causal,
                           out=o.transpose(1, 2), config=args.config, **extra)

        # Numeric check where an fp32 reference fits in memory.
        check = "skipped (too large for the fp32 reference)"
        if b * hq * sq * sk <= (1 << 28):
            if fp8:
                q8, k8, v8, o, qs, ks, vs = fp8_data[0]
                ours(*fp8_data[0])
                q, k, v = q8.float() * qs, k8.float() * ks, v8.float() * vs
                ref = sdpa(torch, q, k, v, causal, SDPBackend.MATH)
                naive = fp8_naive(torch, q, k, v, causal, fp8)
                del q, k, v
            else:
                q, k, v, o = data[0]
                ours(q, k, v, o)
                ref = sdpa(torch, q.float(), k.float(), v.float(), causal, SDPBackend.MATH)
                naive = sdpa(torch, q, k, v, causal, SDPBackend.FLASH_ATTENTION if sq == sk or not causal
                             else SDPBackend.MATH)
            err = float((o.float() - ref).abs().max())
            err_naive = float((naive.float() - ref).abs().max())
            ok = math.isfinite(err) and err <= 2 * err_naive
            failed |= not ok
            check = f"{'ok' if ok else 'FAIL'}, err {err:.2g} vs {'naive ' + args.dtype if fp8 else 'torch'} " \
                    f"{err_naive:.2g}"
            del ref, naive
        t_ours = time_calls(torch, [lambda x=x: ours(*x) for x in (fp8_data or data)], not args.no_graph)
        res = {}
        for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
            try:
                res[name] = time_calls(torch, [lambda x=x: sdpa(torch, x[0], x[1], x[2], causal, be) for x in data],
                                       not args.no_graph)
            except RuntimeError as e:  # a backend that refuses the shape
                print(f"  {name}: {str(e).splitlines()[0]}")
                res[name] = float("nan")
        flops = 4.0 * b * hq * sq * sk * d * (0.5 if causal else 1.0)
        kv_bytes = 2.0 * b * hkv * sk * d * esize
        floor = read_time(torch, int(kv_bytes), not args.no_graph) \
            if args.read_floor and s["group"] == "decode" else None
        row = dict(label=label, ours=t_ours, cudnn=res["cudnn"], flash=res["flash"], flops=flops,
                   kv_gbs=kv_bytes / t_ours / 1e9, check=check,
                   floor=floor and (floor * 1e6, kv_bytes / floor / 1e9))
        rows.append(row)

        def tf(t):
            return flops / t / 1e12

        print(f"{label:>44} | {t_ours * 1e6:8.1f} {tf(t_ours):7.1f} | {res['cudnn'] * 1e6:{w}.1f} "
              f"{tf(res['cudnn']):7.1f} | {res['flash'] * 1e6:{w}.1f} {tf(res['flash']):7.1f} | "
              f"{res['cudnn'] / t_ours:7.2f} {res['flash'] / t_ours:7.2f} | {check}"
              + (f" | K+V {row['kv_gbs']:.0f} GB/s" if s["group"] == "decode" else "")
              + (" | read %.1f us, %.0f GB/s" % row["floor"] if row["floor"] else ""))
        del data, fp8_data
        torch.cuda.empty_cache()

    if args.out:
        slug = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")
        path = pathlib.Path(args.out.replace("{gpu}", slug))
        path.parent.mkdir(parents=True, exist_ok=True)
        new = not path.exists()
        with open(path, "a") as f:
            if new:
                f.write(f"# kgen benchmarks on {device}\n\nWritten by bench/*.py. NVIDIA only: the AMD targets "
                        f"(gfx90a, gfx942) are compile-checked in CI, never measured here.\n")
            now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            title = f"Attention forward {args.dtype} (vendor: torch SDPA bf16, no fp8 SDPA)" if fp8 else \
                "Attention forward"
            f.write(f"\n## {title} — {now}\n\n"
                    f"- device: {device} (torch {torch.__version__}, CUDA {torch.version.cuda})\n"
                    f"- kgen {kgen.version()}, commit {git_commit()}; "
                    f"{'config ' + args.config if args.config else 'the dispatcher' + chr(39) + 's config (tuning DB, else heuristic)'} (on sm_90a "
                    f"the heuristic takes the wgmma loop: for prefill, and for GQA decode packed with split-KV; "
                    f"the `kgen: cache: miss` lines of the log name each kernel)\n"
                    f"- method: {method}, median per call, inputs rotated over > 64 MB; TFLOP/s = 4*B*H*Sq*Sk*D "
                    f"(halved for causal); x cuDNN = cuDNN time / kgen time"
                    + (f"; kgen runs {args.dtype} Q/K/V (fp8 copies of the bf16 inputs, per-tensor descales) into "
                       f"a bf16 O on the wgmma loop, cuDNN and flash the bf16 inputs; K+V GB/s counts fp8 bytes"
                       if fp8 else "")
                    + ("; read µs: one plain kernel reading K's and V's bytes (bench/stream_read.py)"
                       if args.read_floor else "")
                    + "\n\n"
                    f"| shape | kgen µs | TFLOP/s | cuDNN{side} µs | TFLOP/s | flash{side} µs | TFLOP/s | x cuDNN | "
                    "x flash | "
                    "K+V GB/s | " + ("read µs | read GB/s | " if args.read_floor else "") + "check |\n"
                    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if args.read_floor else "")
                    + "---|\n")
            for r in rows:
                t = r["flops"]
                f.write(f"| {r['label']} | {r['ours'] * 1e6:.1f} | {t / r['ours'] / 1e12:.1f} | "
                        f"{r['cudnn'] * 1e6:.1f} | {t / r['cudnn'] / 1e12:.1f} | {r['flash'] * 1e6:.1f} | "
                        f"{t / r['flash'] / 1e12:.1f} | {r['cudnn'] / r['ours']:.2f} | {r['flash'] / r['ours']:.2f} | "
                        f"{r['kv_gbs']:.0f} | "
                        + (("%.1f | %.0f | " % r["floor"] if r["floor"] else "- | - | ") if args.read_floor else "")
                        + f"{r['check']} |\n")
        print(f"wrote {path}")
    if failed:
        print("some results failed the numeric check: their timings are not meaningful")
        sys.exit(1)


def report_compiles():
    """The dispatcher reads the tuning DB (KGEN_TUNE, default offline): after
    `kgen tune --preset attention-bench` (attention-fp8-bench for --dtype
    e4m3) a second run compiles nothing."""
    import kgen
    policy = os.environ.get("KGEN_TUNE", "offline")
    db = os.environ.get("KGEN_TUNING_DB", "<kernel cache>/tuning.json")
    print(f"kgen kernels compiled in this process: {kgen.compiled_kernels()} (KGEN_TUNE={policy}, tuning DB {db})")


if __name__ == "__main__":
    try:
        main()
    finally:
        report_compiles()
