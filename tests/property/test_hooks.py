"""(g) Hooks never widen: what goes ahead after hooks is what the roles alone allow, and
a rewritten call is always checked against the roles again."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.decision import Request
from engine.shape import literal
from policy import ast
from policy.catalogue import ToolSpec
from tests.examples import examples
from tests.property.requests import calls, requests
from tests.property.strategies import GenWorkspace, strings, workspaces
from tests.property.support import decide, isolated


@settings(max_examples=examples(30))
@given(workspaces(), st.data())
def test_hooks_never_widen(gw: GenWorkspace, data: st.DataObject) -> None:
    """A call allowed or paused under a profile is allowed by the same profile with
    `hooks none`, and so is the call with the arguments the hooks left (rewritten)."""
    bare = {
        p.name: replace(p, name=f"{p.name}-bare", hooks=("none",), hooks_written=True)
        for p in gw.profiles
    }
    new = gw
    for profile in bare.values():
        new = new.with_profile(profile)
    for _ in range(8):
        request = data.draw(requests(gw))
        decision = decide(new, request)
        if decision.effect == "deny":
            continue
        roles_only = replace(request, profile=f"{request.profile}-bare")
        assert decide(new, roles_only).effect == "allow", (request, decision)
        as_sent = replace(roles_only, args=dict(decision.args or {}))
        assert decide(new, as_sent).effect == "allow", (request, decision)


def _sent(tool: ToolSpec, call: Request, param: str) -> Any:
    """The argument's value as the roles see the call: as sent, or its default (step 2
    applies defaults before any condition)."""
    if param in call.args:
        return call.args[param]
    spec = tool.param(param)
    return None if spec is None or spec.default is None else literal(spec.default)


def _str_params(gw: GenWorkspace) -> list[tuple[str, str]]:
    return sorted(
        (tool.name, p.name)
        for tool in gw.specs.values()
        for p in tool.params
        if p.type.kind == "str" and tool.name != "execute" and (not tool.builtin or p.required)
    )


@settings(max_examples=examples(30))
@given(workspaces(), st.data())
def test_a_rewrite_is_checked_again(gw: GenWorkspace, data: st.DataObject) -> None:
    """`rewrite args.s = V` under a role that allows only `s != V` denies every call;
    under a role that allows only `s == V` it allows exactly the rewritten call."""
    tool_name, param = data.draw(st.sampled_from(_str_params(gw)))
    tool = gw.specs[tool_name]
    value = data.draw(strings)
    target = ast.Path("args", (param,))
    hook = ast.Hook(
        "force", (ast.Pattern(tool_name),), None, "rewrite", None,
        (ast.Rewrite(target, ast.Lit("str", value)),),
    )  # fmt: skip
    execute = (ast.Rule("allow", (ast.Pattern("execute"),)),) if tool.runs_code else ()

    def only(op: str) -> ast.Role:
        where = ast.Compare(op, target, ast.Lit("str", value))
        return ast.Role("only", (ast.Rule("allow", (ast.Pattern(tool_name),), where), *execute))

    forbidden = isolated(gw, "forbidden", (only("!="),), (hook,))
    allowed = isolated(gw, "allowed", (only("=="),), (hook,))
    for _ in range(3):
        call: Request = data.draw(calls(gw, tool_name, "forbidden", valid=True))
        denied = decide(forbidden, call)
        assert denied.effect == "deny", (call, denied)
        if param in call.args and call.args[param] != value:  # allowed as sent
            assert any(r.kind == "hook-rewrite" for r in denied.reasons), denied.reasons
        if _sent(tool, call, param) != value:
            # Not allowed as sent, so not allowed at all: the rewrite cannot grant.
            assert decide(allowed, replace(call, profile="allowed")).effect == "deny"
        else:
            decision = decide(allowed, replace(call, profile="allowed"))
            assert decision.effect == "allow" and decision.args is not None
            assert decision.args[param] == value
