"""Runs the `test` blocks of a workspace: the policy author's own tests.

An `expect allow`, `deny` or `pause` compares the decision's effect; an `expect invalid`
passes when the call is denied for its shape (a `shape` reason), and only then. A
`because "..."` also wants a reason whose message holds that text.

Each call carries the test's `agent`, `thread` and `context` (an expectation's own
`context` replaces the test's), as the service builds them: an agent's missing `id`,
`name`, `identity` and `metadata` are `test-agent`, `test-agent`, `""` and `{}`; a
thread's missing `id`, `depth` and `cost` are `test-thread`, 0 and 0. Then, for a call
the roles and hooks let through, step 6 runs as the service's does (policy/money.py): a
call past the profile's `rate`, given the calls the test says were `called` in its
window, is denied with a `rate` reason; one whose `cost` would pass the profile's
budget, given what the test says the agent has `spent`, or the thread's `max_cost`,
given the thread's `cost`, with a `budget` reason. Every expectation is decided from
the test's settings alone (one does not spend or count for the next)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine import clock, runtime
from engine.compile import Snapshot
from engine.decision import Decision, Reason, Request, make_decision
from engine.shape import literal
from policy import ast
from policy.money import Cap, over_cap, over_rate, profile_cap, rate_cap, thread_cap, to_micros


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


_AGENT = "test-agent"
_THREAD = "test-thread"


class _Spent:
    """The ledger a test describes: what its agent and its thread have spent."""

    def __init__(self, by_subject: dict[str, int]) -> None:
        self.by_subject = by_subject

    def spent(self, subject: str, since_ms: int) -> int:
        return self.by_subject.get(subject, 0)


def _agent(test: ast.Test) -> dict[str, Any] | None:
    if test.agent is None:
        return None
    given = literal(test.agent)
    return {"id": _AGENT, "name": _AGENT, "identity": "", "metadata": {}, **given}


def _thread(test: ast.Test) -> dict[str, Any] | None:
    if test.thread is None:
        return None
    given = literal(test.thread)
    given.pop("max_cost", None)  # (a cap, not something conditions read)
    return {"id": _THREAD, "depth": 0, "cost": 0, **given}


def _over_caps(
    snapshot: Snapshot, test: ast.Test, expect: ast.Expect, agent: dict[str, Any] | None
) -> Reason | None:
    """The service's step 6 for the test's call: the rate, given the calls the test says
    were made (`called`), then the first budget cap its cost would pass."""
    caps: list[Cap] = []
    spent: dict[str, int] = {}
    profile = snapshot.served.profiles.get(test.profile)
    subject = f"agent:{(agent or {}).get('id', _AGENT)}"
    if profile is not None and profile.budget is not None:
        budget = profile.budget
        caps.append(profile_cap(subject, profile.name, budget.amount, budget.period))
        spent[subject] = to_micros(test.spent or 0)
    thread = literal(test.thread) if test.thread is not None else {}
    if thread.get("max_cost") is not None:
        most = thread_cap(str(thread.get("id", _THREAD)), str(thread["max_cost"]))
        caps.append(most)
        spent[most.subject] = to_micros(thread.get("cost", 0))
    if profile is not None and profile.rate is not None:
        rate = rate_cap(subject, profile.name, profile.rate.calls, profile.rate.period)
        if over_cap(_Spent({rate.subject: test.called or 0}), [rate], 1, 0) is not None:
            return Reason("rate", over_rate(rate))
    cost = expect.cost or 0
    passed = over_cap(_Spent(spent), caps, to_micros(cost), 0) if caps else None
    if passed is None:
        return None
    return Reason("budget", f"expected cost {cost} USD is over the {passed.label}")


def run_expect(snapshot: Snapshot, test: ast.Test, expect: ast.Expect) -> ExpectResult:
    given = expect.context if expect.context is not None else test.context
    context = literal(given) if given is not None else None
    agent = _agent(test)
    request = Request(
        test.profile, expect.tool, literal(expect.args), context, agent, _thread(test)
    )
    if test.time is None:
        decision = snapshot.decide(request)
    else:
        with clock.fixed(test.time):
            decision = snapshot.decide(request)
    # (the service's step 6 runs for a call the roles and hooks let through)
    over = _over_caps(snapshot, test, expect, agent) if decision.effect != "deny" else None
    if over is not None:
        decision = make_decision("deny", None, (*decision.reasons, over))
    failure = None
    if expect.effect == "invalid":
        if not refused_for_shape(decision):
            got = (
                "`deny` for another reason" if decision.effect == "deny" else f"`{decision.effect}`"
            )
            failure = f"expected `invalid` (a deny for the call's shape), got {got}"
    elif decision.effect != expect.effect:
        failure = f"expected `{expect.effect}`, got `{decision.effect}`"
    elif expect.because is not None and not any(
        expect.because in r.message for r in decision.reasons
    ):
        said = "; ".join(r.message for r in decision.reasons) or "none"
        failure = f"expected a reason saying {expect.because!r}, got: {said}"
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
