"""Semantic diff of two policy revisions: per profile, what of its access changed.

A profile's access is its roles' allows and denies, its hooks and its budget. For a
profile both revisions have, the diff asks the fit check (engine.fit) its profile
question both ways: "does NEW's profile fit inside OLD's?" (what fails is *wider*) and
"does OLD's fit inside NEW's?" (what fails is *narrower*). Each violation becomes one
change of its kind: `allow` (calls NEW's roles allow that OLD's did not), `deny` (calls
OLD's deny rules refused that NEW's do not: a widening even where no allow grants the
tool today, since a role added later would reach them), `hook` (a hook dropped, added or
changed; rewrite hooks added, dropped or reordered) and `budget` (loosened or removed).
So `charter diff` and `charter fit --profile` cannot disagree: the diff is the fit
check's answer, sorted.

A profile on one side only has no access on the other: an added one widens by every call
its roles allow (its hooks, denies and budget act on its own access only), a removed one
narrows by every call its roles allowed. A question the solver could not decide (a
timeout, a construct outside the fragment, a changed signature) is `unknown`; in the
"wider" question it counts as widening, so a CI gate on the exit code fails closed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from engine.fit import Violation, fit_workspace_profile
from engine.fit.access import Side
from engine.redaction import redact_call
from engine.workspace import Workspace
from policy import ast

# The fit check's violation kinds, as the diff names what changed.
_KINDS = {"widens": "allow", "drops-deny": "deny", "drops-hook": "hook", "budget": "budget"}
_UNDECIDED = ("timeout", "unsupported")
_TREATED = "; treated as not fitting"
DIRECTIONS = ("wider", "narrower", "unknown")


def _budget_json(budget: ast.Budget | None) -> dict[str, Any] | None:
    if budget is None:
        return None
    return {"amount": budget.amount, "period": budget.period}


@dataclass(frozen=True)
class BudgetChange:
    old: ast.Budget | None
    new: ast.Budget | None

    def to_json(self) -> dict[str, Any]:
        return {"old": _budget_json(self.old), "new": _budget_json(self.new)}


@dataclass(frozen=True)
class Change:
    """One thing of a profile's access that got wider or narrower (or may have)."""

    profile: str
    tool: str | None
    direction: str  # "wider" | "narrower" | "unknown"
    message: str
    role: str | None = None  # the role whose rule makes the difference
    location: str | None = None
    counterexample: dict[str, Any] | None = None  # confirmed by the evaluator
    kind: str = "allow"  # "allow" | "deny" | "hook" | "budget"
    widens: bool = True  # counts as widening: wider, or undecided whether it is
    hook: str | None = None
    budget: BudgetChange | None = None
    # The tool's secret argument names: redacted wherever the counterexample is shown.
    secrets: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    def shown_counterexample(self) -> dict[str, Any] | None:
        """The counterexample as shown to anyone: its secret arguments redacted."""
        return redact_call(self.secrets, self.counterexample)

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "tool": self.tool,
            "direction": self.direction,
            "message": self.message,
            "role": self.role,
            "location": self.location,
            "counterexample": self.shown_counterexample(),  # (a Decimal as it is)
            "kind": self.kind,
            "widens": self.widens,
            "hook": self.hook,
            "budget": None if self.budget is None else self.budget.to_json(),
        }


@dataclass(frozen=True)
class DiffResult:
    changes: tuple[Change, ...]

    @property
    def widened(self) -> bool:
        return any(c.widens for c in self.changes)

    @property
    def narrowed(self) -> bool:
        return any(not c.widens for c in self.changes)

    def to_json(self) -> dict[str, Any]:
        return {
            "widened": self.widened,
            "narrowed": self.narrowed,
            "changes": [c.to_json() for c in self.changes],
        }


@dataclass(frozen=True)
class _Question:
    """One direction of the comparison of one profile: does `candidate` fit `caller`?"""

    name: str
    caller: Workspace
    candidate: Workspace
    old: Workspace
    new: Workspace
    wider: bool  # the candidate is NEW: what does not fit is wider

    @property
    def direction(self) -> str:
        return "wider" if self.wider else "narrower"

    def profile(self, ws: Workspace) -> ast.Profile:
        return ws.profiles[self.name]

    def change(self, v: Violation) -> Change:
        if v.kind in _UNDECIDED:
            return self._undecided(v)
        kind = _KINDS[v.kind]
        change = Change(
            self.name,
            v.tool,
            self.direction,
            "",
            # the rule that allows (NEW's when wider, OLD's when narrower), else NEW's
            # profile or budget: where the change is made
            location=v.location if kind == "allow" else str(self.profile(self.new).span),
            counterexample=v.counterexample,
            secrets=v.secrets,
            kind=kind,
            widens=self.wider,
        )
        if kind == "allow":
            return replace(change, message=self._allow_message(v), role=v.grant)
        if kind == "deny":
            roles = self._deny_roles(v.tool)
            role = roles[0] if roles else None
            return replace(change, message=self._deny_message(v.tool, roles), role=role)
        if kind == "hook":
            name = v.grant or ""  # (a drops-hook violation names its hook)
            return replace(change, message=self._hook_message(name), hook=name)
        before, after = self.profile(self.old).budget, self.profile(self.new).budget
        message = _budget_message(before, after, self.wider)
        if after is not None:
            change = replace(change, location=str(after.span))
        return replace(change, message=message, budget=BudgetChange(before, after))

    def _allow_message(self, v: Violation) -> str:
        if self.wider:
            return f"`{v.tool}`: role `{v.grant}` now allows calls it did not"
        return f"`{v.tool}`: calls that role `{v.grant}` allowed are now refused"

    def _deny_roles(self, tool: str | None) -> list[str]:
        if tool is None:
            return []
        side = Side(self.caller, self.profile(self.caller))
        return list(dict.fromkeys(name for _, name in side.denies(tool)))

    def _deny_message(self, tool: str | None, roles: list[str]) -> str:
        names = ("roles " if len(roles) > 1 else "role ") + ", ".join(f"`{r}`" for r in roles)
        if self.wider:
            return (
                f"`{tool}`: calls that the deny rules of {names} refused are no longer "
                "refused by a deny rule"
            )
        return f"`{tool}`: the deny rules of {names} refuse calls that were not denied"

    def _hook_message(self, name: str) -> str:
        before = {h.name: h for h in self.old.profile_hooks(self.profile(self.old))}
        after = {h.name: h for h in self.new.profile_hooks(self.profile(self.new))}
        old, new = before.get(name), after.get(name)
        if old is not None and new is not None and old != new:
            return f"hook `{name}` is changed (its tools, condition or action)"
        if old is not None and new is None:
            return f"hook `{name}` ({old.kind}) is dropped"
        if new is not None and old is None:
            return f"hook `{name}` ({new.kind}) is added"
        return f"the rewrite hooks run in another order, from `{name}` on"

    def _undecided(self, v: Violation) -> Change:
        at_profile = v.question == "deny"
        reason = v.message.removesuffix(_TREATED)
        what = "widened; counted as wider" if self.wider else "narrowed"
        prefix = f"`{v.tool}`: " if v.tool else ""
        return Change(
            self.name,
            v.tool,
            "unknown",
            f"{prefix}undecided whether the access {what} ({reason})",
            None if at_profile else v.grant,
            v.location,
            kind="deny" if at_profile else "allow",
            widens=self.wider,
        )


def _show(budget: ast.Budget | None) -> str:
    return "none (unlimited)" if budget is None else f"`{budget.amount} usd per {budget.period}`"


def _budget_message(old: ast.Budget | None, new: ast.Budget | None, wider: bool) -> str:
    if new is None:
        return f"the budget {_show(old)} is removed (unlimited)"
    if old is None:
        return f"a budget {_show(new)} is added"
    return f"the budget is {'looser' if wider else 'tighter'}: {_show(old)} becomes {_show(new)}"


def _without(ws: Workspace, name: str) -> Workspace:
    """`ws` with an empty profile `name`: no roles, so no access at all."""
    empty = ast.Profile(name, (), ("none",), hooks_written=True)
    return replace(ws, profiles={**ws.profiles, name: empty})


def _ask(question: _Question, timeout_ms: int, *, access_only: bool) -> list[Change]:
    result = fit_workspace_profile(
        question.caller, question.name, question.candidate, question.name, timeout_ms=timeout_ms
    )
    violations = result.violations
    if access_only:  # (an empty profile has no access for hooks or a budget to act on)
        violations = tuple(v for v in violations if v.kind in ("widens", *_UNDECIDED))
    return [question.change(v) for v in violations]


def diff_profile(
    old: Workspace, new: Workspace, name: str, *, timeout_ms: int = 10_000
) -> list[Change]:
    """What of profile `name`'s access changed from `old` to `new` (absent = no access).
    Each direction is one fit question with its own `timeout_ms`, as `charter fit` asks it."""
    in_old, in_new = name in old.profiles, name in new.profiles
    if in_old and in_new:
        return [
            *_ask(_Question(name, old, new, old, new, True), timeout_ms, access_only=False),
            *_ask(_Question(name, new, old, old, new, False), timeout_ms, access_only=False),
        ]
    if in_new:
        empty = _without(old, name)
        return _ask(_Question(name, empty, new, empty, new, True), timeout_ms, access_only=True)
    if in_old:
        empty = _without(new, name)
        return _ask(_Question(name, empty, old, old, empty, False), timeout_ms, access_only=True)
    return []


def diff_workspaces(old: Workspace, new: Workspace, *, timeout_ms: int = 10_000) -> DiffResult:
    """Every profile of either workspace, compared (`diff_profile`)."""
    changes: list[Change] = []
    for name in sorted(set(old.profiles) | set(new.profiles)):
        changes += diff_profile(old, new, name, timeout_ms=timeout_ms)
    return DiffResult(tuple(changes))


__all__ = ["DIRECTIONS", "BudgetChange", "Change", "DiffResult", "diff_profile", "diff_workspaces"]
