"""Helpers for the fit tests: build snapshots from DSL text, replay counterexamples, and
read calls from the solver's models (and the calls one step from them)."""

from __future__ import annotations

import os
import time
from typing import Any

import z3

from engine.check import check_sources
from engine.compile import Snapshot, compile_workspace
from engine.decision import Request
from engine.fit.access import Side
from engine.fit.encode import Encoder
from engine.fit.model import CallBuilder, TooLarge
from engine.fit.terms import Z3_LOCK, Unsupported
from engine.reference import _roles
from engine.workspace import Workspace

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
toolset issues {
  tool get(state: enum["open", "closed", "ab"], repoName: str, tag?: enum["a", "b"])
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


def neighbours(value: Any) -> list[Any]:
    """Values next to `value`: each list shortened, grown by a member it holds or by
    "x", emptied and reversed, each map without one member, at every depth."""
    out: list[Any] = []
    if isinstance(value, list):
        out += [value[:-1], [*value, value[0] if value else "x"], [], value[::-1]]
        for index, item in enumerate(value):
            out += [[*value[:index], n, *value[index + 1 :]] for n in neighbours(item)]
    elif isinstance(value, dict):
        for key, member in value.items():
            out.append({k: v for k, v in value.items() if k != key})
            out += [{**value, key: n} for n in neighbours(member)]
    return out


def model_calls(ws: Workspace, profile: str, tool: str, models: int = 3) -> list[dict[str, Any]]:
    """Calls the profile allows, read from the solver's models of its access to `tool`
    (each model excluded from the next), and every call one step from them."""
    spec = ws.tools[tool]
    side = Side(ws, ws.profiles[profile])
    found: list[dict[str, Any]] = []
    with Z3_LOCK:
        enc = Encoder(spec).prepare([r.where for r, _ in side.rules_for(tool)])
        try:
            allowed = side.allowed(enc)
        except Unsupported:
            return []
        solver = z3.Solver()
        solver.set("timeout", 2_000)
        solver.add(*enc.axioms(), allowed)
        for _ in range(models):
            if solver.check() != z3.sat:
                break
            model = solver.model()
            try:
                found.append(CallBuilder(enc, model).call())
            except TooLarge:
                break
            values = [var.value for var in enc.paths.values()]
            solver.add(z3.Or(*(v != model.eval(v, model_completion=True) for v in values)))
    out = list(found)
    for c in found:
        for part in ("args", "context", "agent", "thread"):
            out += [{**c, part: n} for n in neighbours(c[part]) if isinstance(n, dict)]
    return out


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
