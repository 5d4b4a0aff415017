"""The policy test runner, on the fixtures workspace and on small failing workspaces."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from engine import runtime
from engine.check import check_sources, load
from engine.compile import Snapshot, compile_workspace
from engine.decision import Request
from engine.reference import reference_decide
from engine.shape import literal
from engine.testing import run_tests
from engine.workspace import Workspace

WORKSPACE = Path(__file__).resolve().parent.parent / "fixtures" / "workspace"


@cache
def fixtures() -> tuple[Workspace, Snapshot]:
    ws = load([WORKSPACE])
    return ws, compile_workspace(ws)


def test_every_fixture_expectation_passes() -> None:
    results = run_tests(fixtures()[1])
    assert len(results) >= 40
    failures = [f"{r.expect.span}: {r.failure}" for r in results if not r.passed]
    assert failures == []
    effects = {r.decision.effect for r in results}
    assert effects == {"allow", "deny", "pause"}
    kinds = {reason.kind for r in results for reason in r.decision.reasons}
    assert {
        "allow",
        "deny",
        "hook-pause",
        "hook-deny",
        "hook-rewrite",
        "shape",
        "not-granted",
        "execute",
    } <= kinds


def test_the_reference_interpreter_agrees_on_every_fixture_call() -> None:
    ws, snapshot = fixtures()
    for test in ws.tests:
        for expect in test.expects:
            context = literal(expect.context) if expect.context is not None else None
            request = Request(test.profile, expect.tool, literal(expect.args), context)
            compiled = snapshot.decide(request)
            effect, args = reference_decide(ws, request)
            assert effect == compiled.effect, str(expect.span)
            if effect != "deny":
                assert args is not None and compiled.args is not None
                assert all(runtime.eq(args[k], compiled.args[k]) for k in args), str(expect.span)


def _run(source: str) -> list[str | None]:
    ws = check_sources([("t.charter", source)])
    return [r.failure for r in run_tests(compile_workspace(ws))]


BASE = """
toolset mail {
  tool send(to: str, limit: int = 5, tag: str = "x", folder?: str)
}
role r {
  allow mail.send where args.to endswith "@x.com"
}
hook clamp on mail.send where args.limit > 3 {
  rewrite args.limit = 3
}
profile p {
  roles r
  hooks clamp
}
"""


def test_a_wrong_effect_is_reported() -> None:
    failures = _run(
        BASE + 'test "t" {\n  profile p\n  expect allow mail.send { to: "a@y.com" }\n}\n'
    )
    assert failures == ["expected `allow`, got `deny`"]


def test_rewritten_checks_only_the_listed_keys() -> None:
    ok = _run(
        BASE
        + 'test "t" {\n  profile p\n  expect allow mail.send { to: "a@x.com" } rewritten { limit: 3 }\n}\n'
    )
    assert ok == [None]
    wrong = _run(
        BASE
        + 'test "t" {\n  profile p\n  expect allow mail.send { to: "a@x.com" } rewritten { limit: 4 }\n}\n'
    )
    assert wrong == ["expected argument `limit` to be 4, got 3"]
    missing = _run(
        BASE
        + 'test "t" {\n  profile p\n  expect allow mail.send { to: "a@x.com" } rewritten { folder: "a" }\n}\n'
    )
    assert missing == ["expected argument `folder` to be 'a', got missing"]


def test_context_reaches_the_conditions() -> None:
    source = BASE.replace('args.to endswith "@x.com"', "context.ok == true")
    results = _run(
        source
        + 'test "t" {\n  profile p\n'
        + '  expect allow mail.send { to: "a" } context { ok: true }\n'
        + '  expect deny mail.send { to: "a" } context { ok: 1 }\n'
        + '  expect deny mail.send { to: "a" }\n}\n'
    )
    assert results == [None, None, None]


def test_result_json_shape() -> None:
    results = run_tests(fixtures()[1])
    data = results[0].to_json()
    assert set(data) == {
        "test",
        "location",
        "expected",
        "tool",
        "actual",
        "passed",
        "failure",
        "decision",
    }
    assert data["passed"] is True and data["decision"]["effect"] == data["expected"]


@pytest.mark.parametrize("profile", ["support", "engineering", "office", "automation"])
def test_fixture_profiles_are_exercised(profile: str) -> None:
    ws = fixtures()[0]
    assert any(t.profile == profile for t in ws.tests)
