"""`Snapshot.decide_call` (a call's fields, no `Request`) decides as `Snapshot.decide`
does, on a first call and on a warm one (engine.compile)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.compile import compile_workspace
from tests.property.requests import requests
from tests.property.strategies import GenWorkspace, workspaces
from tests.property.support import build, same_value


@given(workspaces(), st.data())
def test_deciding_from_fields_is_deciding_the_request(
    gw: GenWorkspace, data: st.DataObject
) -> None:
    workspace, _ = build(gw)
    by_request, by_fields = compile_workspace(workspace), compile_workspace(workspace)
    for _ in range(8):
        r = data.draw(requests(gw))
        for _ in range(2):  # a first call, then a warm one
            expected = by_request.decide(r)
            got = by_fields.decide_call(r.profile, r.tool, r.args, r.context, r.agent, r.thread)
            fields = (got.effect, got.reasons, got.errors, got.near_misses)
            assert fields == expected[:1] + expected[2:], (r, got, expected)
            assert same_value(got.args, expected.args), (r, got, expected)
