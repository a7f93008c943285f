"""kgen: GPU kernels generated for one exact problem, from Python.

A ctypes binding over kgen's C API (libkgen.so, include/kgen/kgen_c.h)::

    import kgen, torch
    x = torch.randn(532, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(2048, 4096, device="cuda", dtype=torch.bfloat16)
    y = kgen.gemm(x, w.t())            # x @ w.T, layout "nt", on torch's stream

    print(kgen.emit(kgen.problem(532, 2048, 4096), target="sm_90a"))
    info = kgen.compile(kgen.problem(532, 2048, 4096))   # through the cache

The library is found through $KGEN_LIB, else build/lib/libkgen.so of the
source tree this package lives in, else the system's library path. Errors
raise kgen.Error carrying the C API's message.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import json
import os
import pathlib
import sys
import threading
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, Union

__all__ = [
    "Error",
    "KernelInfo",
    "Runtime",
    "attention",
    "compile",
    "emit",
    "gemm",
    "gemm_kernel",
    "has_device",
    "library_path",
    "mlstm",
    "problem",
    "default_runtime",
    "version",
]

# Status codes of kgen_c.h.
OK = 0
ERROR_INVALID_ARGUMENT = 1
ERROR_NO_DEVICE = 2
ERROR_RUNTIME = 3
ERROR_OUT_OF_MEMORY = 4
ERROR_INTERNAL = 5


class Error(RuntimeError):
    """A kgen error: `status` is the C API's code (kgen.ERROR_*), the message
    says what went wrong and how to fix it."""

    def __init__(self, message: str, status: int = ERROR_INVALID_ARGUMENT):
        super().__init__(message)
        self.status = status


class _KernelInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char * 256),
        ("target", ctypes.c_char * 16),
        ("config_json", ctypes.c_char * 256),
        ("cache_key", ctypes.c_char * 72),
        ("cache_hit", ctypes.c_int),
        ("loaded", ctypes.c_int),
        ("compile_ms", ctypes.c_double),
        ("binary_bytes", ctypes.c_int64),
    ]


@dataclass(frozen=True)
class KernelInfo:
    """What kgen.compile built, or the kernel kgen.gemm_kernel found."""

    name: str
    target: str
    config: dict
    cache_key: str
    cache_hit: bool
    loaded: bool  # loaded on this process's GPU
    compile_ms: float
    binary_bytes: int


_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[str] = None
_lock = threading.RLock()


def _candidates() -> list:
    env = os.environ.get("KGEN_LIB")
    if env:
        return [env]  # an explicit choice is never second-guessed
    out = [str(pathlib.Path(__file__).resolve().parents[2] / "build" / "lib" / "libkgen.so")]
    found = ctypes.util.find_library("kgen")
    if found:
        out.append(found)
    return out


class _AttentionArgs(ctypes.Structure):
    """kgen_attention_args_t (kgen/kgen_c.h)."""

    _fields_ = [
        ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p), ("o", ctypes.c_void_p),
        ("lse", ctypes.c_void_p), ("bias", ctypes.c_void_p), ("alibi_slopes", ctypes.c_void_p),
        ("cu_seqlens_q", ctypes.c_void_p), ("cu_seqlens_k", ctypes.c_void_p),
        ("batch", ctypes.c_int64), ("seqlen_q", ctypes.c_int64), ("seqlen_k", ctypes.c_int64),
        ("total_q", ctypes.c_int64),
        ("stride_q", ctypes.c_int64 * 3), ("stride_k", ctypes.c_int64 * 3), ("stride_v", ctypes.c_int64 * 3),
        ("stride_o", ctypes.c_int64 * 3), ("stride_bias", ctypes.c_int64 * 3),
        ("scale", ctypes.c_float),
        ("q_descale", ctypes.c_void_p), ("k_descale", ctypes.c_void_p), ("v_descale", ctypes.c_void_p),
    ]


class _GemmArgs(ctypes.Structure):
    """kgen_gemm_args_t (include/kgen/kgen_c.h)."""

    _fields_ = [(name, ctypes.c_void_p) for name in ("a", "b", "c")] + [
        (name, ctypes.c_int64) for name in ("m", "lda", "ldb", "ldc")
    ] + [(name, ctypes.c_float) for name in ("alpha", "beta")] + [
        (name, ctypes.c_void_p) for name in ("bias", "residual")
    ] + [(name, ctypes.c_int64)
         for name in ("ldr", "batch", "stride_a", "stride_b", "stride_c", "stride_bias", "stride_residual")] + [
        (name, ctypes.c_void_p) for name in ("scale_a", "scale_b")]


def _declare(lib: ctypes.CDLL) -> None:
    c_char_p, c_void_p, c_int, c_int64 = ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int64
    sigs = {
        "kgen_version": (c_char_p, []),
        "kgen_compiled_kernels": (ctypes.c_uint64, []),
        "kgen_last_error": (c_char_p, []),
        "kgen_runtime_create": (c_int, [c_char_p, ctypes.POINTER(c_void_p)]),
        "kgen_runtime_create_on": (c_int, [c_char_p, c_int, ctypes.POINTER(c_void_p)]),
        "kgen_runtime_destroy": (None, [c_void_p]),
        "kgen_has_device": (c_int, [c_void_p]),
        "kgen_runtime_device": (c_int, [c_void_p]),
        "kgen_runtime_target": (c_char_p, [c_void_p]),
        "kgen_gemm": (
            c_int,
            [c_void_p, c_char_p, c_void_p, c_void_p, c_void_p, c_int64, c_int64, c_int64, c_int64,
             ctypes.c_float, ctypes.c_float, c_void_p],
        ),
        "kgen_gemm_args_init": (None, [ctypes.POINTER(_GemmArgs)]),
        "kgen_gemm_ex": (c_int, [c_void_p, c_char_p, ctypes.POINTER(_GemmArgs), c_void_p]),
        "kgen_gemm_select": (c_int, [c_void_p, c_char_p, ctypes.POINTER(_GemmArgs), ctypes.POINTER(_KernelInfo)]),
        "kgen_emit": (c_int, [c_char_p, c_char_p, c_char_p, c_int, ctypes.POINTER(c_void_p)]),
        "kgen_compile": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p, ctypes.POINTER(_KernelInfo)]),
        "kgen_free": (None, [c_void_p]),
        "kgen_attention": (c_int, [c_void_p, c_char_p, c_char_p, ctypes.POINTER(_AttentionArgs), c_void_p]),
        "kgen_mlstm": (
            c_int,
            [c_void_p, c_char_p, c_char_p] + [c_void_p] * 12 + [c_int64, c_int64, c_int64, c_void_p],
        ),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


def _library() -> ctypes.CDLL:
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            tried = []
            for path in _candidates():
                try:
                    lib = ctypes.CDLL(path)
                    _declare(lib)
                except (OSError, AttributeError) as e:
                    tried.append(f"{path}: {e}")
                    continue
                _lib, _lib_path = lib, path
                break
            else:
                raise Error(
                    "cannot load kgen's C library (libkgen.so); build it (ninja -C build kgen_c) "
                    "or set KGEN_LIB to its path. Tried:\n  " + "\n  ".join(tried or ["(nothing)"]),
                    ERROR_RUNTIME,
                )
    return _lib


def library_path() -> str:
    """The path of the libkgen.so in use."""
    _library()
    return _lib_path


def _check(status: int) -> None:
    if status != OK:
        msg = _library().kgen_last_error().decode("utf-8", "replace")
        raise Error(msg or f"kgen failed with status {status}", status)


def _encode(x: Union[None, str, Mapping]) -> Optional[bytes]:
    if x is None:
        return None
    if isinstance(x, (bytes, bytearray)):
        return bytes(x)
    if isinstance(x, str):
        return x.encode()
    return json.dumps(dict(x), separators=(",", ":")).encode()


def version() -> str:
    return _library().kgen_version().decode()


def compiled_kernels() -> int:
    """Kernels this process has compiled so far (kernel-cache misses that ran
    the compiler): 0 for a run served by the cache and the tuning DB."""
    return int(_library().kgen_compiled_kernels())


def _kernel_info(info: _KernelInfo) -> KernelInfo:
    return KernelInfo(
        name=info.name.decode(),
        target=info.target.decode(),
        config=json.loads(info.config_json.decode()),
        cache_key=info.cache_key.decode(),
        cache_hit=bool(info.cache_hit),
        loaded=bool(info.loaded),
        compile_ms=float(info.compile_ms),
        binary_bytes=int(info.binary_bytes),
    )


_GEMM_ARG_NAMES = frozenset(name for name, _ in _GemmArgs._fields_)


@functools.lru_cache(maxsize=None)
def _gemm_defaults(lib: ctypes.CDLL) -> bytes:
    """kgen_gemm_args_init's defaults, read once: each call copies them."""
    args = _GemmArgs()
    lib.kgen_gemm_args_init(ctypes.byref(args))
    return bytes(args)


def _gemm_args(lib: ctypes.CDLL, fields: Mapping) -> _GemmArgs:
    """kgen_gemm_args_t from kgen_gemm_args_init's defaults and `fields`."""
    args = _GemmArgs.from_buffer_copy(_gemm_defaults(lib))
    for name, value in fields.items():
        if name not in _GEMM_ARG_NAMES:
            raise Error(f"kgen_gemm_args_t has no field '{name}'")
        setattr(args, name, value)
    return args


class Runtime:
    """A kgen::Runtime: one GPU (if any), the run-time compiler and the disk
    cache. `target`: None or "native" for the GPU's own (sm_90a without one),
    else "sm_80", "sm_90a", "gfx90a", "gfx942". `device`: the GPU's index
    (None: $KGEN_DEVICE, else 0; one asked for by index must exist)."""

    def __init__(self, target: Optional[str] = None, device: Optional[int] = None):
        self._lib = _library()
        handle = ctypes.c_void_p()
        _check(self._lib.kgen_runtime_create_on(_encode(target), -1 if device is None else int(device),
                                                ctypes.byref(handle)))
        self._handle = handle
        self._device = self._lib.kgen_runtime_device(handle)

    def close(self) -> None:
        if getattr(self, "_handle", None):
            self._lib.kgen_runtime_destroy(self._handle)
            self._handle = None

    def __del__(self):
        # At interpreter exit the GPU runtimes may already be torn down; the
        # process is ending anyway, so leave the runtime to it.
        if not sys.is_finalizing():
            self.close()

    @property
    def handle(self) -> ctypes.c_void_p:
        if not self._handle:
            raise Error("the kgen runtime is closed")
        return self._handle

    @property
    def has_device(self) -> bool:
        return bool(self._lib.kgen_has_device(self.handle))

    @property
    def device(self) -> int:
        """The index of the GPU the runtime runs on; -1 without one."""
        return self._device

    @property
    def target(self) -> str:
        return self._lib.kgen_runtime_target(self.handle).decode()


    def compile(self, problem, config=None, *, target: Optional[str] = None) -> KernelInfo:
        info = _KernelInfo()
        _check(self._lib.kgen_compile(self.handle, _encode(problem), _encode(config), _encode(target),
                                      ctypes.byref(info)))
        return _kernel_info(info)

    def gemm_select_raw(self, problem, **fields) -> KernelInfo:
        """kgen_gemm_select: the kernel kgen_gemm_ex would run with these
        fields (as gemm_ex_raw's; only their values are looked at)."""
        info = _KernelInfo()
        _check(self._lib.kgen_gemm_select(self.handle, _encode(problem), ctypes.byref(_gemm_args(self._lib, fields)),
                                          ctypes.byref(info)))
        return _kernel_info(info)

    def gemm_raw(self, problem, a: int, b: int, c: int, m: int = -1, lda: int = 0, ldb: int = 0,
                 ldc: int = 0, alpha: float = 1.0, beta: float = 0.0, stream: int = 0) -> None:
        """kgen_gemm on raw device pointers (ints): C = alpha*op(A)*op(B) + beta*C."""
        _check(self._lib.kgen_gemm(self.handle, _encode(problem), a, b, c, m, lda, ldb, ldc,
                                   float(alpha), float(beta), stream or None))

    def mlstm_raw(self, problem, q: int, k: int, v: int, i: int, f: int, h: int, c0: int = 0,
                  n0: int = 0, m0: int = 0, c_out: int = 0, n_out: int = 0, m_out: int = 0,
                  b: int = -1, nh: int = -1, s: int = -1, config=None, stream: int = 0) -> None:
        """kgen_mlstm on raw device pointers (ints; 0 for an absent state)."""
        _check(self._lib.kgen_mlstm(self.handle, _encode(problem),
                                    _encode(config) if config is not None else None,
                                    q, k, v, i, f, h, c0 or None, n0 or None, m0 or None,
                                    c_out or None, n_out or None, m_out or None, b, nh, s,
                                    stream or None))

    def gemm_ex_raw(self, problem, stream: int = 0, **fields) -> None:
        """kgen_gemm_ex on raw device pointers (ints): every field of
        kgen_gemm_args_t by name (a, b, c, m, lda, ..., bias, residual, ldr,
        batch, stride_a, ...); the others keep kgen_gemm_args_init's values."""
        _check(self._lib.kgen_gemm_ex(self.handle, _encode(problem), ctypes.byref(_gemm_args(self._lib, fields)),
                                      stream or None))


_default: Optional[Runtime] = None
_by_device: dict = {}


def _current_stream(t) -> int:
    """torch's current stream on tensor t's device, as a raw handle (a
    launch's stream). torch's private accessor skips building a Stream object
    (~5 us a call); torch.cuda.current_stream where it is missing. t is on
    a GPU (_on_device refused host memory before: the raw accessor would
    take the current device's stream)."""
    global _raw_stream
    if _raw_stream is None:
        import torch

        _raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or \
            (lambda index: torch.cuda.current_stream(index).cuda_stream)
    return _raw_stream(t.get_device())


_raw_stream = None  # device index -> torch's current stream there, found once


def default_runtime() -> Runtime:
    """The process's default runtime, created on first use: on GPU
    $KGEN_DEVICE, else 0 (kgen.compile's and kgen.has_device's)."""
    global _default
    if _default is None:
        with _lock:
            if _default is None:
                _default = Runtime()
    return _default


def _runtime_for(t, runtime: Optional[Runtime]) -> Runtime:
    """The runtime a call on tensor t runs on: `runtime` when given, else
    the process's runtime for t's GPU, created on its first call there (the
    default runtime where that is its device), as torch runs an op on its
    tensors' device."""
    import torch

    if runtime is not None:
        return runtime
    index = t.get_device() if isinstance(t, torch.Tensor) else -1
    rt = _by_device.get(index)
    if rt is None:
        if index < 0:  # refused by name in _on_device
            return default_runtime()
        with _lock:
            rt = _by_device.get(index)
            if rt is None:
                d = default_runtime()
                rt = d if d.device == index else Runtime(device=index)
                _by_device[index] = rt
    return rt


def has_device() -> bool:
    return default_runtime().has_device


def problem(m: int, n: int, k: int, *, ab: str = "bf16", c: Optional[str] = None, layout: str = "nt",
            static: Sequence[str] = ("n", "k"), align: Optional[Sequence[int]] = None, bias: Optional[str] = None,
            act: Optional[str] = None, residual: bool = False, batch: int = 1, tf32: bool = False) -> dict:
    """A GEMM problem as kgen's JSON takes it (see include/kgen/Problem.h):
    C (m x n) = op(A) (m x k) * op(B) (k x n); layout letters say how A and B
    are stored ('n': as op(), 't': transposed); `static` lists the
    dimensions baked into the kernel. The fused epilogue: `bias` "m" or "n",
    `act` relu | gelu_tanh | gelu_erf | silu, `residual`; `batch`: strided
    batches; `tf32`: f32 inputs through TF32 tensor cores (needed for ab="f32").
    `c` and `align` left out take kgen's defaults: C of ab's dtype and
    (8, 8, 8) elements, but for ab "e4m3" / "e5m2" (fp8, sm_90a, layout nt)
    bf16 and (16, 16, 8) (TMA's 16-byte rows)."""
    out = {
        "m": int(m),
        "n": int(n),
        "k": int(k),
        "ab": ab,
        "layout": layout,
        "static": list(static),
    }
    if c:
        out["c"] = c
    if align is not None:
        out["align"] = [int(x) for x in align]
    if bias:
        out["bias"] = bias
    if act:
        out["act"] = act
    if residual:
        out["residual"] = True
    if batch != 1:
        out["batch"] = int(batch)
    if tf32:
        out["tf32"] = True
    return out


def emit(problem: Union[str, Mapping], config: Union[None, str, Mapping] = None, *, target: str = "sm_90a",
         inline: bool = False) -> str:
    """The generated HIP source (no GPU needed). `config` None: the default;
    a dict or JSON string in part: tile fields ("block", "warps", "stages",
    ...) spell a config, strategy fields alone ({"loop": "gemv"},
    {"swap_ab": True}) take the dispatcher's choice among the configs with
    them (include/kgen/Codegen/PartialConfig.h). The same for every
    `config` below."""
    lib = _library()
    out = ctypes.c_void_p()
    _check(lib.kgen_emit(_encode(problem), _encode(config), _encode(target), int(inline), ctypes.byref(out)))
    try:
        return ctypes.string_at(out).decode()
    finally:
        lib.kgen_free(out)


def compile(problem: Union[str, Mapping], config: Union[None, str, Mapping] = None, *,
            target: Optional[str] = None) -> KernelInfo:
    """Build one variant through the disk cache (and load it when this
    process's GPU is of `target`). `target` None: the GPU's."""
    return default_runtime().compile(problem, config, target=target)



# ===----------------------------------------------------------------------=== #
# torch tensors
# ===----------------------------------------------------------------------=== #


@functools.lru_cache(maxsize=None)
def _dtype_names() -> dict:
    import torch

    names = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}
    for attr, name in (("float8_e4m3fn", "e4m3"), ("float8_e5m2", "e5m2")):
        if hasattr(torch, attr):
            names[getattr(torch, attr)] = name
    return names


def _dtype_name(dtype) -> str:
    names = _dtype_names()
    if dtype not in names:
        raise Error(f"dtype {dtype} is not supported: inputs are bfloat16, float16 or fp8 (float8_e4m3fn, "
                    f"float8_e5m2), C is bfloat16, float16 or float32")
    return names[dtype]


def _on_device(fn: str, rt: Runtime, tensors: Mapping) -> None:
    """Each tensor of `tensors` (name -> tensor or None) a CUDA tensor on
    the runtime's GPU: the kernels take raw pointers, so a tensor in host
    memory or on another GPU would fault or be read as garbage."""
    import torch

    tensor, device = torch.Tensor, rt._device
    for name, t in tensors.items():
        if t is None:
            continue
        if not isinstance(t, tensor):
            raise Error(f"{fn}: {name} must be a torch tensor, got {type(t).__name__}")
        index = t.get_device()
        if index == device and index >= 0:
            continue
        if index < 0:
            raise Error(f"{fn}: {name} is in host memory ({t.device}); kgen runs on CUDA tensors")
        if device >= 0:
            first = next(iter(tensors))
            raise Error(f"{fn}: {name} is on {t.device} but the call runs on cuda:{device} (where {first} is, "
                        f"or the runtime= given): all its tensors must be on one GPU")


def _storage(t, name: str, want: Optional[str]):
    """How a 2-D operand of logical shape (rows, cols) lies in memory: ('n',
    ld) when row-major (cols contiguous), ('t', ld) when it is the transpose
    of a row-major cols x rows tensor (as W.t() is). Both can hold for a
    single row or column; `want` picks, else 'n'."""
    rows, cols = t.shape
    s0, s1 = t.stride()
    forms = {}
    if (cols == 1 or s1 == 1) and (rows == 1 or s0 >= cols):
        forms["n"] = s0 if rows > 1 else cols
    if (rows == 1 or s0 == 1) and (cols == 1 or s1 >= rows):
        forms["t"] = s1 if cols > 1 else rows
    if want is not None:
        if want not in forms:
            how = "row-major (stride (ld, 1))" if want == "n" else "the transpose of a row-major tensor (stride (1, ld))"
            raise Error(f"{name}: layout '{want}' needs {name} stored {how}, but shape {tuple(t.shape)} has strides "
                        f"{tuple(t.stride())}; call .contiguous() (or .t().contiguous().t()) on it")
        return want, forms[want]
    if not forms:
        raise Error(f"{name} (shape {tuple(t.shape)}, strides {tuple(t.stride())}) is neither row-major nor the "
                    f"transpose of a row-major tensor; call .contiguous() on it")
    letter = "n" if "n" in forms else "t"
    return letter, forms[letter]


def gemm(a, b, c=None, *, layout: Optional[str] = None, alpha: float = 1.0, beta: float = 0.0,
         static: Sequence[str] = ("n", "k"), out_dtype=None, runtime: Optional[Runtime] = None,
         bias=None, bias_along: str = "n", act: Optional[str] = None, residual=None, tf32: bool = False,
         scale_a=None, scale_b=None):
    """C = alpha * (a @ b) + beta * C with a kgen kernel for this exact shape,
    on torch's current stream. Returns C (allocated when `c` is None).

    a: (M, K) and b: (K, N) CUDA tensors of one dtype (bfloat16 or float16;
    float32 with tf32=True: inputs rounded to TF32, fp32 accumulation).
    Each may be row-major or the transpose of a row-major tensor (x @ w.t()
    is layout "nt"); the layout and leading dimensions come from the
    strides, and `layout` ("nn", "nt", "tn", "tt") insists on one. c: an
    (M, N) row-major tensor (bfloat16, float16 or float32); with beta == 0
    it is only written. out_dtype: C's dtype when c is None (default: a's).
    static: dimensions baked into the kernel (default N and K; M is taken at
    run time so one kernel serves every batch size).

    fp8 (a and b float8_e4m3fn or float8_e5m2, sm_90a): b given as w.t()
    (layout "nt"), K a multiple of 16, C bfloat16 by default or float16
    (float32 is refused: the tensor cores' fp8 sums keep fewer bits);
    scale_a and scale_b are one-element float32 CUDA tensors, the
    per-tensor dequantization scales, C = alpha * scale_a * scale_b *
    (a @ b) + ... (as torch._scaled_mm); None means 1.

    The fused epilogue, C = act(alpha * a @ b + beta * C + bias) + residual:
    bias a contiguous vector of C's dtype, N long (bias_along "n", as a
    linear layer's) or M long ("m"); act relu | gelu_tanh | gelu_erf | silu;
    residual an (M, N) row-major tensor of C's dtype."""
    rt, prob, args, c = _gemm_call(a, b, c, layout=layout, alpha=alpha, beta=beta, static=static,
                                   out_dtype=out_dtype, runtime=runtime, bias=bias, bias_along=bias_along,
                                   act=act, residual=residual, tf32=tf32, scale_a=scale_a, scale_b=scale_b)
    if prob is None:  # M, N or K is 0: no kernel; an empty sum is 0
        if a.shape[0] and b.shape[1]:
            return c.zero_() if beta == 0 else c.mul_(beta)
        return c
    _check(rt._lib.kgen_gemm_ex(rt.handle, prob, ctypes.byref(args), _current_stream(a) or None))
    return c


def gemm_kernel(a, b, c=None, *, layout: Optional[str] = None, alpha: float = 1.0, beta: float = 0.0,
                static: Sequence[str] = ("n", "k"), out_dtype=None, runtime: Optional[Runtime] = None,
                bias=None, bias_along: str = "n", act: Optional[str] = None, residual=None,
                tf32: bool = False, scale_a=None, scale_b=None) -> KernelInfo:
    """The kernel kgen.gemm runs for the same arguments: the dispatcher's
    pick for the problem (the tuning DB's winner, else the heuristic) and
    the tensors' alignment, built or loaded on first use. Nothing runs."""
    rt, prob, args, _ = _gemm_call(a, b, c, layout=layout, alpha=alpha, beta=beta, static=static,
                                   out_dtype=out_dtype, runtime=runtime, bias=bias, bias_along=bias_along,
                                   act=act, residual=residual, tf32=tf32, scale_a=scale_a, scale_b=scale_b)
    if prob is None:
        raise Error("kgen.gemm_kernel: M, N or K is 0, so kgen.gemm runs no kernel")
    info = _KernelInfo()
    _check(rt._lib.kgen_gemm_select(rt.handle, prob, ctypes.byref(args), ctypes.byref(info)))
    return _kernel_info(info)


@functools.lru_cache(maxsize=1024)
def _gemm_problem_json(m: int, n: int, k: int, ab: str, c: str, layout: str, static: tuple, bias: Optional[str],
                       act: Optional[str], residual: bool, tf32: bool) -> bytes:
    """kgen.gemm's problem JSON, encoded once per shape and features (a loop
    of calls sends the text each call; the C API remembers it parsed)."""
    return _encode(problem(m, n, k, ab=ab, c=c, layout=layout, static=static, bias=bias, act=act,
                           residual=residual, tf32=tf32))


def _gemm_call(a, b, c, *, layout, alpha, beta, static, out_dtype, runtime, bias, bias_along, act, residual,
               tf32, scale_a=None, scale_b=None):
    """kgen.gemm's arguments checked and turned into (runtime, problem,
    kgen_gemm_args_t, C), C allocated when None; the problem is None when no
    kernel runs (M, N or K is 0)."""
    import torch

    rt = _runtime_for(a, runtime)
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        raise Error("kgen.gemm takes torch tensors")
    if a.dim() != 2 or b.dim() != 2:
        raise Error(f"kgen.gemm takes 2-D tensors, got a {tuple(a.shape)} and b {tuple(b.shape)}")
    (M, K), (K2, N) = a.shape, b.shape
    if K != K2:
        raise Error(f"kgen.gemm: a is {M}x{K} but b is {K2}x{N}; inner dimensions differ")
    if a.dtype != b.dtype:
        raise Error(f"kgen.gemm: a is {a.dtype} but b is {b.dtype}; they must match")
    ab = _dtype_name(a.dtype)
    fp8 = ab in ("e4m3", "e5m2")
    if (ab == "f32") != bool(tf32):
        raise Error("kgen.gemm: float32 inputs need tf32=True (TF32 tensor cores), and tf32=True needs float32 "
                    "inputs; or use bfloat16 or float16")
    if layout is not None and (len(layout) != 2 or any(x not in "nt" for x in layout)):
        raise Error(f"kgen.gemm: layout '{layout}' must be one of nn, nt, tn, tt")
    if c is None:
        if beta != 0:
            raise Error("kgen.gemm: beta != 0 reads C; pass c")
        c = torch.empty((M, N), dtype=out_dtype or (torch.bfloat16 if fp8 else a.dtype), device=a.device)
    else:
        if not isinstance(c, torch.Tensor) or c.dim() != 2 or tuple(c.shape) != (M, N):
            raise Error(f"kgen.gemm: c must be a {M}x{N} tensor, got {getattr(c, 'shape', type(c))}")
        if out_dtype is not None and out_dtype != c.dtype:
            raise Error(f"kgen.gemm: out_dtype {out_dtype} differs from c's dtype {c.dtype}")
    cname = _dtype_name(c.dtype)
    if cname in ("e4m3", "e5m2"):
        raise Error("kgen.gemm: C cannot be fp8 (an input type only); use bfloat16, float16 or float32")
    _on_device("kgen.gemm", rt, {"a": a, "b": b, "c": c, "bias": bias, "residual": residual, "scale_a": scale_a,
                                 "scale_b": scale_b})
    if M == 0 or N == 0:
        return rt, None, None, c
    if K == 0:  # an empty sum, as torch defines it
        if bias is not None or act or residual is not None:
            raise Error("kgen.gemm: K = 0 with a fused epilogue; apply bias, act and residual in torch")
        return rt, None, None, c
    la, lda = _storage(a, "a", layout[0] if layout else None)
    lb, ldb = _storage(b, "b", layout[1] if layout else None)
    _, ldc = _storage(c, "c", "n")
    # kgen_gemm_args_init's defaults, then this call's fields.
    args = _GemmArgs.from_buffer_copy(_gemm_defaults(rt._lib))
    if bias is not None:
        want = M if bias_along == "m" else N
        if bias_along not in ("m", "n") or bias.dim() != 1 or \
                bias.shape[0] != want or not bias.is_contiguous() or bias.dtype != c.dtype:
            raise Error(f"kgen.gemm: bias must be a contiguous vector of {want} {c.dtype} on {a.device} "
                        f"(bias_along '{bias_along}')")
        args.bias = bias.data_ptr()
    if residual is not None:
        if tuple(residual.shape) != (M, N) or residual.dtype != c.dtype:
            raise Error(f"kgen.gemm: residual must be a {M}x{N} {c.dtype} tensor on {a.device}")
        _, ldr = _storage(residual, "residual", "n")
        args.residual = residual.data_ptr()
        args.ldr = ldr
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s is None:
            continue
        if not fp8:
            raise Error(f"kgen.gemm: {name} is for fp8 inputs; fold a scale of {a.dtype} inputs into alpha")
        if s.numel() != 1 or s.dtype != torch.float32:
            raise Error(f"kgen.gemm: {name} must be a one-element float32 tensor on {a.device}")
        setattr(args, name, s.data_ptr())
    prob = _gemm_problem_json(int(M), int(N), int(K), ab, cname, la + lb, tuple(static),
                              bias_along if bias is not None else None, act, residual is not None, bool(tf32))
    args.a, args.b, args.c = a.data_ptr(), b.data_ptr(), c.data_ptr()
    args.m, args.lda, args.ldb, args.ldc = M, lda, ldb, ldc
    args.alpha, args.beta = float(alpha), float(beta)
    return rt, prob, args, c


# ===----------------------------------------------------------------------=== #
# Attention
# ===----------------------------------------------------------------------=== #


@functools.lru_cache(maxsize=1024)
def _attention_problem_json(hq: int, hkv: int, d: int, dv: int, dtype: str, causal: bool, window: tuple,
                            varlen: bool, alibi: bool, bias: bool, lse: bool) -> bytes:
    """kgen.attention's problem JSON (the features; batch and sequence
    lengths are the args')."""
    return _encode({"family": "attention", "heads": [hq, hkv], "head_dim": [d, dv], "dtype": dtype,
                    "causal": causal, "window": list(window), "varlen": varlen, "alibi": alibi, "bias": bias,
                    "lse": lse})


def attention(q, k, v, *, causal: bool = False, window: Optional[Sequence[int]] = None,
              scale: Optional[float] = None, return_lse: bool = False, alibi_slopes=None, bias=None,
              cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q: Optional[int] = None,
              max_seqlen_k: Optional[int] = None, config=None, out=None, runtime: Optional[Runtime] = None,
              q_descale=None, k_descale=None, v_descale=None):
    """Flash attention forward with a kgen kernel, on torch's current stream.

    q: (B, Sq, Hq, D), k: (B, Sk, Hkv, D), v: (B, Sk, Hkv, Dv), any strides
    with the head dim contiguous (a BHSD tensor passed as .transpose(1, 2)
    works as is), of one dtype: bfloat16 or float16 (O the same), or fp8.
    With cu_seqlens_q/k (int32, B + 1), q is (total_q, Hq, D) and k, v
    (total_k, Hkv, D) packed, as FlashAttention's varlen API.
    window: (left, right), -1 for an unbounded side; causal is bottom-right
    aligned. alibi_slopes: (Hq,) float32; bias: (B, Hq, Sq, Sk) of O's dtype
    (last dim contiguous). Returns o, or (o, lse) with lse float32 (B, Hq,
    Sq) (varlen: (Hq, total_q)), natural log.

    fp8 (q, k, v all float8_e4m3fn or all float8_e5m2; sm_90a, D 128 or 256,
    Dv 128, no varlen, strides multiples of 16 elements): O (and the bias)
    is bfloat16 and P enters P V in fp8, as FlashAttention-3's fp8 forward.
    q_descale, k_descale, v_descale: one-element float32 CUDA tensors, the
    per-tensor dequantization factors (None: 1): scores are (q k^T) *
    q_descale * k_descale * scale and o = softmax(...) (v * v_descale). The
    kernel reads them, so a captured graph follows new values. Other dtypes
    take none.

    config: None (the dispatcher's), a full config ({"loop": "wgmma",
    "block": [64, 64], "warps": 4, "stages": 3, "splits": 8, "pack_gqa":
    True}), or a strategy alone ({"pack_gqa": True}, {"persistent": True}:
    the dispatcher's choice among the configs with it)."""
    import torch

    rt = _runtime_for(q, runtime)
    varlen = cu_seqlens_q is not None
    dt = _dtype_name(q.dtype)
    fp8 = dt in ("e4m3", "e5m2")
    if dt == "f32" or k.dtype != q.dtype or v.dtype != q.dtype:
        raise Error(f"kgen.attention: q, k, v must share one dtype, bfloat16, float16 or fp8 (float8_e4m3fn, "
                    f"float8_e5m2); got {q.dtype}, {k.dtype}, {v.dtype}")
    odtype = torch.bfloat16 if fp8 else q.dtype
    descales = {}
    for name, s in (("q_descale", q_descale), ("k_descale", k_descale), ("v_descale", v_descale)):
        if s is None:
            continue
        if not fp8:
            raise Error(f"kgen.attention: {name} is for fp8 inputs (float8_e4m3fn, float8_e5m2), not {q.dtype}; "
                        f"leave it None")
        if not isinstance(s, torch.Tensor) or s.numel() != 1 or s.dtype != torch.float32:
            raise Error(f"kgen.attention: {name} must be a one-element float32 tensor on {q.device}")
        descales[name] = s.data_ptr()
    _on_device("kgen.attention", rt, {"q": q, "k": k, "v": v, "out": out, "bias": bias, "alibi_slopes": alibi_slopes,
                                      "cu_seqlens_q": cu_seqlens_q, "cu_seqlens_k": cu_seqlens_k,
                                      "q_descale": q_descale, "k_descale": k_descale, "v_descale": v_descale})
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != (3 if varlen else 4) or t.stride(-1) != 1:
            raise Error(f"kgen.attention: {name} must be {'3' if varlen else '4'}-D with the head dim contiguous, "
                        f"got shape {tuple(t.shape)} strides {tuple(t.stride())}")
    # The kernels index every tensor by these sizes, so each must have them.
    if varlen:
        if cu_seqlens_k is None or max_seqlen_q is None or max_seqlen_k is None:
            raise Error("kgen.attention: varlen needs cu_seqlens_q, cu_seqlens_k, max_seqlen_q and max_seqlen_k")
        batch = cu_seqlens_q.numel() - 1
        for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
            if t.dtype != torch.int32 or t.dim() != 1 or t.numel() != batch + 1 or not t.is_contiguous():
                raise Error(f"kgen.attention: {name} must be a contiguous int32 vector of batch + 1 offsets "
                            f"({batch + 1}: cu_seqlens_q's length), got {t.dtype} of shape {tuple(t.shape)}")
        sq, sk = int(max_seqlen_q), int(max_seqlen_k)
        total_q, hq, d = q.shape
        total_k, hkv, dv = k.shape[0], k.shape[1], v.shape[2]
        want_k, want_v = (total_k, hkv, d), (total_k, hkv, dv)
    else:
        batch, sq, hq, d = q.shape
        sk, hkv, dv = k.shape[1], k.shape[2], v.shape[3]
        total_q = -1
        want_k, want_v = (batch, sk, hkv, d), (batch, sk, hkv, dv)
    if tuple(k.shape) != want_k or tuple(v.shape) != want_v:
        lead = "total_k" if varlen else "B, Sk"
        raise Error(f"kgen.attention: k {tuple(k.shape)} and v {tuple(v.shape)} do not match q {tuple(q.shape)}: "
                    f"k is ({lead}, Hkv, D) with q's D, v ({lead}, Hkv, Dv)")
    o_shape = tuple(q.shape[:-1]) + (dv,)
    if out is None:
        out = torch.empty(o_shape, dtype=odtype, device=q.device)
    elif out.dtype != odtype:
        raise Error(f"kgen.attention: out is {out.dtype}; O of {q.dtype} inputs is {odtype}")
    elif tuple(out.shape) != o_shape or out.stride(-1) != 1:
        raise Error(f"kgen.attention: out must be {o_shape} (q's shape with v's head dim) with the head dim "
                    f"contiguous, got shape {tuple(out.shape)} strides {tuple(out.stride())}")
    if bias is not None:
        if bias.dtype != odtype:
            raise Error(f"kgen.attention: bias is {bias.dtype}; the bias of {q.dtype} inputs is {odtype}")
        if tuple(bias.shape) != (batch, hq, sq, sk):
            raise Error(f"kgen.attention: bias must be (B, Hq, Sq, Sk) = {(batch, hq, sq, sk)} (expand() a "
                        f"broadcast one), got {tuple(bias.shape)}")
    if alibi_slopes is not None and (alibi_slopes.dtype != torch.float32 or alibi_slopes.dim() != 1 or
                                     alibi_slopes.numel() != hq or not alibi_slopes.is_contiguous()):
        raise Error(f"kgen.attention: alibi_slopes must be a contiguous float32 vector of Hq = {hq} slopes, got "
                    f"{alibi_slopes.dtype} of shape {tuple(alibi_slopes.shape)}")
    lse = None
    if return_lse:
        shape = (hq, total_q) if varlen else (batch, hq, sq)
        lse = torch.empty(shape, dtype=torch.float32, device=q.device)
    # The problem's features; its sizes travel in the args (batch, seqlen_q,
    # seqlen_k), so a decode loop sends the same text every step, which both
    # sides remember (_attention_problem_json, the C API's parsed problems).
    prob = _attention_problem_json(int(hq), int(hkv), int(d), int(dv), dt, bool(causal),
                                   tuple(int(x) for x in window) if window is not None else (-1, -1),
                                   varlen, alibi_slopes is not None, bias is not None, bool(return_lse))
    a = _AttentionArgs()
    a.q, a.k, a.v, a.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr()
    a.lse = lse.data_ptr() if lse is not None else None
    a.bias = bias.data_ptr() if bias is not None else None
    a.alibi_slopes = alibi_slopes.data_ptr() if alibi_slopes is not None else None
    a.cu_seqlens_q = cu_seqlens_q.data_ptr() if varlen else None
    a.cu_seqlens_k = cu_seqlens_k.data_ptr() if varlen else None
    a.batch, a.seqlen_q, a.seqlen_k, a.total_q = int(batch), int(sq), int(sk), int(total_q)

    def strides(t):
        s = t.stride()
        return (0, s[0], s[1]) if varlen else (s[0], s[1], s[2])

    a.stride_q[:], a.stride_k[:], a.stride_v[:], a.stride_o[:] = strides(q), strides(k), strides(v), strides(out)
    if bias is not None:
        if bias.stride(-1) != 1:
            raise Error("kgen.attention: bias needs its last dim contiguous")
        a.stride_bias[:] = (bias.stride(0), bias.stride(1), bias.stride(2))
    a.scale = float(scale) if scale is not None else 0.0
    for name, ptr in descales.items():
        setattr(a, name, ptr)
    _check(rt._lib.kgen_attention(rt.handle, prob, _encode(config), ctypes.byref(a), _current_stream(q)))
    return (out, lse) if return_lse else out


def mlstm(q, k, v, i, f, *, states=None, return_states: bool = False, states_out=None,
          eps: float = 1e-6, config=None, runtime: Optional[Runtime] = None):
    """The mLSTM forward on torch's current stream.

    q, k: (B, NH, S, DQK); v: (B, NH, S, DV); i, f: (B, NH, S) gate
    pre-activations; all one dtype (bf16, f16, f32), contiguous, on the GPU.
    states: optional initial (C (B, NH, DQK, DV), n (B, NH, DQK), m (B, NH)),
    fp32. With return_states, returns (h, (C, n, m)); states_out gives the
    tensors to write them to (may be `states` itself: updated in place).
    config: a dict forcing a variant ({"variant": "fused", "chunk": 64,
    "blockDV": 64, "warps": 4}), or a strategy alone ({"variant":
    "chunkpar"}: the dispatcher's choice among those); None: the
    dispatcher's choice.
    """
    import torch
    rt = _runtime_for(q, runtime)
    if q.dim() != 4:
        raise Error(f"kgen.mlstm: q must be (B, NH, S, DQK), got shape {tuple(q.shape)}")
    B, NH, S, DQK = q.shape
    DV = v.shape[-1]
    final = bool(return_states or states_out is not None)
    if final and states_out is None:
        states_out = (torch.empty((B, NH, DQK, DV), dtype=torch.float32, device=q.device),
                      torch.empty((B, NH, DQK), dtype=torch.float32, device=q.device),
                      torch.empty((B, NH), dtype=torch.float32, device=q.device))
    c0, n0, m0 = states if states is not None else (None, None, None)
    cT, nT, mT = states_out if states_out is not None else (None, None, None)
    # The kernels index every tensor by these sizes, so each must have them.
    inputs = {"q": (q, (B, NH, S, DQK)), "k": (k, (B, NH, S, DQK)), "v": (v, (B, NH, S, DV)), "i": (i, (B, NH, S)),
              "f": (f, (B, NH, S))}
    states_shapes = ((B, NH, DQK, DV), (B, NH, DQK), (B, NH))
    fp32 = {f"states[{j}]": (t, shape) for j, (t, shape) in enumerate(zip((c0, n0, m0), states_shapes))}
    fp32.update({f"states_out[{j}]": (t, shape) for j, (t, shape) in enumerate(zip((cT, nT, mT), states_shapes))})
    _on_device("kgen.mlstm", rt, {name: t for name, (t, _) in {**inputs, **fp32}.items()})
    for name, (t, shape) in {**inputs, **fp32}.items():
        dtype = q.dtype if name in inputs else torch.float32
        if t is not None and (tuple(t.shape) != shape or t.dtype != dtype or not t.is_contiguous()):
            raise Error(f"kgen.mlstm: {name} must be a contiguous {dtype} tensor of shape {shape}, got {t.dtype} "
                        f"of shape {tuple(t.shape)}{'' if t.is_contiguous() else ' (not contiguous)'}")
    h = torch.empty((B, NH, S, DV), dtype=q.dtype, device=q.device)
    prob = _mlstm_problem_json(int(DQK), int(DV), _dtype_name(q.dtype), int(B), int(NH), int(S), states is not None,
                               final, float(eps))
    ptr = lambda t: t.data_ptr() if t is not None else 0
    stream = _current_stream(q)
    rt.mlstm_raw(prob, ptr(q), ptr(k), ptr(v), ptr(i), ptr(f), ptr(h), ptr(c0), ptr(n0), ptr(m0), ptr(cT), ptr(nT),
                 ptr(mT), B, NH, S, config, stream)
    return (h, states_out) if final else h


@functools.lru_cache(maxsize=1024)
def _mlstm_problem_json(dqk: int, dv: int, dtype: str, b: int, nh: int, s: int, initial: bool, final: bool,
                        eps: float) -> bytes:
    """kgen.mlstm's problem JSON, encoded once per shape and features."""
    return _encode({"dqk": dqk, "dv": dv, "dtype": dtype, "b": b, "nh": nh, "s": s, "initial": initial,
                    "final": final, "eps": eps})
