"""Build generated workspaces through the real pipeline, and decide both ways.

`build` renders the ASTs with the canonical formatter, checks the text with
`check_sources` and compiles it; results are cached by text, since hypothesis replays
and the properties decide many requests against one workspace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from decimal import Decimal
from functools import lru_cache
from typing import Any

from hypothesis import assume

from engine.check import check_sources
from engine.compile import Snapshot, compile_workspace
from engine.decision import Decision, Request
from engine.reference import _Env, reference_decide, validate
from engine.reference import holds as reference_holds
from engine.workspace import Workspace
from policy import ast
from policy.diagnostics import CharterError
from tests.property.strategies import GenWorkspace

EFFECTS = ("allow", "deny", "pause")


@lru_cache(maxsize=128)
def _checked(text: str) -> Workspace | CharterError:
    try:
        return check_sources([("gen.charter", text)])
    except CharterError as exc:
        return exc


@lru_cache(maxsize=128)
def _compiled(text: str) -> Snapshot:
    ws = _checked(text)
    assert isinstance(ws, Workspace)
    return compile_workspace(ws)


def checked(gw: GenWorkspace) -> Workspace:
    """The checked workspace; raises the checker's error (for the generator's own test)."""
    ws = _checked(gw.text)
    if isinstance(ws, CharterError):
        raise ws
    return ws


def build(gw: GenWorkspace) -> tuple[Workspace, Snapshot]:
    """Checked and compiled; a workspace the checker rejects is discarded (rare)."""
    ws = _checked(gw.text)
    assume(isinstance(ws, Workspace))
    assert isinstance(ws, Workspace)
    return ws, _compiled(gw.text)


def decide(gw: GenWorkspace, request: Request) -> Decision:
    decision = build(gw)[1].decide(request)
    assert decision.effect in EFFECTS, decision
    return decision


def reference(gw: GenWorkspace, request: Request) -> tuple[str, Mapping[str, Any] | None]:
    return reference_decide(build(gw)[0], request)


def same_value(a: Any, b: Any) -> bool:
    """Equal, and of the same kinds all the way down (a tuple is not a list, 1 not True)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Decimal | float) and a != a:
        return bool(b != b)  # NaN: the same NaN kind on both sides
    return bool(a == b)


def outcome(decision: Decision) -> tuple[str, Any]:
    """Effect, and the args to use when the call goes ahead (allow or pause)."""
    return decision.effect, decision.args if decision.effect != "deny" else None


def holds(gw: GenWorkspace, where: ast.Expr | None, request: Request) -> bool | Exception | None:
    """The reference's verdict on one condition for a request (None: bad shape)."""
    spec = gw.specs.get(request.tool)
    if spec is None:
        return None
    shaped = validate(spec, request.args)
    if isinstance(shaped, str):
        return None
    return reference_holds(where, _Env(shaped, request))


def with_rule(gw: GenWorkspace, role: str, rule: ast.Rule) -> GenWorkspace:
    old = gw.role(role)
    return gw.with_role(ast.Role(role, (*old.rules, rule)))


def with_extra_role(gw: GenWorkspace, profile: str, role: ast.Role) -> GenWorkspace:
    """Add `role` to the workspace and to `profile`'s role list."""
    p = gw.profile(profile)
    grown = replace(p, roles=(*p.roles, role.name))
    return gw.with_role(role).with_profile(grown)


def with_extra_hook(gw: GenWorkspace, profile: str, hook: ast.Hook) -> GenWorkspace:
    """Add `hook` to the workspace and install it last on `profile`."""
    p = gw.profile(profile)
    installed = p.hooks if p.hooks_written and p.hooks != ("none",) else ("default",)
    if p.hooks == ("none",):
        installed = ()
    grown = replace(p, hooks=(*installed, hook.name), hooks_written=True)
    return gw.with_hook(hook).with_profile(grown)


def isolated(
    gw: GenWorkspace, name: str, roles: tuple[ast.Role, ...], hooks: tuple[ast.Hook, ...] = ()
) -> GenWorkspace:
    """The workspace plus a profile `name` holding only these roles and hooks."""
    for role in roles:
        gw = gw.with_role(role)
    for hook in hooks:
        gw = gw.with_hook(hook)
    listed = tuple(h.name for h in hooks) or ("none",)
    profile = ast.Profile(name, tuple(r.name for r in roles), listed, hooks_written=True)
    return gw.with_profile(profile)


def same_outcome(a: Decision, b: Decision) -> bool:
    ea, aa = outcome(a)
    eb, ab = outcome(b)
    return ea == eb and same_value(dict(aa or {}), dict(ab or {}))
