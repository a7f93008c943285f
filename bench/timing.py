"""How the benches time a call (bench/gemm.py, bench/attention.py,
bench/mlstm.py and bench/stream_read.py's read floor): each side captured in
a CUDA graph that calls it over rotating copies of its inputs (more than
ROTATE_BYTES in all, beyond the L2), replayed at least min_trials times and
for at least min_ms; the median per call. bench/mlstm.py, whose calls take
from microseconds to tens of milliseconds, sizes the replayed batch by time
and caps the trials (batch_ms, max_ms)."""

from __future__ import annotations

import math
import statistics

ROTATE_BYTES = 64 << 20  # H100/H200 L2 is 50-60 MB


def time_calls(torch, calls, use_graph: bool, min_ms: float = 30.0, min_trials: int = 50,
               batch_ms: float | None = None, max_ms: float | None = None):
    """Median seconds per call of `calls` (each a no-argument function; they
    are run in turn, so they can rotate over input copies). A trial replays
    a batch of calls: at least 20, a multiple of len(calls); with batch_ms,
    as many as take about batch_ms by one timed call (1 to 20), and at least
    len(calls) when all of them take under 50 ms. With max_ms, the trials
    stop after max_ms of them (at least 3 trials) even short of min_trials
    and min_ms."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for fn in calls:  # warm up outside capture: kgen compiles on first use
            fn()
    stream.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if batch_ms is None:
        inner = len(calls) * max(1, math.ceil(20 / len(calls)))  # calls per trial
    else:
        with torch.cuda.stream(stream):
            start.record()
            calls[0]()
            end.record()
        end.synchronize()
        one = max(start.elapsed_time(end), 1e-3)
        inner = max(1, min(20, math.ceil(batch_ms / one)))
        if one * len(calls) < 50:
            inner = max(inner, len(calls))
    seq = [calls[i % len(calls)] for i in range(inner)]
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
    while len(times) < min_trials or total < min_ms:
        if max_ms is not None and len(times) >= 3 and total >= max_ms:
            break
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
