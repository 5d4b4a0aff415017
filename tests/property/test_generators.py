"""The generators themselves: what they make is checked, so properties are not vacuous."""

from __future__ import annotations

from hypothesis import given

from tests.property.strategies import GenWorkspace, workspaces
from tests.property.support import checked


@given(workspaces())
def test_generated_workspaces_pass_the_checker(gw: GenWorkspace) -> None:
    """Every generated workspace renders to text the checker accepts, with its roles,
    hooks and profiles intact (so the other properties rarely discard an example)."""
    ws = checked(gw)
    assert set(ws.roles) == {r.name for r in gw.roles}
    assert set(ws.profiles) == {p.name for p in gw.profiles}
    assert {h.name for h in gw.hooks} <= set(ws.hooks)
