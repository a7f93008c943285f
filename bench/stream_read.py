"""The floor of a memory-bound row, measured: how long one plain kernel takes
to read as many bytes as the call moves, timed exactly as the calls are
(bench/timing.py's time_calls: CUDA graph replay over rotating buffers beyond
the L2). Its %HBM is what a kernel of that size reaches on this GPU with
its launch, ramp and tail, against the vendor's peak, which no kernel of a
few microseconds reaches.

The reader is a Triton kernel (each program XOR-folds a contiguous chunk of
32-bit words, one store a program), run at several grid sizes and block
shapes; the best time is reported. Without Triton there is no floor (None).
"""

from __future__ import annotations

import functools
import math

from timing import ROTATE_BYTES, time_calls


@functools.lru_cache(maxsize=1)
def _kernel():
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def read_words(x, out, n, chunk, BLOCK: tl.constexpr):
        start = tl.program_id(0).to(tl.int64) * chunk
        acc = tl.zeros([BLOCK], dtype=tl.int32)
        for i in range(0, chunk, BLOCK):
            offs = start + i + tl.arange(0, BLOCK)
            acc ^= tl.load(x + offs, mask=offs < n, other=0)
        tl.store(out + tl.program_id(0), tl.xor_sum(acc, 0))

    return read_words


def read_time(torch, nbytes: int, use_graph: bool = True):
    """Seconds the fastest of the reader's configurations takes to read
    `nbytes` (one contiguous buffer a call, rotated like the inputs), or
    None without Triton."""
    kernel = _kernel()
    if kernel is None:
        return None
    words = max(1, (nbytes + 3) // 4)
    sets = max(1, math.ceil(ROTATE_BYTES / (4 * words)))
    bufs = [torch.ones(words, dtype=torch.int32, device="cuda") for _ in range(sets)]
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    out = torch.empty(16 * sms, dtype=torch.int32, device="cuda")
    best = math.inf
    for block, warps in ((1024, 4), (2048, 8)):
        for per_sm in (1, 2, 4, 8, 16):
            chunk = math.ceil(words / (per_sm * sms) / block) * block
            grid = (math.ceil(words / chunk),)
            t = time_calls(torch, [lambda x=x: kernel[grid](x, out, words, chunk, BLOCK=block, num_warps=warps)
                                   for x in bufs], use_graph)
            best = min(best, t)
    return best
