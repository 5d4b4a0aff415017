"""Runs the `test` blocks of a workspace: the policy author's own tests.

An `expect allow`, `deny` or `pause` compares the decision's effect; an `expect invalid`
passes when the call is denied for its shape (a `shape` reason), and only then."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine import runtime
from engine.compile import Snapshot
from engine.decision import Decision, Request
from engine.shape import literal
from policy import ast


@dataclass(frozen=True)
class ExpectResult:
    test: str
    expect: ast.Expect
    decision: Decision
    failure: str | None  # None when the expectation held

    @property
    def passed(self) -> bool:
        return self.failure is None

    def to_json(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "location": str(self.expect.span),
            "expected": self.expect.effect,
            "tool": self.expect.tool,
            "actual": self.decision.effect,
            "passed": self.passed,
            "failure": self.failure,
            "decision": self.decision.to_json(),
        }


def refused_for_shape(decision: Decision) -> bool:
    """Whether a call was denied for its shape (`expect invalid` passes on that alone)."""
    return decision.effect == "deny" and any(r.kind == "shape" for r in decision.reasons)


def run_expect(snapshot: Snapshot, test: ast.Test, expect: ast.Expect) -> ExpectResult:
    context = literal(expect.context) if expect.context is not None else None
    request = Request(test.profile, expect.tool, literal(expect.args), context)
    decision = snapshot.decide(request)
    failure = None
    if expect.effect == "invalid":
        if not refused_for_shape(decision):
            got = (
                "`deny` for another reason" if decision.effect == "deny" else f"`{decision.effect}`"
            )
            failure = f"expected `invalid` (a deny for the call's shape), got {got}"
    elif decision.effect != expect.effect:
        failure = f"expected `{expect.effect}`, got `{decision.effect}`"
    elif expect.rewritten is not None:
        actual = dict(decision.args or {})
        spec = snapshot.tools.get(expect.tool)
        secrets = spec.sensitive if spec is not None else frozenset()
        for key, value in literal(expect.rewritten).items():
            if key not in actual or not runtime.eq(actual[key], value):
                if key in secrets:  # (neither value is shown: the output goes where logs go)
                    got = "another value" if key in actual else "none"
                    failure = f"expected secret argument `{key}` to be the test's value, got {got}"
                    break
                shown = repr(actual[key]) if key in actual else "missing"
                failure = f"expected argument `{key}` to be {value!r}, got {shown}"
                break
    return ExpectResult(test.name, expect, decision, failure)


def run_tests(snapshot: Snapshot) -> list[ExpectResult]:
    return [
        run_expect(snapshot, test, expect)
        for test in snapshot.workspace.tests
        for expect in test.expects
    ]
