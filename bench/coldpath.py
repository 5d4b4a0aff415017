"""The cold path: what a call costs before anything is warm, part of `make bench`.

On the same workload and requests as the decision benchmark (`bench.run`):

- **First call vs warm, per (profile, tool) pair.** Each round compiles a fresh snapshot
  and decides the requests in order, each call timed on its own: the first call of each
  pair is a first-call sample. Then the first call of each pair is decided again, twice
  (warm samples). The verdict is the first-call median against the warm median (target:
  at most 2x). The pairs whose plan the compile left to the first call (`plan built on
  first use`) are also shown alone.
- **Unknown tools.** 2,000 names the workspace does not have, spread over the profiles,
  each decided once (first call of the name), then three times again (its answer kept,
  `engine.unknowntools`).
- **Building a request.** `Request(profile, tool, args, context, agent, None)` from the
  fields of each received request, a loop with no timer inside minus the same loop
  building nothing, median of rounds (target: at most 0.3 µs); and, timed per call side
  by side, `decide` of a request built beforehand, `decide_call` of the same fields (no
  request: what the services do), and building the request then `decide` (target:
  `decide_call` as fast as `decide`, within 5%).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.timing import percentile, time_side_by_side
from engine.compile import Snapshot, compile_workspace
from engine.decision import Request
from engine.workspace import Workspace

TARGET_FIRST_RATIO = 2.0
TARGET_REQUEST_NS = 300.0
TARGET_DECIDE_CALL_SLACK = 1.05  # decide_call's median within 5% of decide's
UNKNOWN_NAMES = 2_000


@dataclass
class ColdResult:
    pairs: int  # distinct (profile, tool) pairs per round
    built_later: int  # of which the compile left the plan to the first call
    first_median_ns: float
    first_p99_ns: float
    later_median_ns: float  # first calls of pairs whose plan is built on first use
    later_p99_ns: float
    warm_median_ns: float
    warm_p99_ns: float
    unknown_first_median_ns: float
    unknown_first_p99_ns: float
    unknown_again_median_ns: float
    request_ns: float  # building a Request, per call
    decide_ns: float  # decide(request built beforehand), median
    decide_call_ns: float  # decide_call(fields), median
    build_and_decide_ns: float  # decide(Request(fields)), median

    @property
    def ratio(self) -> float:
        return self.first_median_ns / max(self.warm_median_ns, 1.0)

    @property
    def later_ratio(self) -> float:
        return self.later_median_ns / max(self.warm_median_ns, 1.0)


def _timed(snapshot: Snapshot, request: Request, overhead_ns: float) -> float:
    now = time.perf_counter_ns
    t0 = now()
    snapshot.decide(request)
    t1 = now()
    return max(0.0, t1 - t0 - overhead_ns)


def _first_calls(
    workspace: Workspace, requests: Sequence[Request], rounds: int, overhead_ns: float
) -> tuple[list[float], list[float], list[float], int, int]:
    """(first-call samples, those of plans built on first use, warm samples, pairs,
    pairs built on first use), pooled over `rounds` fresh snapshots."""
    first: list[float] = []
    later: list[float] = []
    warm: list[float] = []
    # Which pairs the compile leaves to their first call, from a snapshot of their own
    # (asking the timed one would warm its index before its first calls).
    compiled = compile_workspace(workspace)
    unbuilt = {
        (r.profile, r.tool)
        for r in requests
        if r.profile in compiled.profiles and r.tool not in compiled.profiles[r.profile].plans
    }
    del compiled
    firsts: list[Request] = []
    for _ in range(rounds):
        snapshot = compile_workspace(workspace)
        gc.collect()
        gc.freeze()  # the snapshot out of the collector's scans, as a server does
        seen: set[tuple[str, str]] = set()
        firsts = []
        for request in requests:
            key = (request.profile, request.tool)
            if key in seen:
                snapshot.decide(request)
                continue
            sample = _timed(snapshot, request, overhead_ns)
            seen.add(key)
            firsts.append(request)
            first.append(sample)
            if key in unbuilt:
                later.append(sample)
        for _ in range(2):
            warm.extend(_timed(snapshot, request, overhead_ns) for request in firsts)
        gc.unfreeze()
    pairs = len(firsts)
    return first, later, warm, pairs, len(unbuilt & {(r.profile, r.tool) for r in firsts})


def _unknown(
    workspace: Workspace, requests: Sequence[Request], overhead_ns: float
) -> tuple[list[float], list[float]]:
    snapshot = compile_workspace(workspace)
    calls = [
        Request(requests[i].profile, f"{requests[i].tool}-nope{i}", requests[i].args)
        for i in range(min(UNKNOWN_NAMES, len(requests)))
    ]
    gc.collect()
    gc.freeze()
    first = [_timed(snapshot, request, overhead_ns) for request in calls]
    again = [_timed(snapshot, request, overhead_ns) for _ in range(3) for request in calls]
    gc.unfreeze()
    return first, again


def _request_ns(fields: Sequence[tuple[Any, ...]], rounds: int) -> float:
    """Building a Request per call: a loop minus the same loop building nothing."""
    now = time.perf_counter_ns
    build, empty = [], []
    for _ in range(rounds):
        t0 = now()
        for profile, tool, args, context, agent, thread in fields:
            Request(profile, tool, args, context, agent, thread)
        t1 = now()
        for profile, tool, args, context, agent, thread in fields:  # noqa: B007
            pass
        t2 = now()
        build.append((t1 - t0) / len(fields))
        empty.append((t2 - t1) / len(fields))
    return max(0.0, statistics.median(build) - statistics.median(empty))


def run_cold(
    workspace: Workspace, requests: Sequence[Request], rounds: int, overhead_ns: float
) -> ColdResult:
    first, later, warm, pairs, built_later = _first_calls(workspace, requests, rounds, overhead_ns)
    unknown_first, unknown_again = _unknown(workspace, requests, overhead_ns)
    agent: dict[str, Any] = {"id": "agent-1", "name": "bench"}  # as the services pass one
    fields = [(r.profile, r.tool, r.args, r.context, agent, None) for r in requests]
    request_ns = _request_ns(fields, max(3, rounds))
    snapshot = compile_workspace(workspace)
    built = [Request(*f) for f in fields]
    for request in built:
        snapshot.decide(request)  # every plan built: this part times warm calls
    decide, decide_call = snapshot.decide, snapshot.decide_call

    def by_request(i: int) -> object:
        return decide(built[i])

    def by_fields(i: int) -> object:  # as a service calls it: the fields at hand
        profile, tool, args, context, agent, thread = fields[i]
        return decide_call(profile, tool, args, context, agent, thread)

    def build_then_decide(i: int) -> object:
        profile, tool, args, context, agent, thread = fields[i]
        return decide(Request(profile, tool, args, context, agent, thread))

    timed = time_side_by_side(
        {"decide": by_request, "decide_call": by_fields, "build_and_decide": build_then_decide},
        list(range(len(fields))),
        max(1, rounds),
        overhead_ns,
    )
    first.sort()
    later.sort()
    warm.sort()
    unknown_first.sort()
    unknown_again.sort()
    return ColdResult(
        pairs=pairs,
        built_later=built_later,
        first_median_ns=percentile(first, 0.5),
        first_p99_ns=percentile(first, 0.99),
        later_median_ns=percentile(later, 0.5) if later else 0.0,
        later_p99_ns=percentile(later, 0.99) if later else 0.0,
        warm_median_ns=percentile(warm, 0.5),
        warm_p99_ns=percentile(warm, 0.99),
        unknown_first_median_ns=percentile(unknown_first, 0.5),
        unknown_first_p99_ns=percentile(unknown_first, 0.99),
        unknown_again_median_ns=percentile(unknown_again, 0.5),
        request_ns=request_ns,
        decide_ns=timed["decide"].median_ns,
        decide_call_ns=timed["decide_call"].median_ns,
        build_and_decide_ns=timed["build_and_decide"].median_ns,
    )
