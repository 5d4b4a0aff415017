"""The solver's lints claim proofs: "this condition never holds", "always holds", "this
deny hook fires on every call sent without context" (engine/lints.py). Each claim is
searched for a counterexample: calls drawn for the tool (tests/fit/strategies.py: lists,
maps, optional arguments and context at every depth), decided by the reference
evaluator. The conditions are built so that many claims are made: a condition and its
negation joined by `and` (often never) and `or` (often always, unless it can error)."""

from __future__ import annotations

from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from engine.decision import Request
from engine.lints import solve
from engine.reference import _Env, holds, validate
from tests.fit.strategies import TOOLS, call, conditions
from tests.fit.support import snapshot

SHAPES = ("({a}) and not ({b})", "({a}) or not ({b})", "({a}) and not ({a})",
          "({a}) or not ({a})", "({a}) and ({b})", "{a}")  # fmt: skip
QUESTIONS = ("allow", "applies", "fires-without-context")
CALLS = 25  # drawn per claim


def _happens(question: str, outcome: bool | Exception) -> bool:
    if question == "allow":
        return outcome is True  # an allow applies when true, with no error
    return outcome is not False  # a deny or a hook also when it errors (fail closed)


@given(st.sampled_from(TOOLS), st.sampled_from(SHAPES), st.sampled_from(QUESTIONS), st.data())
def test_a_lints_claim_has_no_counterexample(
    tool: str, shape: str, question: str, data: st.DataObject
) -> None:
    a, b = data.draw(conditions(tool)), data.draw(conditions(tool))
    condition = shape.format(a=a, b=b)
    ws = snapshot(f"role r {{ allow {tool} where {condition} }}\nprofile p {{ roles r }}").workspace
    spec, where = ws.tools[tool], ws.roles["r"].rules[0].where
    assert where is not None
    answer = solve(spec, where, question, 2_000)
    event(answer)
    if answer not in ("never", "always"):
        return
    for _ in range(CALLS):
        c: dict[str, Any] = data.draw(call(tool))
        args = validate(spec, c["args"])
        if isinstance(args, str):
            continue  # (a call of the wrong shape is denied before any condition)
        context = c["context"]
        if question == "fires-without-context":
            context = data.draw(st.sampled_from((None, {})))
        request = Request("p", tool, args, context, c["agent"], c["thread"])
        outcome = holds(where, _Env(args, request))
        assert _happens(question, outcome) == (answer == "always"), (condition, c, outcome)


def test_claims_are_made_on_the_shapes_above() -> None:
    """The property above checks claims only where the solver makes them: these show it
    makes each kind on conditions of the same shapes."""
    cases = {
        ("args.priority < 2 and not (args.priority < 2)", "allow"): "never",
        ('args.to endswith "a" or not (args.to endswith "a")', "allow"): "always",
        # (an optional argument read without `has`: the `or` can error, so not always)
        ("args.priority < 2 or not (args.priority < 2)", "allow"): "sometimes",
        ("args.priority < 2 or not (args.priority < 2)", "applies"): "always",
        ('context.team == "a"', "fires-without-context"): "always",
        ('has(context.team) and context.team == "a"', "fires-without-context"): "never",
    }
    for (condition, question), expected in cases.items():
        ws = snapshot(f"role r {{ allow mail.send where {condition} }}\nprofile p {{ roles r }}")
        spec = ws.workspace.tools["mail.send"]
        where = ws.workspace.roles["r"].rules[0].where
        assert where is not None
        assert solve(spec, where, question, 5_000) == expected, (condition, question)
