"""A first call decides as a warm one does, and as a plan built from every rule does.

A snapshot builds some plans at compile and the rest on the first call of their
(profile, tool) pair, from the profile's one shape for the tools only `*` reaches (or
none), and keeps the answers of unknown names within a bound (engine.compile,
engine.unknowntools). None of that may show in a decision: the first call of a pair on a
fresh snapshot, the same call again, the call on a snapshot where every pair was decided
before, and the call on a snapshot that built every plan at compile from every rule and
hook that reaches its tool (`every_plan`) give the same decision, field for field.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.compile import Snapshot, compile_workspace
from engine.decision import Decision, Request
from tests.property.requests import requests
from tests.property.strategies import GenWorkspace, workspaces
from tests.property.support import build, same_value


def _same(a: Decision, b: Decision) -> bool:
    """Every field equal; the arguments kind for kind (NaN included)."""
    fields = (a.effect, a.reasons, a.errors, a.near_misses)
    return fields == (b.effect, b.reasons, b.errors, b.near_misses) and same_value(a.args, b.args)


def _warmed(gw: GenWorkspace) -> Snapshot:
    """A fresh snapshot on which every profile has decided a call of every tool."""
    workspace, _ = build(gw)
    snapshot = compile_workspace(workspace)
    for profile in workspace.profiles:
        for tool in workspace.tools:
            snapshot.decide(Request(profile, tool, {}))
    return snapshot


@given(workspaces(), st.data())
def test_a_first_call_decides_as_a_warm_one(gw: GenWorkspace, data: st.DataObject) -> None:
    workspace, _ = build(gw)
    cold = compile_workspace(workspace)
    warm = _warmed(gw)
    built = Snapshot(workspace, every_plan=True)
    for _ in range(12):
        request = data.draw(requests(gw))
        first = cold.decide(request)
        for other in (cold.decide(request), warm.decide(request), built.decide(request)):
            assert _same(first, other), (request, first, other)
