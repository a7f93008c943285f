#!/usr/bin/env python3
"""GEMM: kgen against cuBLAS (torch.matmul), same process, same inputs.

    python3 bench/gemm.py                                 # issue 3's shapes, nt and nn
    python3 bench/gemm.py --shapes 532x2048x2048,4096x4096x4096 --layout tn,nn
    python3 bench/gemm.py --out bench/results/{gpu}.md    # append a results table

Shapes are MxNxK; C (M x N) = A (M x K) * B (K x N) in --dtype with fp32
accumulation; layout "nt" stores B as N x K (a linear layer, y = x W^T).
kgen's layout letters are row-major: BLAS's column-major "TN" (the linear
layer) is kgen's "nt", BLAS's "NN" is kgen's "nn"; --layout takes a
comma-separated list and each shape runs in each layout.
Each shape is checked once against a float64 reference (DESIGN.md's rule)
before it is timed. Timing: each side is captured in a CUDA graph that calls
it over rotating copies of the inputs (more than 64 MB in all, beyond the
L2), the graph is replayed at least 50 times and for at least 30 ms, and the
median per call is reported with TFLOP/s, GB/s (A, B read once and C written
once) and the speedup cuBLAS time / kgen time, and each side's GB/s as a
share of the GPU's HBM bandwidth (%HBM; --hbm-gbs, known for H200, H100 and
A100 by name): the measure for the memory-bound small-M shapes (issue 3:
>= 85% for M <= 64). --no-graph times plain launches instead (launch
overhead included). --read-floor adds, for M <= 256, the time one plain
kernel takes to read as many bytes (bench/stream_read.py, Triton) and its
%HBM: what a kernel of that size reaches on this GPU.

--dtype e4m3 (fp8, sm_90a; layout nt only): A and B in fp8 with per-tensor
fp32 scales into a bf16 C, against torch._scaled_mm (cuBLASLt's fp8 GEMM,
its default accurate accumulation) on the same tensors and scales; GB/s
counts one byte an input element. (kgen also takes e5m2, which cuBLASLt
does not multiply by itself, so it has no row here.)

Needs torch with CUDA and libkgen.so (build/lib, or $KGEN_LIB).
"""

from __future__ import annotations

import argparse
import datetime
import math
import pathlib
import re
import os
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

from stream_read import read_time  # noqa: E402
from timing import ROTATE_BYTES, time_calls  # noqa: E402

# Issue 3's list: the squares, the seed's LLM shapes, the MLP shapes, small M
# (decode) at N = K = 4096 and 8192, and the ragged one.
DEFAULT_SHAPES = ",".join(
    ["8192x8192x8192", "4096x4096x4096", "2048x2048x2048", "1024x1024x1024", "532x2048x2048", "788x2048x2048",
     "532x2048x16384", "4096x14336x4096", "4096x4096x14336"]
    + [f"{m}x{nk}x{nk}" for nk in (4096, 8192) for m in (1, 16, 32, 64, 128, 256)]
    + ["127x4099x1023"])

# Peak HBM bandwidth (GB/s) by device name, for %HBM: the vendors' numbers.
HBM_GBS = [("H200", 4800), ("H100 PCIe", 2000), ("H100", 3350), ("A100-SXM4-80GB", 2039), ("A100", 1555)]


def hbm_gbs(device: str):
    for name, gbs in HBM_GBS:
        if name in device:
            return gbs
    return None


def parse_shapes(text: str):
    shapes = []
    for item in text.split(","):
        m = re.fullmatch(r"\s*(\d+)x(\d+)x(\d+)\s*", item)
        if not m:
            raise SystemExit(f"--shapes: '{item}' is not MxNxK")
        shapes.append(tuple(int(g) for g in m.groups()))
    return shapes


def git_commit() -> str:
    # A copy of the tree without .git (a GPU machine) names it in KGEN_COMMIT.
    if os.environ.get("KGEN_COMMIT"):
        return os.environ["KGEN_COMMIT"]
    try:
        sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def make_inputs(torch, m, n, k, layout, dtype, cdtype, sets, seed):
    """`sets` copies of (a, b, c_kgen, c_torch); a is M x K and b is K x N as
    torch sees them, stored as `layout` says; C of `cdtype`."""
    gen = torch.Generator(device="cuda").manual_seed(seed)

    def uniform(shape):
        return (torch.rand(shape, generator=gen, device="cuda") * 2 - 1).to(dtype)

    out = []
    for _ in range(sets):
        a = uniform((k, m)).t() if layout[0] == "t" else uniform((m, k))
        b = uniform((n, k)).t() if layout[1] == "t" else uniform((k, n))
        out.append((a, b, torch.empty(m, n, device="cuda", dtype=cdtype),
                    torch.empty(m, n, device="cuda", dtype=cdtype)))
    return out


def half_ulp(torch, dtype, x):
    if x == 0:
        return 0.0
    _, e = math.frexp(x)
    return math.ldexp(torch.finfo(dtype).eps, e - 1) / 2


def check(torch, kgen, a, b, c, dtype, scales=None):
    """DESIGN.md's rule against a float64 reference; returns (ok, text).
    `scales` (fp8): the per-tensor scales, one-element float32 tensors."""
    if scales:
        kgen.gemm(a, b, c, scale_a=scales[0], scale_b=scales[1])
        ref = (a.double() @ b.double()) * (scales[0].double() * scales[1].double())
        naive = torch._scaled_mm(a, b, scale_a=scales[0], scale_b=scales[1], out_dtype=dtype)
    else:
        kgen.gemm(a, b, c)
        ref = a.double() @ b.double()
        naive = torch.matmul(a, b)
    err = float((c.double() - ref).abs().max())
    err_naive = float((naive.double() - ref).abs().max())
    ok = math.isfinite(err) and err <= max(2 * err_naive, half_ulp(torch, dtype, float(ref.abs().max())))
    return ok, f"err {err:.3g} vs cuBLAS {err_naive:.3g}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="comma-separated MxNxK (default: %(default)s)")
    ap.add_argument("--layout", default="nt,nn",
                    help="comma-separated kgen layouts (nn, nt, tn, tt; default %(default)s: BLAS TN and NN)")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "e4m3"],
                    help="A and B (e4m3: layout nt, a bf16 C, against torch._scaled_mm; kgen's e5m2 has no "
                         "vendor counterpart here: cuBLASLt has no e5m2 x e5m2 kernel)")
    ap.add_argument("--no-graph", action="store_true", help="time plain launches instead of CUDA graph replay")
    ap.add_argument("--out", help="append a markdown table to this file ({gpu} becomes the device's name)")
    ap.add_argument("--hbm-gbs", type=float, help="the GPU's HBM bandwidth in GB/s for %%HBM (default: by name)")
    ap.add_argument("--read-floor", action="store_true",
                    help="for M <= 256, also time a plain read of the same bytes (needs Triton)")
    args = ap.parse_args()
    fp8 = args.dtype == "e4m3"
    layouts = [x.strip() for x in args.layout.split(",")]
    if fp8:
        if args.layout == ap.get_default("layout"):
            layouts = ["nt"]
        if layouts != ["nt"]:
            raise SystemExit("--dtype e4m3 runs layout nt only (fp8 wgmma and torch._scaled_mm read both "
                             "operands K-major)")
    for lay in layouts:
        if lay not in ("nn", "nt", "tn", "tt"):
            raise SystemExit(f"--layout: '{lay}' is not one of nn, nt, tn, tt")

    try:
        import torch
    except ImportError:
        raise SystemExit("bench/gemm.py needs torch with CUDA")

    import kgen

    if not torch.cuda.is_available():
        raise SystemExit("bench/gemm.py needs a CUDA GPU")
    torch.backends.cuda.matmul.allow_tf32 = False
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "e4m3": torch.float8_e4m3fn}[args.dtype]
    cdtype = torch.bfloat16 if fp8 else dtype
    # fp8: per-tensor scales, as a quantized model passes them (not 1, so that
    # applying them is checked).
    scales = (torch.tensor([0.37], device="cuda"), torch.tensor([2.9], device="cuda")) if fp8 else None
    vendor = "cuBLASLt fp8 (torch._scaled_mm)" if fp8 else "cuBLAS"
    device = torch.cuda.get_device_name()
    method = "plain launches" if args.no_graph else "CUDA graph replay"
    hbm = args.hbm_gbs or hbm_gbs(device)
    pct = (lambda gbs: f"{100.0 * gbs / hbm:.0f}%") if hbm else (lambda gbs: "-")
    print(f"kgen {kgen.version()} ({kgen.library_path()}) vs torch {torch.__version__} {vendor} on {device}; "
          f"{args.dtype} {','.join(layouts)}{' -> bf16, per-tensor scales' if fp8 else ''}, fp32 accumulation, "
          f"{method}, inputs rotated over > 64 MB")
    print(f"%HBM: GB/s over {hbm:.0f} GB/s" if hbm else "%HBM: unknown device, pass --hbm-gbs")
    header = (f"{'M x N x K':>18} {'lay':>3} | {'kgen us':>9} {'TFLOP/s':>8} {'GB/s':>7} {'%HBM':>5} | {'cuBLAS us':>9} "
              f"{'TFLOP/s':>8} {'GB/s':>7} {'%HBM':>5} | {'ratio':>7} | "
              + (f"{'read us':>7} {'%HBM':>5} | " if args.read_floor else "") + "check")
    print(header)
    print("-" * len(header))
    rows = []
    failed = False

    def floor_cells(r, console: bool):
        """The read floor's time and %HBM as cells of the console's table or
        of the markdown one."""
        us, share = "-", "-"
        if r["floor"]:
            us, share = f"{r['floor'][0]:.1f}", pct(r["floor"][1])
        return f"{us:>7} {share:>5} | " if console else f"{us} | {share} | "

    shapes = parse_shapes(args.shapes)
    if fp8 and args.shapes == ap.get_default("shapes"):
        # fp8 rows are 16-byte aligned (kgen's TMA, torch._scaled_mm): the
        # default list without 127x4099x1023.
        shapes = [(m, n, k) for m, n, k in shapes if k % 16 == 0 and n % 16 == 0]
    for (m, n, k), layout in [(s, lay) for s in shapes for lay in layouts]:
        esize = torch.finfo(dtype).bits // 8
        csize = torch.finfo(cdtype).bits // 8
        bytes_moved = (m * k + k * n) * esize + m * n * csize
        set_bytes = bytes_moved + m * n * csize  # one C for each side
        sets = max(1, math.ceil(ROTATE_BYTES / set_bytes))
        data = make_inputs(torch, m, n, k, layout, dtype, cdtype, sets, seed=m * 1000003 + n * 1009 + k)
        ok, why = check(torch, kgen, data[0][0], data[0][1], data[0][2], cdtype, scales)
        failed |= not ok
        if fp8:
            sa, sb = scales
            ours = time_calls(torch, [lambda a=a, b=b, c=c: kgen.gemm(a, b, c, scale_a=sa, scale_b=sb)
                                      for a, b, c, _ in data], not args.no_graph)
            theirs = time_calls(torch, [lambda a=a, b=b: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb,
                                                                           out_dtype=cdtype)
                                        for a, b, _, _ in data], not args.no_graph)
        else:
            ours = time_calls(torch, [lambda a=a, b=b, c=c: kgen.gemm(a, b, c) for a, b, c, _ in data],
                              not args.no_graph)
            theirs = time_calls(torch, [lambda a=a, b=b, c=c: torch.matmul(a, b, out=c) for a, b, _, c in data],
                                not args.no_graph)
        flops = 2.0 * m * n * k
        floor = read_time(torch, bytes_moved, not args.no_graph) if args.read_floor and m <= 256 else None
        kernel = kgen.gemm_kernel(data[0][0], data[0][1], data[0][2], scale_a=scales and scales[0],
                                  scale_b=scales and scales[1]).name  # what kgen.gemm ran
        row = dict(shape=f"{m}x{n}x{k}", layout=layout, ours_us=ours * 1e6, ours_tflops=flops / ours / 1e12,
                   ours_gbs=bytes_moved / ours / 1e9, cublas_us=theirs * 1e6, cublas_tflops=flops / theirs / 1e12,
                   cublas_gbs=bytes_moved / theirs / 1e9, speedup=theirs / ours, check=("ok, " if ok else "FAIL, ")
                   + why, kernel=kernel, floor=floor and (floor * 1e6, bytes_moved / floor / 1e9))
        rows.append(row)
        print(f"{row['shape']:>18} {layout:>3} | {row['ours_us']:9.1f} {row['ours_tflops']:8.1f} {row['ours_gbs']:7.0f} "
              f"{pct(row['ours_gbs']):>5} | {row['cublas_us']:9.1f} {row['cublas_tflops']:8.1f} {row['cublas_gbs']:7.0f} "
              f"{pct(row['cublas_gbs']):>5} | "
              f"{row['speedup']:7.2f} | {floor_cells(row, True) if args.read_floor else ''}{row['check']}")
        del data
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
            f.write(f"\n## GEMM {args.dtype} {', '.join(layouts)}{' (vendor: ' + vendor + ')' if fp8 else ''} — {now}\n\n"
                    f"- device: {device} (torch {torch.__version__}, CUDA {torch.version.cuda})\n"
                    f"- kgen {kgen.version()}, commit {git_commit()}\n"
                    f"- method: {method}, median per call, inputs rotated over > 64 MB; ratio = cuBLAS time / "
                    f"kgen time; GB/s counts A and B read once and C written once; %HBM = GB/s / "
                    f"{f'{hbm:.0f}' if hbm else '?'} GB/s; layouts are kgen's (row-major: nt = BLAS TN)"
                    + ("; read µs: one plain kernel reading as many bytes (bench/stream_read.py), %HBM its GB/s"
                       if args.read_floor else "") + "\n\n"
                    "| M x N x K | layout | kgen µs | TFLOP/s | GB/s | %HBM | cuBLAS µs | TFLOP/s | GB/s | %HBM | ratio | "
                    + ("read µs | %HBM | " if args.read_floor else "") +
                    "check | kernel (the dispatcher's pick: tuning DB, else heuristic) |\n"
                    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if args.read_floor else "")
                    + "---|---|\n")
            for r in rows:
                f.write(f"| {r['shape']} | {r['layout']} | {r['ours_us']:.1f} | {r['ours_tflops']:.1f} | {r['ours_gbs']:.0f} | "
                        f"{pct(r['ours_gbs'])} | {r['cublas_us']:.1f} | {r['cublas_tflops']:.1f} | {r['cublas_gbs']:.0f} | "
                        f"{pct(r['cublas_gbs'])} | "
                        f"{r['speedup']:.2f} | {floor_cells(r, False) if args.read_floor else ''}{r['check']} | "
                        f"`{r['kernel']}` |\n")
        print(f"wrote {path}")
    # The dispatcher reads the tuning DB (KGEN_TUNE, default offline): after
    # `kgen tune --preset gemm-bench` a run compiles nothing.
    policy = os.environ.get("KGEN_TUNE", "offline")
    db = os.environ.get("KGEN_TUNING_DB", "<kernel cache>/tuning.json")
    print(f"kgen kernels compiled in this process: {kgen.compiled_kernels()} (KGEN_TUNE={policy}, tuning DB {db})")
    if failed:
        print("some results failed the numeric check: their timings are not meaningful")
        sys.exit(1)


if __name__ == "__main__":
    main()
