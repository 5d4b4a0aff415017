"""Plans: what decides one tool for one profile.

A plan is data (a slotted `CompiledPlan`) plus one of five shared run functions, picked
at compile time by what the plan needs: a constant answer after the shape check, a
straight allow, the general roles check, or roles then hooks. Sharing a handful of run
functions (instead of one generated function per profile x tool) keeps the code the
decisions run small and hot in the CPU caches, which is what a decision costs when 20,000
different requests go through 25,000 plans.

Every plan runs DESIGN.md section 2 in order: shape (validate and apply defaults), denies
win, allows add up, then the profile's hooks (deny, rewrites re-checked against the
roles, pause). Every failure path denies; nothing here can fail open.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.codegen import ConditionFn
from engine.decision import ConditionError, Decision, Reason
from engine.runtime import ShapeError, describe
from engine.shape import SharedValidator

Plan = Callable[[Any, Any, Any, Any], Decision]
RunFn = Callable[["CompiledPlan", Any, Any, Any, Any], Decision]
_Hooks = tuple[
    tuple[tuple[Reason, "ConditionFn | None"], ...],
    tuple[tuple[Reason, "ConditionFn | None", tuple[tuple[str, "ConditionFn"], ...]], ...],
    tuple[tuple[Reason, "ConditionFn | None"], ...],
]

EXECUTE_MESSAGE = (
    "Tool {name} runs code in the sandbox, which is not enabled for this agent. "
    "Its owner can grant code execution in the agent's tool settings."
)

_new = tuple.__new__  # Decision(...) without a Python-level __init__


@dataclass(frozen=True, slots=True)
class RuleEntry:
    """One role rule, prepared once and shared by every plan it reaches."""

    reason: Reason
    fn: ConditionFn | None
    reasons: tuple[Reason, ...]  # (reason,), built once
    denied: Decision  # the answer when this rule is a deny that applies


def rule_entry(reason: Reason, fn: ConditionFn | None) -> RuleEntry:
    return RuleEntry(reason, fn, (reason,), Decision("deny", None, (reason,)))


@dataclass(frozen=True, slots=True)
class HookEntry:
    reason: Reason
    kind: str
    fn: ConditionFn | None
    rewrites: tuple[tuple[str, ConditionFn], ...]


class CompiledPlan:
    """One profile x tool. Callable as a `Plan`: `plan(args, context, agent, thread)`.
    The snapshot's hot path calls `plan.run(plan, ...)` directly (one frame less)."""

    __slots__ = (
        "allows",
        "denies",
        "execute_denied",
        "hooks",
        "near",
        "not_granted",
        "run",
        "tool",
        "validate",
    )

    def __init__(self, tool: str, validate: SharedValidator, not_granted: Decision) -> None:
        self.tool = tool
        self.validate = validate
        self.denies: tuple[tuple[Reason, ConditionFn | None, Decision], ...] = ()
        self.allows: tuple[tuple[tuple[Reason, ...], ConditionFn | None], ...] = ()
        self.execute_denied: Decision | None = None
        self.near: tuple[Reason, ...] = ()
        # Shared per tool; for a `_run_constant` plan, the constant answer. A not-granted
        # answer with near misses is built when needed (rare; saves one object per plan).
        self.not_granted = not_granted
        self.hooks: _Hooks = ((), (), ())  # deny hooks, rewrite hooks, pause hooks
        self.run: RunFn = _run_roles

    def __call__(self, args: Any, x: Any = None, g: Any = None, t: Any = None) -> Decision:
        return self.run(self, args, x, g, t)


def shape_denied(exc: ShapeError) -> Decision:
    return _new(Decision, ("deny", None, (Reason("shape", str(exc)),), (), ()))


def _error(reason: Reason, exc: BaseException, effect: str) -> ConditionError:
    return ConditionError(reason.location or "", describe(exc), effect)


# ---- run functions (shared by every plan; `p` is the plan) ------------------------------
def _run_constant(p: CompiledPlan, args: Any, x: Any, g: Any, t: Any) -> Decision:
    """No deny and no allow can apply: after the shape check the answer is fixed."""
    try:
        p.validate(args, p.tool)
    except ShapeError as exc:
        return shape_denied(exc)
    return p.not_granted


def _run_allow(p: CompiledPlan, args: Any, x: Any, g: Any, t: Any) -> Decision:
    """No deny, no hook, and an unconditional allow: shape, then allow."""
    try:
        a = p.validate(args, p.tool)
    except ShapeError as exc:
        return shape_denied(exc)
    return _new(Decision, ("allow", a, p.allows[0][0], (), ()))


def _run_roles(p: CompiledPlan, args: Any, x: Any, g: Any, t: Any) -> Decision:
    """Steps 2-5: shape, denies win (an erroring deny applies), the `execute` grant,
    allows add up (an erroring allow does not apply), default deny."""
    try:
        a = p.validate(args, p.tool)
    except ShapeError as exc:
        return shape_denied(exc)
    for reason, cond, denied in p.denies:
        if cond is None:
            return denied
        try:
            if cond(a, x, g, t):
                return denied
        except Exception as exc:
            return _new(
                Decision,
                ("deny", None, (reason,), (_error(reason, exc, "applied deny"),), ()),
            )
    if p.execute_denied is not None:
        return p.execute_denied
    errors: list[ConditionError] | None = None
    for reasons, cond in p.allows:
        if cond is None:
            return _new(Decision, ("allow", a, reasons, tuple(errors) if errors else (), ()))
        try:
            if cond(a, x, g, t):
                return _new(Decision, ("allow", a, reasons, tuple(errors) if errors else (), ()))
        except Exception as exc:
            if errors is None:
                errors = []
            errors.append(_error(reasons[0], exc, "ignored allow"))
    if errors is None:
        if p.near:
            return _new(Decision, ("deny", None, p.not_granted.reasons, (), p.near))
        return p.not_granted
    return _new(Decision, ("deny", None, p.not_granted.reasons, tuple(errors), p.near))


def _run_hooks(p: CompiledPlan, args: Any, x: Any, g: Any, t: Any) -> Decision:
    """Steps 2-5, then step 7: deny hooks, rewrites (re-checked through the roles), pauses."""
    decision = _run_roles(p, args, x, g, t)
    if decision.effect != "allow":
        return decision
    a = decision.args
    reasons = decision.reasons
    errors = decision.errors
    deny_hooks, rewrite_hooks, pause_hooks = p.hooks
    for reason, cond in deny_hooks:
        try:
            if cond is None or cond(a, x, g, t):
                return Decision("deny", None, (*reasons, reason), errors)
        except Exception as exc:
            return Decision(
                "deny",
                None,
                (*reasons, reason),
                (*errors, _error(reason, exc, "applied deny hook")),
            )
    rewritten = False
    for reason, cond, assignments in rewrite_hooks:
        try:
            if cond is not None and not cond(a, x, g, t):
                continue
            new = dict(a or {})
            for name, value in assignments:
                new[name] = value(a, x, g, t)
        except Exception as exc:
            return Decision(
                "deny",
                None,
                (*reasons, reason),
                (*errors, _error(reason, exc, "rewrite failed, denied")),
            )
        a = new
        reasons = (*reasons, reason)
        rewritten = True
    if rewritten:
        # A rewrite can never reach what the roles do not allow: check the new call.
        again = _run_roles(p, a, x, g, t)
        if again.effect != "allow":
            return Decision(
                "deny",
                None,
                (*reasons, *again.reasons),
                (*errors, *again.errors),
                again.near_misses,
            )
        a = again.args
        errors = (*errors, *again.errors)
    for reason, cond in pause_hooks:
        try:
            if cond is None or cond(a, x, g, t):
                return Decision("pause", a, (*reasons, reason), errors)
        except Exception as exc:
            return Decision(
                "pause",
                a,
                (*reasons, reason),
                (*errors, _error(reason, exc, "applied pause hook")),
            )
    return Decision("allow", a, reasons, errors)


# ---- building ---------------------------------------------------------------------------
def make_unknown_tool(tool: str) -> Decision:
    return Decision("deny", None, (Reason("shape", f"unknown tool `{tool}`"),))


class PlanParts:
    """What plans of one snapshot share, so that 25,000 plans cost little memory: one
    not-granted and one execute answer per tool, and one copy of each distinct rule
    tuple (the 50 tools under one `ns.*` grant all point at the same tuple)."""

    def __init__(self) -> None:
        self._not_granted: dict[str, Decision] = {}
        self._execute: dict[str, Decision] = {}
        self._tuples: dict[tuple[str, tuple[int, ...]], tuple[Any, ...]] = {}

    def not_granted(self, tool: str) -> Decision:
        found = self._not_granted.get(tool)
        if found is None:
            reason = Reason("not-granted", f"no rule grants `{tool}`")
            found = self._not_granted[tool] = Decision("deny", None, (reason,))
        return found

    def execute_denied(self, tool: str) -> Decision:
        found = self._execute.get(tool)
        if found is None:
            reason = Reason("execute", EXECUTE_MESSAGE.format(name=tool))
            found = self._execute[tool] = Decision("deny", None, (reason,))
        return found

    def intern(
        self, kind: str, entries: Sequence[Any], build: Callable[[], tuple[Any, ...]]
    ) -> Any:
        key = (kind, tuple(id(e) for e in entries))
        found = self._tuples.get(key)
        if found is None:
            found = self._tuples[key] = build()
        return found


def make_plan(
    tool: str,
    validate: SharedValidator,
    denies: Sequence[RuleEntry],
    allows: Sequence[RuleEntry],
    hooks: Sequence[HookEntry],
    execute_missing: bool = False,
    parts: PlanParts | None = None,
) -> CompiledPlan:
    """The plan for one tool. `allows` in evaluation order (the compiler puts
    unconditional grants first: the first one that applies decides, and its reason is
    the one reported). The entries must stay alive as long as `parts` (it keys by id)."""
    parts = parts or PlanParts()
    plan = CompiledPlan(tool, validate, parts.not_granted(tool))
    if denies:
        plan.denies = parts.intern(
            "denies", denies, lambda: tuple((e.reason, e.fn, e.denied) for e in denies)
        )
    if allows:
        plan.allows = parts.intern(
            "allows", allows, lambda: tuple((e.reasons, e.fn) for e in allows)
        )
        plan.near = parts.intern(
            "near", allows, lambda: tuple(e.reason for e in allows if e.fn is not None)
        )
    if execute_missing:
        plan.execute_denied = parts.execute_denied(tool)
    if hooks:
        plan.hooks = (
            tuple((h.reason, h.fn) for h in hooks if h.kind == "deny"),
            tuple((h.reason, h.fn, h.rewrites) for h in hooks if h.kind == "rewrite"),
            tuple((h.reason, h.fn) for h in hooks if h.kind == "pause"),
        )
        plan.run = _run_hooks
    elif not denies and (execute_missing or not allows):
        if plan.execute_denied is not None:
            plan.not_granted = plan.execute_denied
        plan.near = ()  # a constant answer: no allow can apply, so none was a near miss
        plan.run = _run_constant
    elif not denies and allows[0].fn is None and not execute_missing:
        plan.run = _run_allow
    else:
        plan.run = _run_roles
    return plan
