"""Fit check and tool listing benchmarks (issue 3, item 7): `python -m bench.fit_bench`.

1. Fit of a 20-rule role against a caller holding 10 roles (median of repeated runs;
   target <= 200 ms): a narrowing candidate (every query unsat, the expensive answer)
   and a widening one (counterexamples built and confirmed).
2. Listing every tool of a profile in the 1,000-role workload (target <= 1 s).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.workload import generate
from engine.check import check_sources
from engine.compile import compile_workspace
from engine.fit import fit_role, fit_source, isolated
from engine.listing import list_tools
from engine.workspace import Workspace
from grammar.fmt import expr_text


def _timed(fn: Callable[[], Any], runs: int) -> tuple[list[float], Any]:
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - start) * 1000)
    return times, result


def _candidate(ws: Workspace, profile: str, widen: bool) -> str:
    """20 allow rules drawn from the caller's own, each narrowed by one more bound."""
    allows = [
        rule
        for name in ws.profiles[profile].roles
        for rule in ws.roles[name].rules
        if rule.effect == "allow" and all(p.text.startswith("svc") for p in rule.patterns)
    ]
    lines = []
    for index in range(20):
        rule = allows[index % len(allows)]
        patterns = ", ".join(p.text for p in rule.patterns)
        bound = f"args.count <= {index + 1}"
        cond = bound if rule.where is None else f"({expr_text(rule.where)}) and {bound}"
        if widen and index == 0:
            cond = f"({cond}) or args.count == 12345"
        lines.append(f"  allow {patterns} where {cond}")
    return "role candidate {\n" + "\n".join(lines) + "\n}\n"


def _report(name: str, times: list[float], target: float) -> None:
    median = statistics.median(times)
    verdict = "ok" if median <= target else "OVER TARGET"
    print(
        f"{name}: median {median:.1f} ms, min {min(times):.1f}, max {max(times):.1f} "
        f"({len(times)} runs; target <= {target:.0f} ms: {verdict})"
    )


def main() -> None:
    start = time.perf_counter()
    work = generate(roles=1_000, requests=0)
    ws = check_sources(work.sources)
    snap = compile_workspace(ws)
    print(
        f"workload: {len(ws.roles)} roles, {len(ws.profiles)} profiles, {len(ws.tools)} tools "
        f"(built in {time.perf_counter() - start:.1f} s)"
    )
    profile = next(iter(ws.profiles))
    for widen in (False, True):
        cand_ws = check_sources([*work.sources, ("<candidate>", _candidate(ws, profile, widen))])
        times, result = _timed(lambda w=cand_ws: fit_role(ws, profile, w, "candidate"), 15)  # type: ignore[misc]
        label = "widening" if widen else "narrowing"
        assert result.fits is (not widen), result.violations
        _report(f"fit, 20-rule {label} role vs 10-role caller `{profile}`", times, 200)
        # As the service runs it: in a child process forked for the check, killed at its
        # deadline (engine.fit.isolated).
        times, result = _timed(
            lambda w=cand_ws: isolated.run(fit_role, ws, profile, w, "candidate", timeout_ms=2000),  # type: ignore[misc]
            15,
        )
        assert result.fits is (not widen), result.violations
        _report(f"fit, 20-rule {label} role, in a process of its own", times, 200)
    roles = ", ".join(ws.profiles[profile].roles)
    text = f"profile kid {{\n  roles {roles}\n}}\n"
    times, result = _timed(lambda: fit_source(snap, profile, text, kind="profile"), 5)
    assert result.fits, result.violations
    print(
        f"fit_source, a profile of the caller's 10 roles (text checked against the "
        f"workspace): median {statistics.median(times):.0f} ms ({len(times)} runs)"
    )
    listing_times = []
    for name in list(ws.profiles)[:10]:
        times, listing = _timed(lambda n=name: list_tools(snap, n), 1)  # type: ignore[misc]
        listing_times.extend(times)
    counts: dict[str, int] = {}
    for item in listing:
        counts[item.status] = counts.get(item.status, 0) + 1
    print(f"listing of the last profile: {len(listing)} tools, {counts}")
    _report("list_tools, 10 profiles of the 1,000-role workload", listing_times, 1000)


if __name__ == "__main__":
    main()
