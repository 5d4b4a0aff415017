"""What goes into a decision and what comes out of one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

DecisionEffect = Literal["allow", "deny", "pause"]


@dataclass(frozen=True, slots=True)
class Request:
    """One tool call to decide. `profile` is the agent's profile, resolved by the caller."""

    profile: str
    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)
    context: Mapping[str, Any] | None = None
    agent: Mapping[str, Any] | None = None
    thread: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Reason:
    """Why: the rule or hook that decided, by role or profile name and source location.

    kind is one of `allow`, `deny` (role rules), `hook-pause`, `hook-deny`,
    `hook-rewrite`, `shape` (bad tool or arguments), `not-granted`, `execute`.
    """

    kind: str
    message: str
    role: str | None = None
    hook: str | None = None
    location: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in (
            ("kind", self.kind), ("message", self.message), ("role", self.role),
            ("hook", self.hook), ("location", self.location),
        ) if v is not None}  # fmt: skip


@dataclass(frozen=True, slots=True)
class ConditionError:
    """A condition that failed to evaluate, and what that did (never a grant)."""

    location: str
    message: str
    effect: str  # what the erroring rule or hook did: "ignored allow", "applied deny", ...

    def to_json(self) -> dict[str, Any]:
        return {"location": self.location, "message": self.message, "effect": self.effect}


class Decision(NamedTuple):
    """The answer. A named tuple: decisions are made millions of times a second, and the
    compiled plans build one with a single C-level `tuple.__new__` (see `make_decision`)
    instead of running a Python `__init__`. Constant answers (denies, not-granted) are
    built once per plan and shared; they are immutable."""

    effect: DecisionEffect
    args: Mapping[str, Any] | None
    reasons: tuple[Reason, ...]
    errors: tuple[ConditionError, ...] = ()
    near_misses: tuple[Reason, ...] = ()

    @property
    def allowed(self) -> bool:
        return self.effect == "allow"

    def __repr__(self) -> str:
        return f"Decision({self.effect!r}, reasons={[r.message for r in self.reasons]!r})"

    def to_json(self) -> dict[str, Any]:
        return {
            "effect": self.effect,
            "args": dict(self.args) if self.args is not None else None,
            "reasons": [r.to_json() for r in self.reasons],
            "errors": [e.to_json() for e in self.errors],
            "near_misses": [r.to_json() for r in self.near_misses],
        }


def make_decision(
    effect: DecisionEffect,
    args: Mapping[str, Any] | None,
    reasons: tuple[Reason, ...],
    errors: tuple[ConditionError, ...] = (),
    near_misses: tuple[Reason, ...] = (),
) -> Decision:
    """Readable spelling of the fast constructor; hot paths inline `_new(Decision, (...))`."""
    return _new(Decision, (effect, args, reasons, errors, near_misses))


_new = tuple.__new__
