"""Whatever the request, the evaluator answers allow, deny or pause, and never raises:
junk arguments, arguments that are not an object, non-string keys, huge and deeply
nested values, context, agent and thread of the wrong kind."""

from __future__ import annotations

from functools import partial
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from engine.decision import Request
from tests.property.requests import any_values, requests
from tests.property.strategies import GenWorkspace, strings, workspaces
from tests.property.support import EFFECTS, build


def _nest(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


deep_values = st.tuples(st.integers(1, 5000), any_values).map(lambda t: _nest(*t))
huge_values = st.sampled_from(("x" * 1_000_000, 10**400, list(range(10_000))))
junk = st.one_of(any_values, deep_values, huge_values, st.just(object()), st.sets(st.integers()))
odd_keys = st.one_of(strings, st.integers(), st.none(), st.booleans())
junk_args = st.one_of(
    junk,
    st.dictionaries(odd_keys, junk, max_size=4),
)


def _spoiled(args: Any, extra: dict[Any, Any]) -> Any:
    """A valid call with extra keys of mixed kinds (which cannot even be sorted)."""
    return {**args, **extra} if isinstance(args, dict) else args


junk_roots = st.one_of(
    st.none(),
    junk,
    st.dictionaries(
        st.sampled_from(("team", "level", "flag", "ip", "tags", "metadata", "cost", "depth")),
        junk,
        max_size=4,
    ),
)


@given(workspaces(), st.data())
def test_decide_always_answers(gw: GenWorkspace, data: st.DataObject) -> None:
    """`Snapshot.decide` returns a decision whose effect is allow, deny or pause (and
    that serialises) for any request, however malformed; it never raises."""
    snapshot = build(gw)[1]
    names = [p.name for p in gw.profiles]
    for _ in range(6):
        base = data.draw(requests(gw))
        spoiled = st.dictionaries(odd_keys, junk, min_size=2, max_size=3).map(
            partial(_spoiled, base.args)
        )
        request = Request(
            data.draw(st.one_of(st.sampled_from(names), strings)),
            data.draw(st.one_of(st.just(base.tool), strings)),
            data.draw(st.one_of(st.just(base.args), junk_args, spoiled, spoiled)),
            data.draw(st.one_of(st.just(base.context), junk_roots)),
            data.draw(st.one_of(st.just(base.agent), junk_roots)),
            data.draw(st.one_of(st.just(base.thread), junk_roots)),
        )
        decision = snapshot.decide(request)
        assert decision.effect in EFFECTS
        assert decision.to_json()["effect"] == decision.effect
        if decision.effect == "deny":
            assert decision.reasons, "a deny always says why"
