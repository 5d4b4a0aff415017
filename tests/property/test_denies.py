"""(a) Denies win: any satisfied deny denies, and adding a deny never turns a deny into
an allow (nor into a pause)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.workspace import match_tools
from policy import ast
from tests.examples import examples
from tests.property.requests import calls, requests
from tests.property.strategies import GenWorkspace, rules, workspaces
from tests.property.support import decide, holds, same_outcome, with_extra_role, with_rule


@given(workspaces(), st.data())
def test_a_satisfied_deny_denies(gw: GenWorkspace, data: st.DataObject) -> None:
    """A deny rule (on a built-in tool) of one of the profile's roles whose `where`
    holds, or errors, denies the call, whatever else the roles and hooks say."""
    profile = data.draw(st.sampled_from(gw.profiles))
    rule = data.draw(rules(gw.specs, "deny"))
    if profile.roles:
        new = with_rule(gw, data.draw(st.sampled_from(profile.roles)), rule)
    else:
        new = with_extra_role(gw, profile.name, ast.Role("deny-role", (rule,)))
    tools = [t.name for t in match_tools(new.specs, rule.patterns)]
    for _ in range(4):
        request = data.draw(calls(new, data.draw(st.sampled_from(tools)), profile.name))
        verdict = holds(new, rule.where, request)
        decision = decide(new, request)
        if verdict is not False:  # true, an error, or a call of the wrong shape
            assert decision.effect == "deny", (request, verdict, decision)


@settings(max_examples=examples(30))
@given(workspaces(), st.data())
def test_adding_a_deny_never_turns_a_deny_into_an_allow(
    gw: GenWorkspace, data: st.DataObject
) -> None:
    """With one more deny rule in any role, every decision is the same or a deny."""
    role = data.draw(st.sampled_from(gw.roles)).name
    new = with_rule(gw, role, data.draw(rules(gw.specs, "deny")))
    for _ in range(6):
        request = data.draw(requests(gw))
        before, after = decide(gw, request), decide(new, request)
        assert after.effect == "deny" or same_outcome(before, after), (request, before, after)
