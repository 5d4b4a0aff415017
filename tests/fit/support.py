"""Helpers for the fit tests: build snapshots from DSL text and replay counterexamples."""

from __future__ import annotations

from typing import Any

from engine.check import check_sources
from engine.compile import Snapshot, compile_workspace
from engine.decision import Request
from engine.reference import _roles

TOOLSETS = """
toolset mail {
  tool send(to: str, subject: str, body: str, cc: list[str] = [], priority?: int)
  tool search(query: str, limit: int = 20, ratio?: decimal, tags: list[str] = [])
}
toolset scripts {
  runs code
  tool run(source: str, env: map = {})
}
"""


def snapshot(text: str, toolsets: str = TOOLSETS) -> Snapshot:
    return compile_workspace(check_sources([("toolsets.charter", toolsets), ("p.charter", text)]))


def roles_effect(snap: Snapshot, profile: str, call: dict[str, Any]) -> str:
    """The reference interpreter's roles-only answer for a counterexample call."""
    ws = snap.workspace
    tool = ws.tools.get(call["tool"])
    if tool is None:
        return "deny"
    request = Request(
        profile, call["tool"], call["args"], call["context"], call["agent"], call["thread"]
    )
    effect, _ = _roles(ws, ws.profiles[profile], tool, call["args"], request)
    return effect
