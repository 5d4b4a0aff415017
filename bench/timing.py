"""How the benchmark times things.

Per decision: each call is timed on its own with `time.perf_counter_ns()` around it, and
the timer's own cost (the median of back-to-back `perf_counter_ns()` pairs, measured in
the same run) is subtracted. Several rounds over all requests are pooled; the median and
the 99th percentile are taken over the pooled samples. The garbage collector stays on;
objects built before timing are frozen out of its scans (`gc.freeze()`). Throughput is separate: a plain
loop over all requests with no timer inside, median of rounds.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Timing:
    median_ns: float
    p99_ns: float
    per_second: float  # from the throughput loop
    mean_ns: float  # from the throughput loop
    samples: int


def timer_overhead_ns(rounds: int = 200_000) -> float:
    now = time.perf_counter_ns
    samples = []
    for _ in range(rounds):
        t0 = now()
        t1 = now()
        samples.append(t1 - t0)
    return float(statistics.median(samples))


def percentile(sorted_samples: Sequence[float], q: float) -> float:
    index = min(len(sorted_samples) - 1, max(0, round(q * (len(sorted_samples) - 1))))
    return float(sorted_samples[index])


def time_calls(
    fn: Callable[[Any], Any], inputs: Sequence[Any], rounds: int, overhead_ns: float
) -> Timing:
    return time_side_by_side({"fn": fn}, inputs, rounds, overhead_ns)["fn"]


def time_side_by_side(
    fns: Mapping[str, Callable[[Any], Any]], inputs: Sequence[Any], rounds: int, overhead_ns: float
) -> dict[str, Timing]:
    """Time several engines on the same inputs in alternating rounds (A B, then B A, ...):
    a noisy neighbour or a frequency change then lands on all of them alike, which keeps
    their ratio meaningful on a shared machine. Each engine runs over all the inputs in
    a round, so none evicts another's data mid-round."""
    now = time.perf_counter_ns
    names = list(fns)
    samples: dict[str, list[int]] = {name: [] for name in names}
    loops: dict[str, list[float]] = {name: [] for name in names}
    # The garbage collector stays on (a collection landing in a call is charged to it),
    # but what was built before timing is frozen out of its scans, as a server does after
    # loading a snapshot: otherwise each full collection walks the whole workspace.
    gc.collect()
    gc.freeze()
    for round_no in range(rounds):
        order = names if round_no % 2 == 0 else names[::-1]
        for name in order:
            fn, append = fns[name], samples[name].append
            for item in inputs:
                t0 = now()
                fn(item)
                t1 = now()
                append(t1 - t0)
    for round_no in range(rounds):
        order = names if round_no % 2 == 0 else names[::-1]
        for name in order:
            fn = fns[name]
            t0 = now()
            for item in inputs:
                fn(item)
            loops[name].append((now() - t0) / len(inputs))
    gc.unfreeze()
    return {name: _timing(samples[name], loops[name], overhead_ns) for name in names}


def _timing(samples: list[int], loops: list[float], overhead_ns: float) -> Timing:
    adjusted = sorted(max(0.0, s - overhead_ns) for s in samples)
    mean = statistics.median(loops)
    return Timing(
        median_ns=percentile(adjusted, 0.5),
        p99_ns=percentile(adjusted, 0.99),
        per_second=1e9 / mean if mean else float("inf"),
        mean_ns=mean,
        samples=len(adjusted),
    )
