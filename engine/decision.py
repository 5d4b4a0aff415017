"""What goes into a decision and what comes out of one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from policy.quickinit import quick_init

DecisionEffect = Literal["allow", "deny", "pause"]

try:  # the C accessor namedtuple's fields use (CPython)
    from collections import _tuplegetter as _field  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - other interpreters
    from operator import itemgetter

    def _field(index: int, doc: str) -> Any:
        return property(itemgetter(index), doc=doc)


@dataclass(frozen=True, slots=True)
class Request:
    """One tool call to decide. `profile` is the agent's profile, resolved by the caller."""

    profile: str
    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)
    context: Mapping[str, Any] | None = None
    agent: Mapping[str, Any] | None = None
    thread: Mapping[str, Any] | None = None


# Built once per call by a service: the frozen dataclass's own `__init__` (one
# `object.__setattr__` per field) cost ~540 ns, this one ~300 ns.
quick_init(Request)


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


class Decision(tuple[Any, ...]):
    """The answer: `(effect, args, reasons, errors, near_misses)`, read by name.

    A bare tuple subclass, not a NamedTuple: decisions are made millions of times a
    second, and `Decision((effect, args, reasons, errors, near_misses))` goes straight to
    tuple's C constructor (a NamedTuple's Python `__new__`, or `tuple.__new__(Decision,
    ...)`, costs 30-60 ns more per decision). Build one with `make_decision` where
    readability matters; the compiled plans pass the 5-tuple. Constant answers (denies,
    not-granted) are built once per plan and shared; they are immutable."""

    __slots__ = ()

    if TYPE_CHECKING:

        @property
        def effect(self) -> DecisionEffect: ...
        @property
        def args(self) -> Mapping[str, Any] | None: ...
        @property
        def reasons(self) -> tuple[Reason, ...]: ...
        @property
        def errors(self) -> tuple[ConditionError, ...]: ...
        @property
        def near_misses(self) -> tuple[Reason, ...]: ...

    else:
        effect = _field(0, "allow, deny or pause")
        args = _field(1, "the arguments to use (defaults applied, rewritten), or None")
        reasons = _field(2, "which rules and hooks decided")
        errors = _field(3, "conditions that failed to evaluate, and what that did")
        near_misses = _field(4, "for a call not granted: the allows whose condition was false")

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
    """A decision from its fields (hot paths pass the 5-tuple to `Decision` themselves)."""
    return Decision((effect, args, reasons, errors, near_misses))
