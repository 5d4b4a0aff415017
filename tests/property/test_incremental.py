"""A policy checked and compiled against the one it changes (engine/rebuild.py, the
`base` of `check_sources` and `Snapshot`) is the policy checked and compiled whole: the
same diagnostics, and the same decision for every request, over generated sequences of
changes to roles, hooks, profiles and toolsets."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import assume, given
from hypothesis import strategies as st

from engine.check import check_sources
from engine.compile import Snapshot, compile_workspace
from engine.decision import Decision
from engine.workspace import Workspace
from grammar.fmt import format_file
from policy import ast
from policy.diagnostics import CharterError
from tests.property.requests import requests
from tests.property.strategies import (
    GenWorkspace,
    hooks,
    profiles,
    roles,
    toolsets,
    workspaces,
)
from tests.property.support import same_value

CHANGES = (
    "role", "new role", "drop role", "broken role", "hook", "broken hook", "profile",
    "toolsets", "nothing",
)  # fmt: skip
GHOST = ast.Pattern("ghost.nothing")  # a tool no generated toolset declares: E0101


def files_of(gw: GenWorkspace) -> list[tuple[str, str]]:
    """One file per declaration (the toolsets together), as an author lays a policy out."""

    def file(path: str, *decls: ast.Declaration) -> tuple[str, str]:
        return path, format_file(ast.SourceFile(path, decls))

    out = [file("toolsets.charter", *gw.toolsets)] if gw.toolsets else []
    out += [file(f"roles/{r.name}.charter", r) for r in gw.roles]
    out += [file(f"hooks/{h.name}.charter", h) for h in gw.hooks]
    out += [file(f"profiles/{p.name}.charter", p) for p in gw.profiles]
    return sorted(out)


@st.composite
def changed(draw: st.DrawFn, gw: GenWorkspace) -> GenWorkspace:
    """`gw` with one change (or none): a role, hook or profile drawn again, a role added
    or removed (then a profile may name a role the policy does not hold), a role or hook that does
    not check (a tool no toolset declares, a deny of a toolset's tool), or new toolsets."""
    kind = draw(st.sampled_from(CHANGES))
    names = [r.name for r in gw.roles]
    if kind == "role":
        return gw.with_role(draw(roles(gw.specs, draw(st.sampled_from(names)))))
    if kind == "new role":
        return gw.with_role(draw(roles(gw.specs, f"r{len(names) + 10}")))
    if kind == "drop role" and len(names) > 1:
        gone = draw(st.sampled_from(names))
        return replace(gw, roles=tuple(r for r in gw.roles if r.name != gone))
    if kind == "broken role":
        role = draw(roles(gw.specs, draw(st.sampled_from(names))))
        authored = sorted(n for n, t in gw.specs.items() if not t.builtin)
        wrong = ast.Rule("allow", (GHOST,))
        denied: bool = draw(st.booleans())
        if authored and denied:  # (E0103: deny rules are for built-in tools)
            wrong = ast.Rule("deny", (ast.Pattern(draw(st.sampled_from(authored))),))
        return gw.with_role(replace(role, rules=(*role.rules, wrong)))
    if kind == "broken hook" and gw.hooks:
        hook = draw(hooks(gw.specs, draw(st.sampled_from([h.name for h in gw.hooks]))))
        return gw.with_hook(replace(hook, patterns=(*hook.patterns, GHOST)))
    if kind == "hook" and gw.hooks:
        name = draw(st.sampled_from([h.name for h in gw.hooks]))
        return gw.with_hook(draw(hooks(gw.specs, name)))
    if kind == "profile":
        name = draw(st.sampled_from([p.name for p in gw.profiles]))
        return gw.with_profile(draw(profiles(name, names, [h.name for h in gw.hooks])))
    if kind == "toolsets":
        return replace(gw, toolsets=draw(toolsets()))
    return gw


def _checked(
    files: list[tuple[str, str]], base: Workspace | None
) -> Workspace | list[tuple[str, str, str]]:
    try:
        return check_sources(files, base=base)
    except CharterError as exc:
        return sorted((d.code, d.message, str(d.span)) for d in exc.diagnostics)


def same_decision(a: Decision, b: Decision) -> bool:
    return (
        a.effect == b.effect
        and a.reasons == b.reasons
        and a.errors == b.errors
        and a.near_misses == b.near_misses
        and same_value(dict(a.args or {}), dict(b.args or {}))
    )


@given(workspaces(), st.data())
def test_a_changed_policy_decides_as_one_compiled_whole(
    first: GenWorkspace, data: st.DataObject
) -> None:
    gw = first
    start = _checked(files_of(gw), None)
    assume(isinstance(start, Workspace))  # (the generator's rare workspace that does not check)
    assert isinstance(start, Workspace)
    base: Snapshot = compile_workspace(start)
    for _ in range(data.draw(st.integers(1, 3))):
        gw = data.draw(changed(gw))
        files = files_of(gw)
        whole, derived = _checked(files, None), _checked(files, base.workspace)
        if not isinstance(whole, Workspace):
            assert derived == whole  # the same diagnostics, every one
            continue  # (the policy stays as it was: the next change is against `base`)
        assert isinstance(derived, Workspace)
        full, incremental = compile_workspace(whole), compile_workspace(derived, base=base)
        for _ in range(4):
            request = data.draw(requests(gw))
            assert same_decision(incremental.decide(request), full.decide(request)), request
        base = incremental
