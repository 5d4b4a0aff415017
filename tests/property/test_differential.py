"""(e) The compiled evaluator agrees with the tree-walking reference interpreter."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine import clock
from tests.property.requests import requests
from tests.property.strategies import GenWorkspace, workspaces
from tests.property.support import decide, reference, same_value


@given(workspaces(), st.data())
def test_compiled_agrees_with_reference(gw: GenWorkspace, data: st.DataObject) -> None:
    """For generated workspaces and requests (valid, broken, junk context), the compiled
    snapshot and `engine.reference.reference_decide` give the same effect and, when the
    call goes ahead, the same arguments to use, kind for kind."""
    # One moment for both (conditions read `time.*`): 2026 to 2027, any minute.
    at = data.draw(st.integers(1_767_225_600_000, 1_798_761_600_000), label="time")
    for _ in range(8):
        request = data.draw(requests(gw))
        with clock.fixed(at):
            decision = decide(gw, request)
            effect, args = reference(gw, request)
        assert decision.effect == effect, (request, decision, decision.errors)
        if effect != "deny":
            assert same_value(dict(decision.args or {}), dict(args or {})), (decision.args, args)
