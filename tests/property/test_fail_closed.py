"""(d) Fail closed: a condition that errors never grants, and the error is reported.

An erroring allow does not apply; an erroring deny applies; an erroring pause or deny
hook applies; an erroring rewrite denies. The conditions here always error: they read
a context key or agent metadata field that no generated request has, first thing.
"""

from __future__ import annotations

from typing import Literal

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.workspace import match_tools
from policy import ast
from policy.catalogue import ToolSpec
from tests.examples import examples
from tests.property.requests import calls
from tests.property.strategies import (
    GenWorkspace,
    allow_patterns,
    common_slots,
    conditions,
    deny_patterns,
    workspaces,
)
from tests.property.support import (
    decide,
    isolated,
    same_outcome,
    with_extra_hook,
    with_extra_role,
)

_MISSING = ast.Path("context", ("zz-missing",))
ERRORING_ATOMS: tuple[ast.Expr, ...] = (
    ast.Compare("==", _MISSING, ast.Lit("int", 1)),
    ast.Compare(">", ast.Call("len", (_MISSING,)), ast.Lit("int", 0)),
    ast.Compare(
        "startswith",
        ast.Call("lower", (ast.Path("agent", ("metadata", "zz-missing")),)),
        ast.Lit("str", "a"),
    ),
    ast.Path("context", ("zz-missing",)),
)


@st.composite
def erroring(draw: st.DrawFn, tools: list[ToolSpec]) -> ast.Expr:
    """A condition that errors for every request (its failing read comes first)."""
    atom = draw(st.sampled_from(ERRORING_ATOMS))
    shape: Literal["bare", "not", "and", "or", "not-or"] = draw(
        st.sampled_from(("bare", "not", "and", "or", "not-or"))
    )
    if shape == "bare":
        return atom
    if shape == "not":
        return ast.Not(atom)
    other = draw(conditions(tools))
    if shape == "not-or":
        return ast.Not(ast.BoolOp("or", atom, other))
    return ast.BoolOp(shape, atom, other)


def _callable(gw: GenWorkspace, patterns: tuple[ast.Pattern, ...]) -> list[ToolSpec]:
    return [t for t in match_tools(gw.specs, patterns) if t.name != "execute"]


def _with_execute(tool: ToolSpec, rules: tuple[ast.Rule, ...]) -> tuple[ast.Rule, ...]:
    """Code-running tools also need the `execute` grant; give it so it is not the reason."""
    return (*rules, ast.Rule("allow", (ast.Pattern("execute"),))) if tool.runs_code else rules


@settings(max_examples=examples(30))
@given(workspaces(), st.data())
def test_an_erroring_allow_never_grants(gw: GenWorkspace, data: st.DataObject) -> None:
    """An allow whose `where` errors is as if it were not there, in any profile; on its
    own it leaves the call not granted, and the decision reports the error."""
    pattern = data.draw(allow_patterns(gw.specs))
    tools = _callable(gw, (pattern,))
    if not tools:
        return
    where = data.draw(erroring(tools))
    rule = ast.Rule("allow", (pattern,), where)
    profile = data.draw(st.sampled_from(gw.profiles)).name
    joined = with_extra_role(gw, profile, ast.Role("erroring", (rule,)))
    tool = data.draw(st.sampled_from(tools))
    alone = isolated(gw, "alone", (ast.Role("erroring", _with_execute(tool, (rule,))),))
    for _ in range(3):
        request = data.draw(calls(gw, tool.name, profile))
        assert same_outcome(decide(gw, request), decide(joined, request)), request
        valid = data.draw(calls(gw, tool.name, "alone", valid=True))
        decision = decide(alone, valid)
        assert decision.effect == "deny", (valid, decision)
        assert decision.errors and all(e.effect == "ignored allow" for e in decision.errors)


@settings(max_examples=examples(30))
@given(workspaces(), st.data())
def test_an_erroring_deny_applies(gw: GenWorkspace, data: st.DataObject) -> None:
    """A deny whose `where` errors denies every call it matches, and says why."""
    pattern = data.draw(deny_patterns())
    tools = match_tools(gw.specs, (pattern,))
    rule = ast.Rule("deny", (pattern,), data.draw(erroring(tools)))
    grant = ast.Rule("allow", (pattern,))
    tool = data.draw(st.sampled_from(tools))
    alone = isolated(gw, "alone", (ast.Role("denying", _with_execute(tool, (grant, rule))),))
    profile = data.draw(st.sampled_from(gw.profiles)).name
    joined = with_extra_role(gw, profile, ast.Role("denying", (rule,)))
    for _ in range(3):
        assert decide(joined, data.draw(calls(gw, tool.name, profile))).effect == "deny"
        decision = decide(alone, data.draw(calls(gw, tool.name, "alone", valid=True)))
        assert decision.effect == "deny"
        assert [e.effect for e in decision.errors] == ["applied deny"], decision.errors


@st.composite
def erroring_hooks(draw: st.DrawFn, gw: GenWorkspace) -> ast.Hook:
    """A pause, deny or rewrite hook whose `where`, or rewritten value, errors."""
    patterns = (draw(allow_patterns(gw.specs)),)
    tools = match_tools(gw.specs, patterns)
    kind: ast.HookKind = draw(st.sampled_from(("pause", "deny", "rewrite")))
    slots = [s for s in common_slots(tools) if s.type in ("str", "int", "decimal")]
    if kind == "rewrite" and slots and draw(st.booleans()):
        slot = draw(st.sampled_from(slots))
        fn = "lower" if slot.type == "str" else "len"
        value: ast.Expr = ast.Call(fn, (_MISSING,))
        rewrite = ast.Rewrite(ast.Path("args", (slot.name,)), value)
        return ast.Hook("erroring-hook", patterns, None, "rewrite", None, (rewrite,))
    where = draw(erroring(tools))
    if kind == "rewrite" and slots:
        slot = draw(st.sampled_from(slots))
        value = ast.Lit("str", "x") if slot.type == "str" else ast.Lit("int", 1)
        rewrite = ast.Rewrite(ast.Path("args", (slot.name,)), value)
        return ast.Hook("erroring-hook", patterns, where, "rewrite", None, (rewrite,))
    kind = "deny" if kind == "deny" else "pause"
    return ast.Hook("erroring-hook", patterns, where, kind, None)


# What the decision says an erroring hook of each kind did (see engine/plan.py). Only the
# new hook can report it: another erroring hook of that kind would have decided before.
REPORTED = {
    "pause": "applied pause hook",
    "deny": "applied deny hook",
    "rewrite": "rewrite failed, denied",
}


@settings(max_examples=examples(30))
@given(workspaces(), st.data())
def test_erroring_hooks_fail_closed(gw: GenWorkspace, data: st.DataObject) -> None:
    """Installed last on a profile, an erroring pause hook pauses what would have gone
    ahead, an erroring deny hook denies it, an erroring rewrite denies it; what was
    denied stays denied; the error is reported whenever the hook was reached."""
    hook = data.draw(erroring_hooks(gw))
    tools = [t.name for t in match_tools(gw.specs, hook.patterns)]
    profile = data.draw(st.sampled_from(gw.profiles)).name
    new = with_extra_hook(gw, profile, hook)
    for _ in range(4):
        request = data.draw(calls(gw, data.draw(st.sampled_from(tools)), profile))
        before, after = decide(gw, request), decide(new, request)
        if before.effect == "deny":
            assert after.effect == "deny"
            continue
        expected = "pause" if hook.kind == "pause" else "deny"
        assert after.effect == expected, (request, before, after)
        if hook.kind != "pause" or before.effect == "allow":  # the hook was reached
            assert REPORTED[hook.kind] in [e.effect for e in after.errors], after.errors
