#!/usr/bin/env python3
"""kgen's Python binding on the GPU: kgen.gemm and kgen.attention against torch.

Run by ctest (test/gpu/python.cmake, label gpu) with KGEN_LIB pointing at the
built libkgen.so, or by hand: KGEN_LIB=build/lib/libkgen.so python3
test/gpu/test_python.py. The binding's checks that need no GPU (emit, compile
for sm_90a, errors) always run; without torch or a CUDA GPU the rest is
skipped and the script exits 77 (ctest's SKIP), or 1 if a check failed.

Tolerance (DESIGN.md, as FlashAttention): max|ours - ref| <= 2 * max|naive -
ref|, ref in float64, naive = torch's same-dtype matmul (fp32 accumulation,
reduced-precision reductions off, rounded once to C's dtype); never below
half an ulp of C's dtype at max|ref| (see test/gpu/GemmGpuTest.cpp for why).
Attention's naive side rounds scores and P to the dtype; with fp8 inputs it
rounds scores to O's bf16 and P to the fp8 type (fp8_attention_ref).
"""

import math
import os
import pathlib
import sys
import tempfile
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))

import kgen  # noqa: E402

SKIP = 77
failures = []


def binding_without_gpu():
    """The ctypes layer itself: needs libkgen.so (and nvrtc), no GPU."""
    assert kgen.version(), "kgen.version()"
    prob = kgen.problem(532, 2048, 2048, layout="nt")
    src = kgen.emit(prob, target="sm_90a")
    assert "__global__" in src and "kgen_gemm_bf16_nt_mdyn_n2048_k2048_" in src, src[:500]
    inlined = kgen.emit(prob, {"block": [64, 64, 32], "warps": [2, 2], "stages": 2}, target="sm_90a", inline=True)
    assert "_b64x64x32_w2x2_s2_" in inlined and '#include "kgen/' not in inlined
    assert kgen.Runtime("gfx942").target == "gfx942"
    before = kgen.compiled_kernels()
    info = kgen.Runtime("sm_90a").compile(prob, {"block": [64, 64, 32], "warps": [2, 2], "stages": 2})
    again = kgen.Runtime("sm_90a").compile(prob, {"block": [64, 64, 32], "warps": [2, 2], "stages": 2})
    # A cache hit compiles nothing: the count grows by one at most (zero when
    # an earlier run left the kernel in the cache).
    assert kgen.compiled_kernels() - before == (0 if info.cache_hit else 1) and again.cache_hit, \
        (before, kgen.compiled_kernels(), info.cache_hit)
    assert info.name.startswith("kgen_gemm_bf16_nt_mdyn_n2048_k2048_b64x64x32") and info.binary_bytes > 0, info
    assert info.target == "sm_90a" and info.config["block"] == [64, 64, 32] and len(info.cache_key) == 64, info
    for what, fn, needle in [("bad JSON", lambda: kgen.emit("{"), "JSON"),
                             ("unknown field", lambda: kgen.emit({"m": 1, "n": 1, "k": 1, "colour": 1}), "colour"),
                             ("bad target", lambda: kgen.emit(prob, target="sm_70"), "sm_70"),
                             ("bad runtime target", lambda: kgen.Runtime("sm_99"), "sm_99")]:
        try:
            fn()
            failures.append(f"{what}: no kgen.Error")
        except kgen.Error as e:
            if needle not in str(e) or e.status != kgen.ERROR_INVALID_ARGUMENT:
                failures.append(f"{what}: status {e.status}, message lacks '{needle}': {e}")
    print(f"ok   binding without a GPU (kgen {kgen.version()}, {kgen.library_path()}; compiled {info.name})")


def skip(why: str) -> None:
    if failures:
        finish()
    print(f"SKIP: {why}")
    sys.exit(SKIP)


def finish():
    if failures:
        print(f"\n{len(failures)} failure(s):")
        for f in failures:
            print(" -", f)
        sys.exit(1)
    print("all passed")


try:
    binding_without_gpu()
except Exception:
    failures.append(f"binding without a GPU: {traceback.format_exc()}")

try:
    import torch
except ImportError:
    skip("torch is not installed; the GPU part did not run")
if not torch.cuda.is_available():
    skip("no CUDA GPU visible to torch; the GPU part did not run")

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def half_ulp(dtype, x: float) -> float:
    if x == 0:
        return 0.0
    fi = torch.finfo(dtype)
    _, e = math.frexp(x)  # x = f * 2^e, f in [0.5, 1)
    ulp = math.ldexp(fi.eps, e - 1)
    if dtype == torch.float16:
        ulp = max(ulp, 2.0**-24)
    return ulp / 2


def uniform(shape, dtype, gen):
    return (torch.rand(shape, generator=gen, device="cuda", dtype=torch.float32) * 2 - 1).to(dtype)


def operand(rows, cols, stored_t, dtype, gen, pad=0, offset=0):
    """A rows x cols tensor stored row-major ('n') or as the transpose of a
    row-major tensor ('t'), with `pad` extra elements per stored row and the
    data starting `offset` elements into its buffer."""
    srows, scols = (cols, rows) if stored_t else (rows, cols)
    buf = uniform((offset + srows * (scols + pad),), dtype, gen)
    stored = buf[offset:].view(srows, scols + pad)[:, :scols]
    return stored.t() if stored_t else stored


def check(name, m, n, k, layout, ab, c, alpha=1.0, beta=0.0, pad=(0, 0, 0), offset=(0, 0, 0), seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    abt, ct = DTYPES[ab], DTYPES[c]
    a = operand(m, k, layout[0] == "t", abt, gen, pad[0], offset[0])
    b = operand(k, n, layout[1] == "t", abt, gen, pad[1], offset[1])
    cbuf = uniform((offset[2] + m * (n + pad[2]),), ct, gen)
    cmat = cbuf[offset[2]:].view(m, n + pad[2])[:, :n]
    c0 = cmat.clone()
    if beta == 0:
        cmat.fill_(float("nan"))  # must be written, never read
    guard = cbuf.clone()

    ref = torch.addmm(c0.double(), a.double(), b.double(), beta=beta, alpha=alpha)
    x, y = (a, b) if ct == abt else (a.float(), b.float())
    naive = torch.addmm(c0.to(x.dtype), x, y, beta=beta, alpha=alpha).to(ct)

    out = kgen.gemm(a, b, cmat if (beta != 0 or pad[2] or offset[2]) else None, alpha=alpha, beta=beta,
                    out_dtype=ct)
    torch.cuda.synchronize()
    if out.data_ptr() == cmat.data_ptr():  # C's buffer: what lies outside C must not change
        outside = torch.ones_like(cbuf, dtype=torch.bool)
        outside[offset[2]:].view(m, n + pad[2])[:, :n] = False
        touched = int((cbuf[outside] != guard[outside]).sum())
    else:
        touched = 0
    nan = int((~torch.isfinite(out)).sum())
    ok, msg = within_rule(out, ref, naive, ct)
    ok = ok and nan == 0 and touched == 0
    print(f"{'ok  ' if ok else 'FAIL'} {name:58s} {msg}")
    if not ok:
        failures.append(f"{name}: {msg}, {nan} non-finite, {touched} elements outside C changed")


def within_rule(out, ref, naive, dtype):
    """(ok, text): max|out - ref| <= max(2 * max|naive - ref|, half an ulp of
    `dtype` at max|ref|)."""
    err = float((out.double() - ref).abs().nan_to_num(0).max())
    err_naive = float((naive.double() - ref).abs().max())
    bound = max(2 * err_naive, half_ulp(dtype, float(ref.abs().max())))
    text = f"err {err:.3g} naive {err_naive:.3g} ratio {err / err_naive if err_naive else 0:.2f}"
    return err <= bound, text if err <= bound else text + f" > bound {bound:.3g}"


def expect_close(what, out, ref, naive, dtype):
    ok, msg = within_rule(out, ref, naive, dtype)
    assert ok and bool(torch.isfinite(out).all()), f"{what}: {msg}"


def expect_error(name, fn, needle, status=None):
    try:
        fn()
    except kgen.Error as e:
        msg = str(e)
        if needle not in msg or (status is not None and e.status != status):
            failures.append(f"{name}: kgen.Error (status {e.status}) lacks '{needle}': {msg}")
            print(f"FAIL {name}: {msg}")
        else:
            print(f"ok   {name}: {msg.splitlines()[0][:100]}")
        return
    failures.append(f"{name}: no kgen.Error raised")
    print(f"FAIL {name}: no kgen.Error raised")


def run(name, fn):
    try:
        fn()
    except Exception:
        failures.append(f"{name}: {traceback.format_exc()}")
        print(f"FAIL {name}:\n{traceback.format_exc()}")


def test_shapes():
    check("532x2048x2048 nt bf16->bf16", 532, 2048, 2048, "nt", "bf16", "bf16", seed=1)
    check("127x4099x1023 tn f16->f32", 127, 4099, 1023, "tn", "f16", "f32", seed=2)
    check("1x4096x4096 nn bf16->bf16", 1, 4096, 4096, "nn", "bf16", "bf16", seed=3)
    check("17x33x65 tt f16->f16", 17, 33, 65, "tt", "f16", "f16", seed=4)
    check("1x1x1 nt bf16->f32", 1, 1, 1, "nt", "bf16", "f32", seed=5)
    check("255x129x257 nt bf16->f16 alpha=0.5 beta=2", 255, 129, 257, "nt", "bf16", "f16", 0.5, 2.0, seed=6)
    check("532x2048x2048 tt f16->bf16 ld+(8,3,5)", 532, 2048, 2048, "tt", "f16", "bf16", pad=(8, 3, 5), seed=7)
    check("532x2048x2048 nt bf16->bf16 ptr+(1,1,1) beta=1", 532, 2048, 2048, "nt", "bf16", "bf16", 1.0, 1.0,
          offset=(1, 1, 1), seed=8)


def test_layout_from_strides():
    x = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(128, 256, device="cuda", dtype=torch.bfloat16)
    y = kgen.gemm(x, w.t())  # a linear layer: layout nt, from the strides
    torch.cuda.synchronize()
    assert y.shape == (64, 128) and y.dtype == torch.bfloat16, (y.shape, y.dtype)
    expect_close("x @ w.t()", y, x.double() @ w.double().t(), x @ w.t(), torch.bfloat16)
    src = kgen.emit(kgen.problem(64, 128, 256, layout="nt"), target="sm_90a")
    assert "_nt_" in src, src[:400]
    info = kgen.compile(kgen.problem(64, 128, 256, layout="nt"))
    assert info.loaded and info.binary_bytes > 0 and info.name.startswith("kgen_gemm_bf16_nt_"), info
    print(f"ok   layout from strides; compiled {info.name} ({'hit' if info.cache_hit else 'miss'})")
    # gemm_kernel names what kgen.gemm runs: the call after it builds nothing.
    x2 = torch.randn(64, 320, device="cuda", dtype=torch.bfloat16)
    w2 = torch.randn(160, 320, device="cuda", dtype=torch.bfloat16)
    picked = kgen.gemm_kernel(x2, w2.t())
    assert picked.loaded and picked.name.startswith("kgen_gemm_bf16_nt_m"), picked
    before = kgen.compiled_kernels()
    kgen.gemm(x2, w2.t())
    torch.cuda.synchronize()
    assert kgen.compiled_kernels() == before, "kgen.gemm built a kernel gemm_kernel had not named"
    # Rows of A off the 16-byte grid: another kernel (lower alignment or a repack).
    flat = torch.randn(64 * 320 + 1, device="cuda", dtype=torch.bfloat16)
    odd = kgen.gemm_kernel(flat[1:].view(64, 320), w2.t())
    assert odd.name != picked.name, (odd.name, picked.name)
    print(f"ok   gemm_kernel: {picked.name}; misaligned A: {odd.name}")


def test_streams_and_graphs():
    gen = torch.Generator(device="cuda").manual_seed(9)
    a = uniform((300, 512), torch.float16, gen)
    b = uniform((512, 384), torch.float16, gen)
    c = torch.empty(300, 384, device="cuda", dtype=torch.float16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        kgen.gemm(a, b, c)  # compiles, then runs on s
    s.synchronize()
    expect_close("side stream", c, a.double() @ b.double(), torch.matmul(a, b), torch.float16)

    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        kgen.gemm(a, b, c)
    a.copy_(uniform((300, 512), torch.float16, gen))
    c.zero_()
    g.replay()
    torch.cuda.synchronize()
    expect_close("graph replay", c, a.double() @ b.double(), torch.matmul(a, b), torch.float16)
    print("ok   kgen.gemm on a side stream and inside a CUDA graph")

    # A kernel that is not built yet is never compiled during capture: a
    # fresh cache (so the kernel cannot load from disk) must give an error.
    old = os.environ.get("KGEN_CACHE_DIR")
    with tempfile.TemporaryDirectory() as d:
        os.environ["KGEN_CACHE_DIR"] = d
        try:
            rt = kgen.Runtime()
        finally:
            if old is None:
                del os.environ["KGEN_CACHE_DIR"]
            else:
                os.environ["KGEN_CACHE_DIR"] = old
        a2 = uniform((33, 96), torch.float16, gen)
        b2 = uniform((96, 40), torch.float16, gen)
        g2 = torch.cuda.CUDAGraph()

        def capture():
            with torch.cuda.graph(g2):
                kgen.gemm(a2, b2, runtime=rt)

        expect_error("no compile during graph capture", capture, "captured")
        rt.close()
    torch.cuda.synchronize()


def test_errors():
    x = torch.randn(8, 16, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(16, 4, device="cuda", dtype=torch.bfloat16)
    expect_error("dtype mismatch", lambda: kgen.gemm(x, w.half()), "must match")
    expect_error("inner dims", lambda: kgen.gemm(x, w.t()), "inner dimensions")
    expect_error("beta without c", lambda: kgen.gemm(x, w, beta=1.0), "pass c")
    expect_error("broadcast operand", lambda: kgen.gemm(x, w[:1].expand(16, 4)), "row-major")
    expect_error("layout that the strides contradict", lambda: kgen.gemm(x, w, layout="nt"), "layout 't'")
    expect_error("cpu tensor", lambda: kgen.gemm(x.cpu(), w.cpu()), "CUDA")
    c = torch.empty(8, 4, device="cuda", dtype=torch.bfloat16)
    rt = kgen.default_runtime()
    # Straight through the C API: the runtime's own checks.
    prob = kgen.problem(8, 4, 16, layout="nn")
    expect_error("lda smaller than a row", lambda: rt.gemm_raw(prob, x.data_ptr(), w.data_ptr(), c.data_ptr(), 8,
                                                                lda=3), "lda", kgen.ERROR_INVALID_ARGUMENT)
    expect_error("null pointer", lambda: rt.gemm_raw(prob, 0, w.data_ptr(), c.data_ptr(), 8), "null",
                 kgen.ERROR_INVALID_ARGUMENT)
    expect_error("bad JSON", lambda: kgen.emit("{"), "JSON", kgen.ERROR_INVALID_ARGUMENT)
    expect_error("bad config", lambda: kgen.emit(prob, {"stages": 1}), "stages", kgen.ERROR_INVALID_ARGUMENT)
    # Empty products follow torch: M or N = 0 is an empty result, K = 0 gives beta * C.
    assert kgen.gemm(x[:0], w).shape == (0, 4)
    z = kgen.gemm(x[:, :0], w[:0], torch.ones(8, 4, device="cuda", dtype=torch.float32), beta=0.5)
    assert bool((z == 0.5).all()), z


def attention_ref(q, k, v, causal, dtype):
    """(B, S, H, D) tensors; returns (out, lse) computed in `dtype` for the
    scores, P and O (naive) or in float32 (reference), the mask built
    explicitly (bottom-right causal)."""
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    qq, kk, vv = (t.transpose(1, 2).to(dtype) for t in (q, k, v))
    kk = kk.repeat_interleave(hq // hkv, 1)
    vv = vv.repeat_interleave(hq // hkv, 1)
    s = (qq @ kk.transpose(-1, -2)).float() / math.sqrt(d)
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + sk - sq, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.softmax(s, -1).nan_to_num(0.0).to(dtype)
    return (p @ vv).transpose(1, 2), lse


def test_attention():
    gen = torch.Generator(device="cuda").manual_seed(5)
    for b, sq, sk, hq, hkv, d, causal, dtype, bhsd in [
            (2, 129, 129, 8, 2, 64, True, torch.bfloat16, False),
            (1, 17, 300, 4, 4, 128, False, torch.float16, True),
            (2, 300, 17, 4, 1, 64, True, torch.bfloat16, False),  # rows with no key
            (2, 1, 4096, 32, 8, 128, False, torch.bfloat16, False)]:  # decode: split-KV
        def make(s, h):
            x = uniform((b, h, s, d) if bhsd else (b, s, h, d), dtype, gen)
            return x.transpose(1, 2) if bhsd else x
        q, k, v = make(sq, hq), make(sk, hkv), make(sk, hkv)
        out, lse = kgen.attention(q, k, v, causal=causal, return_lse=True)
        ref, ref_lse = attention_ref(q, k, v, causal, torch.float32)
        naive, naive_lse = attention_ref(q, k, v, causal, dtype)
        expect_close(f"attention B{b} Sq{sq} Sk{sk} H{hq}/{hkv} D{d}", out, ref, naive, dtype)
        empty = torch.isinf(ref_lse)
        assert bool((lse[empty] == float("-inf")).all()), "empty rows need LSE -inf"
        if bool((~empty).any()):
            ok, msg = within_rule(lse[~empty], ref_lse[~empty].double(), naive_lse[~empty], torch.float32)
            assert ok, f"LSE: {msg}"


def test_attention_decode_steps():
    """A decode loop: the problem's features go to the C API as one JSON text
    every step (which both sides remember) and each step's sizes in the
    call's arguments, so every step must compute with its own key count.
    Tensors off the GPU are refused by name, before anything launches."""
    gen = torch.Generator(device="cuda").manual_seed(11)
    bf = torch.bfloat16
    k_all = uniform((1, 4100, 8, 128), bf, gen)
    v_all = uniform((1, 4100, 8, 128), bf, gen)
    for sk in (4095, 4096, 4097, 4098, 1000):
        q = uniform((1, 1, 32, 128), bf, gen)
        k, v = k_all[:, :sk], v_all[:, :sk]
        out = kgen.attention(q, k, v)
        ref, _ = attention_ref(q, k, v, False, torch.float32)
        naive, _ = attention_ref(q, k, v, False, bf)
        expect_close(f"decode step Sk{sk}", out, ref, naive, bf)
    cpu = torch.zeros(1, 1, 32, 128, dtype=bf)
    expect_error("attention on CPU tensors", lambda: kgen.attention(cpu, cpu, cpu), "runs on CUDA tensors")


def test_argument_checks():
    """The kernels take raw pointers and index them by the call's sizes, so
    kgen.attention and kgen.mlstm refuse, by name, any tensor off the call's
    GPU or of another shape than q's sizes give it (a launch would read out
    of bounds or fault); the context stays usable after."""
    bf = torch.bfloat16
    rt = kgen.default_runtime()
    if rt.device != int(os.environ.get("KGEN_DEVICE") or 0):
        failures.append(f"Runtime.device is {rt.device}, KGEN_DEVICE says {os.environ.get('KGEN_DEVICE')}")
    # A runtime per GPU: by index (one past the count is refused), and a
    # call's is its tensors' GPU's; torch's current device stays where it was.
    if kgen.Runtime(device=0).device != 0:
        failures.append("kgen.Runtime(device=0) is not on device 0")
    n = torch.cuda.device_count()
    expect_error("a runtime past the GPU count", lambda: kgen.Runtime(device=n), f"device {n}",
                 kgen.ERROR_NO_DEVICE)
    current = torch.cuda.current_device()
    x = torch.zeros(8, 64, device=f"cuda:{n - 1}", dtype=bf)
    kgen.gemm(x, x.t())
    if kgen._runtime_for(x, None).device != n - 1 or torch.cuda.current_device() != current:
        failures.append(f"kgen.gemm on cuda:{n - 1}: runtime on {kgen._runtime_for(x, None).device}, torch's current "
                        f"device {torch.cuda.current_device()} (was {current})")
    q = torch.zeros(2, 100, 8, 128, device="cuda", dtype=bf)
    k = torch.zeros(2, 300, 2, 128, device="cuda", dtype=bf)
    v = torch.zeros(2, 300, 2, 64, device="cuda", dtype=bf)
    z = lambda *shape, **kw: torch.zeros(*shape, device=kw.pop("device", "cuda"), dtype=kw.pop("dtype", bf))
    for what, kwargs, needle in [
            ("k of another batch", dict(k=z(1, 300, 2, 128)), "do not match"),
            ("v of another length", dict(v=z(2, 299, 2, 64)), "do not match"),
            ("k of another head dim", dict(k=z(2, 300, 2, 64)), "do not match"),
            ("out of q's head dim", dict(out=z(2, 100, 8, 128)), "out must be"),
            ("out in host memory", dict(out=z(2, 100, 8, 64, device="cpu")), "out is in host memory"),
            ("bias one key short", dict(bias=z(2, 8, 100, 299)), "bias must be"),
            ("alibi slopes per KV head", dict(alibi_slopes=z(2, dtype=torch.float32)), "alibi_slopes"),
            ("alibi slopes in host memory", dict(alibi_slopes=z(8, dtype=torch.float32, device="cpu")),
             "alibi_slopes is in host memory")]:
        args = dict(q=q, k=k, v=v)
        args.update(kwargs)
        expect_error(f"attention: {what}", lambda: kgen.attention(**args), needle)
    qv, kv = z(50, 8, 128), z(70, 2, 128)
    cu = torch.tensor([0, 20, 50], device="cuda", dtype=torch.int32)
    expect_error("attention: int64 offsets",
                 lambda: kgen.attention(qv, kv, kv, cu_seqlens_q=cu, cu_seqlens_k=cu.long(), max_seqlen_q=30,
                                        max_seqlen_k=40), "int32")
    expect_error("attention: offsets of another batch",
                 lambda: kgen.attention(qv, kv, kv, cu_seqlens_q=cu, cu_seqlens_k=cu[:2], max_seqlen_q=30,
                                        max_seqlen_k=40), "batch + 1")
    B, NH, S, DQK, DV = 2, 2, 64, 64, 128
    mq, mk, mv, mi, mf = z(B, NH, S, DQK), z(B, NH, S, DQK), z(B, NH, S, DV), z(B, NH, S), z(B, NH, S)
    states = (z(B, NH, DQK, DV, dtype=torch.float32), z(B, NH, DQK, dtype=torch.float32),
              z(B, NH, dtype=torch.float32))
    for what, fn, needle in [
            ("k of another head dim", lambda: kgen.mlstm(mq, z(B, NH, S, 32), mv, mi, mf), "k must be"),
            ("f one step short", lambda: kgen.mlstm(mq, mk, mv, mi, z(B, NH, S - 1)), "f must be"),
            ("v in host memory", lambda: kgen.mlstm(mq, mk, mv.cpu(), mi, mf), "v is in host memory"),
            ("float32 gates", lambda: kgen.mlstm(mq, mk, mv, mi.float(), mf), "i must be"),
            ("bf16 states", lambda: kgen.mlstm(mq, mk, mv, mi, mf, states=(states[0].bfloat16(),) + states[1:]),
             "states[0]"),
            ("states_out of another shape",
             lambda: kgen.mlstm(mq, mk, mv, mi, mf, states_out=states[:2] + (z(B, NH + 1, dtype=torch.float32),)),
             "states_out[2]")]:
        expect_error(f"mlstm: {what}", fn, needle)
    # Nothing launched, nothing faulted: a good call still runs.
    out = kgen.attention(q, k, z(2, 300, 2, 128))
    torch.cuda.synchronize()
    if not torch.equal(out, torch.zeros_like(out)):
        failures.append("attention of zeros after the refused calls is not zero")


def test_attention_partial_configs():
    """A config given in part at launch (the C API's kgen_attention): tile
    fields spell a config, strategy fields alone take the dispatcher's
    choice among the configs with them, chosen at the call's sizes. One
    runtime runs them all, so its memo of picks is used across shapes; the
    varlen case's problem is sized by max_seqlen, its launch by the call."""
    gen = torch.Generator(device="cuda").manual_seed(9)
    rt = kgen.Runtime()
    bf = torch.bfloat16
    cases = [((1, 1, 4096, 32, 8, 128), False, {"splits": 4}),
             ((1, 1, 4096, 32, 8, 128), False, {"pack_gqa": True}),
             ((1, 1, 4096, 32, 8, 128), False, {"loop": "tiled"}),
             ((2, 513, 513, 8, 2, 64), True, {"persistent": True}),
             ((2, 513, 513, 8, 2, 64), True, {"loop": "wgmma"}),
             ((2, 513, 513, 8, 2, 64), True, {}),
             ((2, 200, 700, 4, 4, 128), False, {"block": [64, 64], "stages": 2}),
             ((2, 200, 700, 4, 4, 128), False, {"persistent": True})]
    for (b, sq, sk, hq, hkv, d), causal, config in cases:
        q, k, v = uniform((b, sq, hq, d), bf, gen), uniform((b, sk, hkv, d), bf, gen), uniform((b, sk, hkv, d), bf, gen)
        for _ in range(2):  # the second launch takes the remembered pick
            out = kgen.attention(q, k, v, causal=causal, config=config, runtime=rt)
        ref, _ = attention_ref(q, k, v, causal, torch.float32)
        naive, _ = attention_ref(q, k, v, causal, bf)
        expect_close(f"attention B{b} Sq{sq} Sk{sk} H{hq}/{hkv} D{d} config {config}", out, ref, naive, bf)
    # varlen: three sequences packed, the longest shorter than max_seqlen.
    lens_q, lens_k = [1, 37, 130], [300, 5, 130]
    cu_q = torch.tensor([0] + list(torch.tensor(lens_q).cumsum(0)), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + list(torch.tensor(lens_k).cumsum(0)), dtype=torch.int32, device="cuda")
    q = uniform((sum(lens_q), 8, 64), bf, gen)
    k, v = uniform((sum(lens_k), 2, 64), bf, gen), uniform((sum(lens_k), 2, 64), bf, gen)
    for config in ({"loop": "tiled"}, {"pack_gqa": True}, {"block": [64, 32]}):
        out = kgen.attention(q, k, v, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=400,
                             max_seqlen_k=400, config=config, runtime=rt)
        for i in range(len(lens_q)):
            qs, ks = slice(int(cu_q[i]), int(cu_q[i + 1])), slice(int(cu_k[i]), int(cu_k[i + 1]))
            one = (q[qs][None], k[ks][None], v[ks][None])
            ref, _ = attention_ref(*one, True, torch.float32)
            naive, _ = attention_ref(*one, True, bf)
            expect_close(f"varlen attention seq {i} config {config}", out[qs][None], ref, naive, bf)


def fp8_attention_ref(q, k, v, causal, descale, naive):
    """fp8 (B, S, H, D) tensors and the descale factors (q, k, v) as floats;
    returns (out, lse). Reference (naive False): float64 from the decoded
    values, scores (Q K^T) * qd * kd * scale, O = softmax (V * vd). Naive,
    the definition the rule's bound rests on (AttentionReference in
    lib/Runtime/Tuner.cpp): scores in fp32 from the decoded values times qd *
    kd, rounded to bf16 (an fp8 scaled matmul into bf16), then scaled; fp32
    softmax; P = exp(s - max) rounded to the inputs' fp8 type before the
    division by the row sum (as the kernel and FlashAttention-3 feed P to
    the fp8 P V: a normalized P of a long row falls below e4m3's
    subnormals); P (V * vd) summed in fp32, divided by the row sum and
    rounded to bf16."""
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    dt = torch.float32 if naive else torch.float64
    qq, kk, vv = (t.transpose(1, 2).to(dt) for t in (q, k, v))  # exact
    kk = kk.repeat_interleave(hq // hkv, 1)
    vv = vv.repeat_interleave(hq // hkv, 1) * descale[2]
    s = (qq @ kk.transpose(-1, -2)) * (descale[0] * descale[1])
    if naive:
        s = s.bfloat16().to(dt)
    s = s / math.sqrt(d)
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + sk - sq, float("-inf"))
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)  # rows with no key
    e = torch.exp(s - m)
    rowsum = e.sum(-1, keepdim=True)
    p = e.to(q.dtype).to(dt) if naive else e
    out = ((p @ vv) / rowsum).nan_to_num(0.0)
    lse = (m + torch.log(rowsum)).squeeze(-1)
    return (out.bfloat16() if naive else out).transpose(1, 2), lse


def test_fp8_attention():
    """kgen.attention on fp8 q, k, v (sm_90a) with per-tensor descale
    factors (1-element float32 CUDA tensors) or none: a bf16 O against the
    float64 reference under the rule, the naive side per fp8_attention_ref;
    a CUDA graph follows new descale values; unsupported fp8 problems (head
    dim 64, varlen) and descale factors on bf16 inputs are refused."""
    if torch.cuda.get_device_capability() != (9, 0):
        print("skip fp8 attention: not an sm_90 GPU")
        return
    gen = torch.Generator(device="cuda").manual_seed(13)

    def factors(*xs):
        return [torch.tensor([x], device="cuda", dtype=torch.float32) for x in xs] if xs else [None] * 3

    def make(b, s, h, d, dt, bhsd):
        # e5m2 in [-2, 2], e4m3 in [-1, 1] (as AttentionGpuTest's fp8 cases).
        scale = 2.0 if dt == torch.float8_e5m2 else 1.0
        x = (uniform((b, h, s, d) if bhsd else (b, s, h, d), torch.float32, gen) * scale).to(dt)
        return x.transpose(1, 2) if bhsd else x

    e4m3, e5m2 = torch.float8_e4m3fn, torch.float8_e5m2
    for b, sq, sk, hq, hkv, d, causal, dt, bhsd, ds in [
            (2, 129, 129, 8, 2, 128, True, e4m3, False, (0.5, 1.25, 2.0)),
            (1, 100, 700, 4, 1, 256, False, e4m3, True, ()),
            (2, 300, 17, 4, 4, 128, True, e5m2, False, (2.0, 2.0, 0.5)),  # rows with no key
            (2, 1, 4096, 32, 8, 128, False, e4m3, False, (0.5, 1.25, 2.0))]:  # decode: split-KV
        q, k = make(b, sq, hq, d, dt, bhsd), make(b, sk, hkv, d, dt, bhsd)
        v = make(b, sk, hkv, 128, dt, bhsd)
        qd, kd, vd = factors(*ds)
        out, lse = kgen.attention(q, k, v, causal=causal, return_lse=True, q_descale=qd, k_descale=kd,
                                  v_descale=vd)
        torch.cuda.synchronize()
        name = f"fp8 attention {str(dt).split('.')[-1]} B{b} Sq{sq} Sk{sk} H{hq}/{hkv} D{d}" + \
            (f" descale {ds}" if ds else "")
        assert out.dtype == torch.bfloat16 and out.shape == (b, sq, hq, 128), (name, out.dtype, out.shape)
        scales = ds or (1.0, 1.0, 1.0)
        ref, ref_lse = fp8_attention_ref(q, k, v, causal, scales, naive=False)
        naive, naive_lse = fp8_attention_ref(q, k, v, causal, scales, naive=True)
        ok, msg = within_rule(out, ref, naive, torch.bfloat16)
        assert ok and bool(torch.isfinite(out).all()), f"{name}: {msg}"
        empty = torch.isinf(ref_lse)
        assert bool((lse[empty] == float("-inf")).all()), f"{name}: empty rows need LSE -inf"
        if bool((~empty).any()):
            ok, lse_msg = within_rule(lse[~empty], ref_lse[~empty], naive_lse[~empty].float(), torch.float32)
            assert ok, f"{name}: LSE: {lse_msg}"
        print(f"ok   {name:58s} {msg}")

    # The factors are read from device memory: a graph follows new values.
    q, k, v = make(1, 200, 4, 128, e4m3, False), make(1, 200, 2, 128, e4m3, False), \
        make(1, 200, 2, 128, e4m3, False)
    qd, kd, vd = factors(0.5, 1.25, 2.0)
    out = torch.empty(1, 200, 4, 128, device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # builds the kernel and any workspace before the capture
        kgen.attention(q, k, v, causal=True, q_descale=qd, k_descale=kd, v_descale=vd, out=out)
    s.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        kgen.attention(q, k, v, causal=True, q_descale=qd, k_descale=kd, v_descale=vd, out=out)
    qd.fill_(2.0)
    vd.fill_(0.25)
    out.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    expect_close("fp8 attention graph replay, new descale values", out,
                 fp8_attention_ref(q, k, v, True, (2.0, 1.25, 0.25), naive=False)[0],
                 fp8_attention_ref(q, k, v, True, (2.0, 1.25, 0.25), naive=True)[0], torch.bfloat16)
    print("ok   fp8 attention in a CUDA graph follows new descale values")

    q64 = make(1, 64, 2, 64, e4m3, False)
    expect_error("fp8 attention head dim 64", lambda: kgen.attention(q64, q64, q64), "128")
    qv = uniform((40, 2, 128), torch.float32, gen).to(e4m3)
    cu = torch.tensor([0, 15, 40], device="cuda", dtype=torch.int32)
    expect_error("fp8 attention varlen", lambda: kgen.attention(qv, qv, qv, cu_seqlens_q=cu, cu_seqlens_k=cu,
                                                                max_seqlen_q=25, max_seqlen_k=25), "varlen")
    qb = make(1, 64, 2, 128, torch.bfloat16, False)
    expect_error("descale factors on bf16 attention",
                 lambda: kgen.attention(qb, qb, qb, q_descale=factors(0.5)[0]), "fp8")


def mlstm_recurrent(q, k, v, i, f, C, n, m, eps=1e-6):
    """The mLSTM recurrent form in torch ops, in the dtype of C (fp64 or fp32)."""
    dt = C.dtype
    q, k, v, i, f = (t.to(dt) for t in (q, k, v, i, f))
    C, n, m = C.clone(), n.clone(), m.clone()
    scale = q.shape[-1] ** -0.5
    hs = []
    for t in range(q.shape[2]):
        lf = torch.nn.functional.logsigmoid(f[:, :, t])
        mnew = torch.maximum(lf + m, i[:, :, t])
        fp, ip = torch.exp(lf + m - mnew), torch.exp(i[:, :, t] - mnew)
        m = mnew
        C = fp[..., None, None] * C + (ip[..., None] * k[:, :, t])[..., :, None] * v[:, :, t][..., None, :]
        n = fp[..., None] * n + ip[..., None] * k[:, :, t]
        qs = scale * q[:, :, t]
        num = (qs[..., None, :] @ C).squeeze(-2)
        z = (qs * n).sum(-1)
        hs.append(num / (torch.maximum(z.abs(), torch.exp(-m)) + eps)[..., None])
    return torch.stack(hs, 2), (C, n, m)


def test_mlstm():
    """kgen.mlstm, recurrent and chunkwise, against the recurrent form in fp64;
    bound: 2 x the same formulation's fp32 error (test/MlstmHostReference.h)."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
    from mlstm import torch_chunkwise  # the bench's PyTorch chunkwise form
    g = torch.Generator(device="cuda").manual_seed(3)
    B, NH, S, DQK, DV = 2, 2, 64, 64, 128

    def rnd(*shape, lo=-1.0, hi=1.0):
        return torch.rand(*shape, device="cuda", generator=g) * (hi - lo) + lo

    q, k = rnd(B, NH, S, DQK).bfloat16(), rnd(B, NH, S, DQK).bfloat16()
    v = rnd(B, NH, S, DV).bfloat16()
    i, f = rnd(B, NH, S, lo=-10, hi=15).bfloat16(), rnd(B, NH, S, lo=-5, hi=10).bfloat16()
    zeros = (torch.zeros(B, NH, DQK, DV, device="cuda", dtype=torch.float64),
             torch.zeros(B, NH, DQK, device="cuda", dtype=torch.float64),
             torch.zeros(B, NH, device="cuda", dtype=torch.float64))
    ref, (Cr, nr, mr) = mlstm_recurrent(q, k, v, i, f, *zeros)
    rec32, _ = mlstm_recurrent(q, k, v, i, f, *(t.float() for t in zeros))
    chw32 = torch_chunkwise(torch, *(t.float() for t in (q, k, v, i, f)), chunk=32)
    for config, naive in [({"variant": "recurrent", "blockDV": 32, "warps": 4}, rec32),
                          ({"variant": "fused", "chunk": 32, "blockDV": 64, "warps": 4}, chw32),
                          ({"variant": "twophase", "chunk": 32, "blockDV": 32, "warps": 4}, chw32),
                          (None, None)]:
        h, (C, n, m) = kgen.mlstm(q, k, v, i, f, return_states=True, config=config)
        torch.cuda.synchronize()
        err = (h.double() - ref).abs().max().item()
        if naive is None:  # the dispatcher's choice: bounded by the worse formulation
            errn = max((rec32.bfloat16().double() - ref).abs().max().item(),
                       (chw32.bfloat16().double() - ref).abs().max().item())
        else:
            errn = (naive.bfloat16().double() - ref).abs().max().item()
        floor = ref.abs().max().item() * 2.0 ** -9  # half an ulp of bf16 at max|ref|
        bound = max(2 * errn, floor)
        if not err <= bound:
            failures.append(f"kgen.mlstm {config}: max|h - ref| = {err:.3g} > bound {bound:.3g}")
        if not torch.allclose(m.double(), mr, rtol=0, atol=1e-4):
            failures.append(f"kgen.mlstm {config}: final m differs from the reference")
        print(f"  mlstm {config}: max|h - ref| = {err:.3g}, bound {bound:.3g}")


def test_fp8():
    """fp8 inputs with per-tensor scales (sm_90a): e4m3 and e5m2 into bf16
    and f16, against a float64 reference; the rule's naive side is an fp32
    matmul of the same fp8 values, rounded to C (torch._scaled_mm, cuBLASLt,
    has no e5m2 x e5m2 kernel); an f32 C is refused."""
    if torch.cuda.get_device_capability() != (9, 0):
        print("skip fp8: not an sm_90 GPU")
        return
    gen = torch.Generator(device="cuda").manual_seed(11)
    sa = torch.tensor([0.37], device="cuda")
    sb = torch.tensor([2.9], device="cuda")
    for name, dt in (("e4m3", torch.float8_e4m3fn), ("e5m2", torch.float8_e5m2)):
        x = uniform((300, 1040), torch.float32, gen).to(dt)
        w = uniform((1000, 1040), torch.float32, gen).to(dt)
        ref = (x.double() @ w.double().t()) * (0.37 * 2.9)
        y = kgen.gemm(x, w.t(), scale_a=sa, scale_b=sb)
        torch.cuda.synchronize()
        assert y.dtype == torch.bfloat16 and y.shape == (300, 1000), (y.dtype, y.shape)
        naive32 = (x.float() @ w.float().t()) * (sa * sb)
        expect_close(f"fp8 {name} -> bf16", y, ref, naive32.bfloat16(), torch.bfloat16)
        y16 = kgen.gemm(x, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.float16)
        expect_close(f"fp8 {name} -> f16", y16, ref, naive32.half(), torch.float16)
        print(f"ok   fp8 {name}: {kgen.gemm_kernel(x, w.t(), scale_a=sa, scale_b=sb).name}")
    x = uniform((64, 256), torch.float32, gen).to(torch.float8_e4m3fn)
    w = uniform((128, 256), torch.float32, gen).to(torch.float8_e4m3fn)
    expect_error("fp8 layout nn", lambda: kgen.gemm(x, w.t().contiguous()), "layout nt")
    expect_error("fp8 into f32", lambda: kgen.gemm(x, w.t(), out_dtype=torch.float32), "not f32")
    expect_error("scales on bf16", lambda: kgen.gemm(x.bfloat16(), w.bfloat16().t(), scale_a=sa), "fp8 inputs")


def main():
    print(f"kgen {kgen.version()} from {kgen.library_path()} on {torch.cuda.get_device_name()}")
    if not kgen.has_device():
        failures.append("torch sees a CUDA GPU but kgen found none")
        finish()
    for name, fn in [("shapes", test_shapes), ("layout from strides", test_layout_from_strides),
                     ("streams and graphs", test_streams_and_graphs), ("errors", test_errors),
                     ("fp8", test_fp8), ("attention", test_attention),
                     ("attention decode steps", test_attention_decode_steps),
                     ("argument checks", test_argument_checks),
                     ("attention partial configs", test_attention_partial_configs),
                     ("fp8 attention", test_fp8_attention),
                     ("mlstm", test_mlstm)]:
        run(name, fn)
    finish()


if __name__ == "__main__":
    main()
