"""Semantic diff of two policy revisions: per profile, the tools whose access changed.

"Wider" = a call the NEW revision's roles allow and the OLD one's do not; "narrower" the
other way round. Both are the fit question (engine.fit) asked in each direction, so
every change comes with a counterexample call the evaluator confirmed. A change the
solver could not decide (timeout, outside the fragment, a changed signature) is reported
as "unknown" and counts as widening: the CI gate fails closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.fit.access import Side
from engine.fit.check import Deadline, widenings
from engine.fit.result import Violation
from engine.fit.terms import Z3_LOCK
from engine.workspace import Workspace
from policy import ast


@dataclass(frozen=True)
class ToolChange:
    profile: str
    tool: str | None
    direction: str  # "wider" | "narrower" | "unknown"
    message: str
    role: str | None = None  # the role whose grant makes the difference
    location: str | None = None
    counterexample: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "tool": self.tool,
            "direction": self.direction,
            "message": self.message,
            "role": self.role,
            "location": self.location,
            "counterexample": self.counterexample,  # (a Decimal as it is: fit/result.py)
        }


@dataclass(frozen=True)
class DiffResult:
    changes: tuple[ToolChange, ...]

    @property
    def widened(self) -> bool:
        return any(c.direction != "narrower" for c in self.changes)

    def to_json(self) -> dict[str, Any]:
        return {"widened": self.widened, "changes": [c.to_json() for c in self.changes]}


def _side(ws: Workspace, name: str) -> Side:
    # A profile missing on one side has no roles there: it gives no tools.
    return Side(ws, ws.profiles.get(name) or ast.Profile(name, ()))


def _change(profile: str, violation: Violation, direction: str) -> ToolChange:
    if violation.kind != "widens":
        direction = "unknown"
    call = violation.counterexample
    tool = violation.tool or (str(call["tool"]) if call else None)
    if direction == "wider":
        message = f"`{tool}`: role `{violation.grant}` now allows calls it did not"
    elif direction == "narrower":
        message = f"`{tool}`: calls that role `{violation.grant}` allowed are now refused"
    else:
        message = violation.message
    return ToolChange(profile, tool, direction, message, violation.grant, violation.location, call)


def diff_workspaces(old: Workspace, new: Workspace, *, timeout_ms: int = 10_000) -> DiffResult:
    changes: list[ToolChange] = []
    deadline = Deadline.after(timeout_ms)
    names = sorted(set(old.profiles) | set(new.profiles))
    with Z3_LOCK:
        for name in names:
            before, after = _side(old, name), _side(new, name)
            for v in widenings(before, after, deadline, name):
                changes.append(_change(name, v, "wider"))
            for v in widenings(after, before, deadline, name):
                changes.append(_change(name, v, "narrower"))
    return DiffResult(tuple(changes))
