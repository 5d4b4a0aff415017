"""Replaying what `engine.diff` reports: each allow or deny change's counterexample is
what its direction says, by the reference evaluator; and how a profile decides a call,
hooks included, to compare two revisions call by call."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from engine.decision import Request
from engine.diff import Change
from engine.reference import _roles, reference_decide
from engine.workspace import Workspace
from policy import ast

# deny < pause < allow: a revision is no wider for a call when it ranks it no higher
RANK = {"deny": 0, "pause": 1, "allow": 2}


def _request(profile: str, call: dict[str, Any]) -> Request:
    return Request(
        profile, call["tool"], call["args"], call.get("context"), call.get("agent"),
        call.get("thread"),
    )  # fmt: skip


def roles_effect(ws: Workspace, profile: ast.Profile, call: dict[str, Any]) -> str:
    """The reference interpreter's roles step (hooks ignored)."""
    tool = ws.tools[call["tool"]]
    return _roles(ws, profile, tool, call["args"], _request(profile.name, call))[0]


def deny_fires(ws: Workspace, profile: str, call: dict[str, Any]) -> bool:
    """Whether the profile's deny rules deny the call: its roles, plus one allowing it."""
    probe = ast.Role("~probe", (ast.Rule("allow", (ast.Pattern(call["tool"]),)),))
    ws = replace(ws, roles={**ws.roles, "~probe": probe})
    side = ws.profiles[profile]
    return roles_effect(ws, replace(side, roles=(*side.roles, "~probe")), call) == "deny"


def confirm(old: Workspace, new: Workspace, change: Change) -> None:
    """The counterexample of an allow or deny change is real: for a wider allow, NEW's
    roles allow it and OLD's do not (or OLD has no such profile); for a wider deny,
    OLD's deny rules deny it and NEW's do not; a narrower one the other way round."""
    call = change.counterexample
    assert call is not None, change
    before, after = (old, new) if change.direction == "wider" else (new, old)
    name = change.profile
    if change.kind == "allow":
        assert roles_effect(after, after.profiles[name], call) == "allow", change
        if name in before.profiles:
            assert roles_effect(before, before.profiles[name], call) != "allow", change
    else:
        assert change.kind == "deny", change
        assert deny_fires(before, name, call) and not deny_fires(after, name, call), change


def decide(ws: Workspace, profile: str, call: dict[str, Any]) -> tuple[int, Any]:
    """(rank of the effect, the arguments it runs with) for the whole decision, hooks
    included; a profile the workspace lacks denies."""
    effect, args = reference_decide(ws, _request(profile, call))
    return RANK[effect], None if args is None else dict(args)
