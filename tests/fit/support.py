"""Helpers for the fit tests: build snapshots from DSL text and replay counterexamples."""

from __future__ import annotations

import os
import time
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
toolset data {
  tool put(a: map, b: map = {}, rows: list[map] = [], grid: list[list[str]] = [], nums: list[int] = [], ratios: list[decimal] = [], flags: list[bool] = [], tags: list[str] = [], name?: str, size?: int, share?: decimal, on?: bool)
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


_PROGRESS: dict[str, int] = {}


def progress(name: str) -> None:
    """Count examples of a long run: with FIT_PROGRESS=path, every 200th is written down
    so a run stopped early still says how far it got."""
    path = os.environ.get("FIT_PROGRESS")
    if not path:
        return
    _PROGRESS[name] = _PROGRESS.get(name, 0) + 1
    if _PROGRESS[name] % 200 == 0:
        with open(path, "a", encoding="utf-8") as out:
            out.write(f"{time.strftime('%H:%M:%S')} {name} {_PROGRESS[name]}\n")
