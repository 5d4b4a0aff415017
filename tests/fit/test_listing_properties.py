"""(d) listing agrees with decide: a tool listed `deny` is never allowed, one listed
`allow` is allowed for every sampled valid call, and a residual agrees with decide; on
conditions over lists and maps (`data.put`) too, rules and deny hooks."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.decision import Request
from engine.listing import LISTING_MS, list_tools
from engine.reference import _Env, holds, validate
from grammar.parser import parse
from policy import ast
from tests.examples import examples
from tests.fit.strategies import DENY_ROLE, Rule, call, conditions, render, rules
from tests.fit.support import progress, snapshot


def _where(text: str) -> ast.Expr:
    role = parse(f"role z {{ allow mail.send where {text} }}", "<residual>").declarations[0]
    assert isinstance(role, ast.Role) and role.rules[0].where is not None
    return role.rules[0].where


@settings(max_examples=examples(30))
@given(
    rules,
    st.one_of(st.none(), DENY_ROLE),
    st.one_of(st.none(), conditions("mail.send")),
    st.one_of(st.none(), conditions("data.put")),
    st.lists(call(), min_size=4, max_size=12),
)
def test_listing_agrees_with_decide(
    parts: list[Rule],
    guard: str | None,
    deny_hook: str | None,
    put_hook: str | None,
    sample: list[dict[str, Any]],
) -> None:
    progress("test_listing_agrees_with_decide")
    text = render("c0", parts) + (guard or "")
    hooks = ["approve-role-create"]
    if deny_hook:
        text += f'hook no-send on mail.send where {deny_hook} {{\n  deny "no"\n}}\n'
        hooks.append("no-send")
    if put_hook:
        text += f'hook no-put on data.put where {put_hook} {{\n  deny "no"\n}}\n'
        hooks.append("no-put")
    text += 'hook look on mail.search {\n  pause "look"\n}\n'
    hooks.append("look")
    text += f"profile p {{ roles c0{', guard' if guard else ''}\n hooks {', '.join(hooks)} }}\n"
    snap = snapshot(text)
    # With z3 and without it (the rules as written: a listing past its deadline).
    for timeout_ms in (LISTING_MS, 0):
        listing = {t.tool: t for t in list_tools(snap, "p", timeout_ms)}
        _agrees(snap, listing, sample)
    assert listing["mail.search"].hooks[-1].name == "look"


def _agrees(snap: Any, listing: dict[str, Any], sample: list[dict[str, Any]]) -> None:
    sample = [*sample, {"tool": "roles.create", "args": {"name": "axe", "source": ""},
                        "context": None, "agent": None, "thread": None}]  # fmt: skip
    for c in sample:
        request = Request("p", c["tool"], c["args"], c["context"], c["agent"], c["thread"])
        allowed = snap.decide(request).effect in ("allow", "pause")
        item = listing[c["tool"]]
        if item.status == "deny":
            assert not allowed, (item, c)
        elif item.status == "allow":
            assert allowed, (item, c)
        else:
            tool = snap.workspace.tools[c["tool"]]
            shaped = validate(tool, c["args"])
            assert isinstance(shaped, dict)
            env = _Env(shaped, request)
            assert any(holds(g, env) is True for g in item.grants) == allowed, (item, c)
            if item.exact:
                assert item.condition is not None
                assert (holds(_where(item.condition), env) is True) == allowed, (item, c)
