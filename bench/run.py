"""`make bench` = `python -m bench.run`: the decision benchmark of issue 2, item 9.

For each size (100, 1,000 and 10,000 roles; always 100 profiles of 10 roles, 5,000
toolset tools, 20,000 requests) it goes through the real pipeline (DSL text ->
`check_sources` -> `compile_workspace` -> `Snapshot.decide`), times the obvious
baseline on the same requests in the same run, the cold path (first calls against warm
ones, unknown tools, building requests: `bench.coldpath`), adds cedarpy when installed,
prints a table with PASS/FAIL per target, and writes the figures into
`docs/benchmarks.md`.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import tracemalloc
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench import cedar
from bench.baseline import Baseline
from bench.coldpath import (
    TARGET_DECIDE_CALL_SLACK,
    TARGET_FIRST_RATIO,
    TARGET_REQUEST_NS,
    ColdResult,
    run_cold,
)
from bench.report import BEGIN, END, load_average, machine_info
from bench.targets import Conditions, Row, publish
from bench.timing import Timing, time_calls, time_side_by_side, timer_overhead_ns
from bench.workload import Workload, as_received, generate
from engine.check import check_sources
from engine.compile import Snapshot, compile_workspace
from engine.decision import Decision

TARGET_MEDIAN_NS = 1_000
TARGET_RATIO = 2.0
TARGET_P99_NS = 5_000
TARGET_COMPILE_S = 3.0
TARGET_BYTES_PER_RULE = 2_048
TARGET_SIZES = (1_000, 10_000)  # where the issue sets the decide and memory targets
TARGET_LARGE_COMPILE_S = 10.0  # 100,000 roles: check + compile from the text
TARGET_FLAT = 1.25  # decide median and p99 at the largest size over the smallest


@dataclass
class SizeResult:
    roles: int
    rules: int
    tools: int
    requests: int
    check_s: float
    compile_s: float
    collect_s: float  # one full collection right after: the collector's work the build left
    peak_bytes: int
    retained_bytes: int
    snapshot_bytes: int
    charter: Timing
    baseline: Timing
    mix: Counter[str]
    agree_baseline: int
    cedar: Timing | None = None
    cedar_requests: int = 0
    cedar_agree: int = 0
    shared_ratio: float = 0.0  # charter / baseline when requests share the model's strings
    service_charter_ns: float = 0.0  # charter's median, requests decoded by the service's parser
    service_ratio: float = 0.0  # charter / baseline on those requests
    cold: ColdResult | None = None  # first calls, unknown tools, building requests
    notes: list[str] = field(default_factory=list)
    per_profile: int = 10  # roles a profile selects (the peers' agents: 10 and 100)

    @property
    def size(self) -> str:
        """The size as a table's first column says it."""
        shape = "" if self.per_profile == 10 else f" in profiles of {self.per_profile}"
        return f"{self.roles:,}{shape}"

    @property
    def label(self) -> str:
        """The size as a target says it."""
        shape = "" if self.per_profile == 10 else f" in profiles of {self.per_profile}"
        return f"{self.roles:,} roles{shape}"

    @property
    def ratio(self) -> float:
        return self.charter.median_ns / max(self.baseline.median_ns, 1.0)

    @property
    def bytes_per_rule(self) -> float:
        return self.retained_bytes / self.rules

    @property
    def snapshot_bytes_per_rule(self) -> float:
        return self.snapshot_bytes / self.rules


def outcome(decision: Decision) -> str:
    if decision.effect == "allow":
        return "allow"
    if decision.effect == "pause":
        return "pause"
    kind = decision.reasons[0].kind if decision.reasons else "?"
    if kind == "deny":
        return "deny"
    if kind == "not-granted":
        return "condition-false" if decision.near_misses else "not-granted"
    return kind


def _median_time(fn: Any, repeats: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def _collection() -> float:
    """Seconds of one full collection. Check and compile pause the cyclic collector
    (engine/collector.py); the objects they made are scanned by the collections that
    follow, once each generation fills: the work a process still owes after the build."""
    t0 = time.perf_counter()
    gc.collect()
    return time.perf_counter() - t0


def _memory(work: Workload) -> tuple[int, int, int]:
    """(peak, retained by workspace + snapshot, retained by the snapshot alone), bytes,
    with every request decided once so that lazily built plans are counted."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    workspace = check_sources(work.sources)
    after_check = tracemalloc.get_traced_memory()[0]
    snapshot = compile_workspace(workspace)
    for request in work.requests:
        snapshot.decide(request)
    gc.collect()
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak - base, current - base, current - after_check


def run_size(
    roles: int,
    requests: int,
    rounds: int,
    repeats: int,
    overhead: float,
    cold_rounds: int = 3,
    per_profile: int = 10,
) -> SizeResult:
    work = generate(roles=roles, requests=requests, roles_per_profile=per_profile)
    check_s, workspace = _median_time(lambda: check_sources(work.sources), repeats)
    compile_s, snapshot = _median_time(lambda: compile_workspace(workspace), repeats)
    collect_s = _collection()
    assert isinstance(snapshot, Snapshot)
    mix: Counter[str] = Counter(outcome(snapshot.decide(r)) for r in work.requests)
    baseline = Baseline(work)
    agree = sum(baseline.decide(r) == (snapshot.decide(r).effect == "allow") for r in work.requests)
    engines = {"charter": snapshot.decide, "baseline": baseline.decide}
    received = as_received(work.requests)
    for request in received:
        snapshot.decide(request)  # the same lazily built plans as above
    timed = time_side_by_side(engines, received, rounds, overhead)
    charter_t, baseline_t = timed["charter"], timed["baseline"]
    # For the record: the ratio when requests share the model's string objects.
    shared = time_side_by_side(engines, work.requests, max(1, rounds // 2), overhead)
    peak, retained, snap_bytes = _memory(work)
    result = SizeResult(
        roles,
        work.rule_count,
        len(work.tools),
        len(work.requests),
        check_s,
        compile_s,
        collect_s,
        peak,
        retained,
        snap_bytes,
        charter_t,
        baseline_t,
        mix,
        agree,
    )
    result.per_profile = per_profile
    result.shared_ratio = shared["charter"].median_ns / max(shared["baseline"].median_ns, 1.0)
    # For the record: requests decoded by the HTTP service's own parser, which shares
    # argument names and repeated strings between requests (see as_received).
    service = as_received(work.requests, decoder="service")
    for request in service:
        snapshot.decide(request)
    by_service = time_side_by_side(engines, service, max(1, rounds // 2), overhead)
    result.service_charter_ns = by_service["charter"].median_ns
    result.service_ratio = by_service["charter"].median_ns / max(
        by_service["baseline"].median_ns, 1.0
    )
    if cold_rounds > 0:
        result.cold = run_cold(workspace, received, cold_rounds, overhead)
    if cedar.available():
        sample = work.requests[: min(1_000, len(work.requests))]
        engine = cedar.CedarEngine(work)
        cedar_requests = [cedar.request(r) for r in sample]
        result.cedar = time_calls(engine.decide, cedar_requests, 1, overhead)
        result.cedar_requests = len(sample)
        result.cedar_agree = sum(
            engine.decide(c) == (snapshot.decide(r).effect == "allow")
            for c, r in zip(cedar_requests, sample, strict=True)
        )
    return result


# ---- report -----------------------------------------------------------------------------
def _us(ns: float) -> str:
    return f"{ns / 1000:.3f} µs"


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def targets(results: list[SizeResult]) -> list[tuple[str, str, str]]:
    """(target, measured, PASS/FAIL) rows."""
    rows: list[tuple[str, str, str]] = []
    for r in results:
        if r.roles == 100_000 and r.per_profile == 10:
            total = r.check_s + r.compile_s
            rows.append(
                (
                    "100,000 roles: check + compile from the text <= 10 s",
                    f"{total:.2f} s (then a full collection: {r.collect_s:.2f} s)",
                    _verdict(total <= TARGET_LARGE_COMPILE_S),
                )
            )
    rows += _flat(results)
    for r in results:
        if r.roles in TARGET_SIZES:
            rows.append(
                (
                    f"{r.label}: decide median <= 1 µs",
                    _us(r.charter.median_ns),
                    _verdict(r.charter.median_ns <= TARGET_MEDIAN_NS),
                )
            )
            rows.append(
                (
                    f"{r.label}: median <= 2x baseline",
                    f"{r.ratio:.2f}x",
                    _verdict(r.ratio <= TARGET_RATIO),
                )
            )
        rows.append(
            (
                f"{r.label}: p99 <= 5 µs",
                _us(r.charter.p99_ns),
                _verdict(r.charter.p99_ns <= TARGET_P99_NS),
            )
        )
        if r.roles in TARGET_SIZES:
            rows.append(
                (
                    f"{r.label}: <= 2 KB per rule (compiled snapshot)",
                    f"{r.snapshot_bytes_per_rule:,.0f} B",
                    _verdict(r.snapshot_bytes_per_rule <= TARGET_BYTES_PER_RULE),
                )
            )
        if r.cold is not None:
            c = r.cold
            rows.append(
                (
                    f"{r.label}: first call median <= 2x warm median (per pair)",
                    f"{c.ratio:.2f}x ({_us(c.first_median_ns)} / {_us(c.warm_median_ns)})",
                    _verdict(c.ratio <= TARGET_FIRST_RATIO),
                )
            )
            fast_call = c.decide_call_ns <= c.decide_ns * TARGET_DECIDE_CALL_SLACK
            rows.append(
                (
                    f"{r.label}: Request(...) <= 0.3 µs, or decide_call "
                    "(no request) within 5% of decide",
                    f"{_us(c.request_ns)}; decide_call {_us(c.decide_call_ns)} "
                    f"vs decide {_us(c.decide_ns)}",
                    _verdict(c.request_ns <= TARGET_REQUEST_NS or fast_call),
                )
            )
        if r.roles == 10_000:
            total = r.check_s + r.compile_s
            rows.append(
                (
                    f"{r.label}: check + compile <= 3 s",
                    f"{total:.2f} s (then a full collection: {r.collect_s:.2f} s)",
                    _verdict(total <= TARGET_COMPILE_S),
                )
            )
    return rows


def render(results: list[SizeResult], machine: dict[str, str], command: str) -> str:
    out = [f"Command: `{command}`", ""]
    out += [f"- {k}: {v}" for k, v in machine.items()]
    out += [
        "",
        "| roles | rules | engine | median | p99 | decisions/s | check | compile | "
        "peak mem | retained / rule | snapshot / rule |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        out.append(
            f"| {r.size} | {r.rules:,} | charter | {_us(r.charter.median_ns)} | "
            f"{_us(r.charter.p99_ns)} | {r.charter.per_second:,.0f} | {r.check_s:.2f} s | "
            f"{r.compile_s:.2f} s | {r.peak_bytes / 2**20:.1f} MiB | "
            f"{r.bytes_per_rule:,.0f} B | {r.snapshot_bytes_per_rule:,.0f} B |"
        )
        out.append(
            f"| {r.size} | {r.rules:,} | baseline (dict + lambdas) | "
            f"{_us(r.baseline.median_ns)} | {_us(r.baseline.p99_ns)} | "
            f"{r.baseline.per_second:,.0f} | | | | | |"
        )
        if r.cedar is not None:
            out.append(
                f"| {r.size} | {r.rules:,} | cedarpy ({r.cedar_requests:,} requests) | "
                f"{_us(r.cedar.median_ns)} | {_us(r.cedar.p99_ns)} | "
                f"{r.cedar.per_second:,.0f} | | | | | |"
            )
    out += [
        "",
        "| roles | charter / baseline (median) | same, strings shared with the baseline's "
        "tables | charter median / ratio, requests decoded by the service's parser | request mix "
        "(actual outcomes) | agreement |",
    ]
    out += ["| --- | --- | --- | --- | --- | --- |"]
    for r in results:
        mix = ", ".join(f"{k} {v / r.requests:.1%}" for k, v in sorted(r.mix.items()))
        agree = f"baseline {r.agree_baseline:,}/{r.requests:,}"
        if r.cedar is not None:
            agree += f"; cedarpy {r.cedar_agree:,}/{r.cedar_requests:,}"
        by_service = f"{_us(r.service_charter_ns)} / {r.service_ratio:.2f}x"
        out.append(
            f"| {r.size} | {r.ratio:.2f}x | {r.shared_ratio:.2f}x | {by_service} | {mix} | {agree} |"
        )
    if not any(r.cedar is not None for r in results):
        out += ["", "cedarpy is not installed (`pip install '.[bench]'`): no Cedar row."]
    out += _render_cold([r for r in results if r.cold is not None])
    return "\n".join(out) + "\n"


def _flat(results: list[SizeResult]) -> list[tuple[str, str, str]]:
    """Per shape, the median and p99 at the largest size against the smallest: flat when
    within `TARGET_FLAT` of it."""
    rows = []
    for shape in sorted({r.per_profile for r in results}):
        sized = sorted((r for r in results if r.per_profile == shape), key=lambda r: r.roles)
        if len(sized) < 2:
            continue
        small, large = sized[0], sized[-1]
        for what, a, b in (
            ("median", small.charter.median_ns, large.charter.median_ns),
            ("p99", small.charter.p99_ns, large.charter.p99_ns),
        ):
            ratio = b / max(a, 1.0)
            rows.append(
                (
                    f"decide {what} flat from {small.label} to {large.label} "
                    f"(within {TARGET_FLAT - 1:.0%})",
                    f"{_us(a)} -> {_us(b)} ({ratio:.2f}x)",
                    _verdict(ratio <= TARGET_FLAT),
                )
            )
    return rows


def _render_cold(results: list[SizeResult]) -> list[str]:
    """The cold path (bench.coldpath): first calls against warm ones, unknown tools and
    building requests, one table each."""
    if not results:
        return []
    out = [
        "",
        "| roles | pairs (plan built on first use) | first call median | first call p99 | "
        "warm median | warm p99 | first / warm | plan built on first use: median / p99 / "
        "ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        c = r.cold
        assert c is not None
        out.append(
            f"| {r.size} | {c.pairs:,} ({c.built_later:,}) | {_us(c.first_median_ns)} | "
            f"{_us(c.first_p99_ns)} | {_us(c.warm_median_ns)} | {_us(c.warm_p99_ns)} | "
            f"{c.ratio:.2f}x | {_us(c.later_median_ns)} / {_us(c.later_p99_ns)} / "
            f"{c.later_ratio:.2f}x |"
        )
    out += [
        "",
        "| roles | unknown tool, first call: median / p99 | unknown tool again (answer kept): "
        "median | Request(...) | decide (request built before) | decide_call (no request) | "
        "Request(...) then decide |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        c = r.cold
        assert c is not None
        out.append(
            f"| {r.size} | {_us(c.unknown_first_median_ns)} / {_us(c.unknown_first_p99_ns)} | "
            f"{_us(c.unknown_again_median_ns)} | {_us(c.request_ns)} | {_us(c.decide_ns)} | "
            f"{_us(c.decide_call_ns)} | {_us(c.build_and_decide_ns)} |"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000", help="role counts, comma-separated")
    parser.add_argument(
        "--profile-roles", default="10,100", help="roles per profile (the peers' agents)"
    )
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5, help="timed passes over the requests")
    parser.add_argument("--repeats", type=int, default=3, help="check/compile runs (median)")
    parser.add_argument(
        "--cold-rounds", type=int, default=3, help="fresh snapshots for the first calls (0: skip)"
    )
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite the docs")
    opts = parser.parse_args(argv)
    load_before = load_average()
    conditions = Conditions()
    overhead = timer_overhead_ns()
    print(f"timer overhead (median of back-to-back perf_counter_ns): {overhead:.0f} ns")
    results = []
    for shape in (int(s) for s in opts.profile_roles.split(",")):
        for size in (int(s) for s in opts.sizes.split(",")):
            print(f"-- {size:,} roles, profiles of {shape} ...", flush=True)
            runs = (opts.rounds, opts.repeats, overhead, opts.cold_rounds, shape)
            results.append(run_size(size, opts.requests, *runs))
    command = "python -m bench.run " + " ".join(argv if argv is not None else sys.argv[1:])
    report = render(results, machine_info(load_before), command.strip())
    report += f"\nTimer overhead subtracted from each call: {overhead:.0f} ns.\n"
    rows = [Row(t, m, v == "PASS") for t, m, v in targets(results)]
    publish("bench.run", report, rows, conditions, (BEGIN, END), not opts.no_docs)
    return 0  # figures, not a gate: the verdicts are in the table


if __name__ == "__main__":
    raise SystemExit(main())
