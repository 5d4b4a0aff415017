"""The benchmark's workload generator, at small sizes: deterministic, checks and compiles
through the real pipeline, and produces the request mix it promises."""

from __future__ import annotations

from collections import Counter
from typing import TypedDict

from bench.baseline import Baseline
from bench.run import outcome
from bench.workload import generate
from engine.check import check_sources
from engine.compile import compile_workspace
from engine.reference import reference_decide


class Sizes(TypedDict):
    roles: int
    profiles: int
    namespaces: int
    tools_per_namespace: int
    requests: int


SMALL: Sizes = {
    "roles": 30,
    "profiles": 6,
    "namespaces": 5,
    "tools_per_namespace": 6,
    "requests": 400,
}


def test_same_seed_same_workload() -> None:
    assert generate(**SMALL).sources == generate(**SMALL).sources
    assert generate(**SMALL).requests == generate(**SMALL).requests
    assert generate(**SMALL, seed=2).sources != generate(**SMALL).sources


def test_workload_checks_compiles_and_mixes_outcomes() -> None:
    work = generate(**SMALL)
    assert len(work.tools) == 30 and len(work.roles) == 30 and len(work.profiles) == 6
    assert all(3 <= len(r.rules) <= 5 for r in work.roles.values())
    assert all(len(p.roles) == 10 for p in work.profiles.values())
    workspace = check_sources(work.sources)
    snapshot = compile_workspace(workspace)
    assert len(work.requests) == 400
    mix = Counter(outcome(snapshot.decide(r)) for r in work.requests)
    assert {"allow", "deny", "condition-false", "not-granted"} <= set(mix), mix
    assert set(work.intents) == {"allow", "deny", "condition-false", "not-granted"}


def test_baseline_and_reference_agree_with_the_compiled_snapshot() -> None:
    work = generate(**SMALL)
    workspace = check_sources(work.sources)
    snapshot = compile_workspace(workspace)
    baseline = Baseline(work)
    for request in work.requests:
        effect = snapshot.decide(request).effect
        assert baseline.decide(request) == (effect == "allow"), request
        assert reference_decide(workspace, request)[0] == effect, request
