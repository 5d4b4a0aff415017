"""(b) Allows add up, and (c) `where` narrows."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.workspace import match_tools
from policy import ast
from tests.examples import examples
from tests.property.requests import requests
from tests.property.strategies import GenWorkspace, conditions, rules, workspaces
from tests.property.support import decide, same_outcome, with_extra_role, with_rule


def _goes_ahead(effect: str) -> bool:
    return effect in ("allow", "pause")


@settings(max_examples=examples(30))
@given(workspaces(), st.data())
def test_adding_a_grant_never_removes_an_allowed_call(
    gw: GenWorkspace, data: st.DataObject
) -> None:
    """One more allow rule in any role: every call that was allowed (or paused) still
    is, with the same arguments to use."""
    role = data.draw(st.sampled_from(gw.roles)).name
    new = with_rule(gw, role, data.draw(rules(gw.specs, "allow")))
    for _ in range(6):
        request = data.draw(requests(gw))
        before, after = decide(gw, request), decide(new, request)
        if _goes_ahead(before.effect):
            assert same_outcome(before, after), (request, before, after)


@settings(max_examples=examples(30))
@given(workspaces(), st.data())
def test_adding_a_role_never_removes_an_allowed_call(gw: GenWorkspace, data: st.DataObject) -> None:
    """A profile that selects one more role of grants keeps every call it allowed."""
    profile = data.draw(st.sampled_from(gw.profiles)).name
    grants = data.draw(st.lists(rules(gw.specs, "allow"), min_size=1, max_size=3))
    new = with_extra_role(gw, profile, ast.Role("extra-grants", tuple(grants)))
    for _ in range(6):
        request = data.draw(requests(gw))
        before, after = decide(gw, request), decide(new, request)
        if _goes_ahead(before.effect):
            assert same_outcome(before, after), (request, before, after)


@given(workspaces(), st.data())
def test_where_narrows(gw: GenWorkspace, data: st.DataObject) -> None:
    """Conjoining a condition onto an allow rule's `where` never adds an allowed call:
    what is allowed (or paused) afterwards was allowed before, with the same args."""
    allows = [
        (r.name, i) for r in gw.roles for i, rule in enumerate(r.rules) if rule.effect == "allow"
    ]
    if not allows:
        return
    role_name, index = data.draw(st.sampled_from(allows))
    role = gw.role(role_name)
    rule = role.rules[index]
    extra = data.draw(conditions(match_tools(gw.specs, rule.patterns)))
    if rule.where is None:
        where: ast.Expr = extra
    elif data.draw(st.booleans()):
        where = ast.BoolOp("and", rule.where, extra)
    else:
        where = ast.BoolOp("and", extra, rule.where)
    narrowed = ast.Rule("allow", rule.patterns, where)
    new = gw.with_role(
        ast.Role(role_name, (*role.rules[:index], narrowed, *role.rules[index + 1 :]))
    )
    for _ in range(6):
        request = data.draw(requests(gw))
        before, after = decide(gw, request), decide(new, request)
        if _goes_ahead(after.effect):
            assert same_outcome(before, after), (request, before, after)
