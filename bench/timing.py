"""How the benches time a call (bench/gemm.py, bench/attention.py and
bench/stream_read.py's read floor): each side captured in a CUDA graph that
calls it over rotating copies of its inputs (more than ROTATE_BYTES in all,
beyond the L2), replayed at least 50 times and for at least 30 ms; the
median per call."""

from __future__ import annotations

import math
import statistics

ROTATE_BYTES = 64 << 20  # H100/H200 L2 is 50-60 MB


def time_calls(torch, calls, use_graph: bool, min_ms: float = 30.0, min_trials: int = 50):
    """Median seconds per call of `calls` (each a no-argument function; they
    are run in turn, so they can rotate over input copies)."""
    inner = len(calls) * max(1, math.ceil(20 / len(calls)))  # calls per trial
    seq = [calls[i % len(calls)] for i in range(inner)]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for fn in calls:  # warm up outside capture: kgen compiles on first use
            fn()
    stream.synchronize()
    if use_graph:
        graph = torch.cuda.CUDAGraph()
        # Captured on the stream that warmed up: kgen's split-K workspace is
        # per stream and cannot be allocated during a capture.
        with torch.cuda.graph(graph, stream=stream):
            for fn in seq:
                fn()
        trial = graph.replay
    else:
        def trial():
            for fn in seq:
                fn()

    trial()  # warm
    torch.cuda.synchronize()
    times = []
    total = 0.0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    while len(times) < min_trials or total < min_ms:
        start.record()
        trial()
        end.record()
        end.synchronize()
        ms = start.elapsed_time(end)
        times.append(ms)
        total += ms
        if len(times) >= 100000:
            break
    return statistics.median(times) / 1e3 / inner
