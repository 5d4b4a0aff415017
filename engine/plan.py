"""Plans: what decides one tool for one profile.

A plan is data (a slotted `CompiledPlan`, engine.compiledplan) plus its run function,
picked at compile time by what the plan needs from a few generated per signature
(`engine.runfns`: a constant answer after the shape check, a straight allow, allows
only, denies then allows), or `run_hooks` (the roles, then the profile's hooks).
A plan is made from its shape (`PlanShape`: the rule and hook tuples and the kind of
run function), which every tool that the same rules and hooks reach shares; the tool
adds its name, its run function and its default answer (`shaped_plan`).

Every plan runs docs/design.md section 2 in order: shape (validate and apply defaults), denies
win, allows add up, then the profile's hooks (deny, rewrites re-checked against the
roles, pause). Every failure path denies; nothing here can fail open.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.codegen import ConditionFn
from engine.compiledplan import CompiledPlan, PlanHooks, RunFn
from engine.decision import Decision, Reason, make_decision
from engine.runfns import RunFunctions, condition_error

Plan = Callable[[Any, Any, Any, Any], Decision]

EXECUTE_MESSAGE = (
    "Tool {name} runs code in the sandbox, which is not enabled for this agent. "
    "Its owner can grant code execution in the agent's tool settings."
)


@dataclass(frozen=True, slots=True)
class RuleEntry:
    """One role rule, prepared once and shared by every plan it reaches."""

    reason: Reason
    fn: ConditionFn | None
    reasons: tuple[Reason, ...]  # (reason,), built once
    denied: Decision | None  # for a deny, its answer when it applies (None for an allow)


def rule_entry(reason: Reason, fn: ConditionFn | None) -> RuleEntry:
    reasons = (reason,)
    denied = make_decision("deny", None, reasons) if reason.kind == "deny" else None
    return RuleEntry(reason, fn, reasons, denied)


@dataclass(frozen=True, slots=True)
class HookEntry:
    reason: Reason
    kind: str
    fn: ConditionFn | None
    rewrites: tuple[tuple[str, ConditionFn], ...]


def run_hooks(p: CompiledPlan, args: Any, x: Any, g: Any, t: Any) -> Decision:
    """Steps 2-5, then step 7: deny hooks, rewrites (re-checked through the roles), pauses."""
    assert p.hooks is not None
    deny_hooks, rewrite_hooks, pause_hooks, check = p.hooks
    decision = check(p, args, x, g, t)
    if decision.effect != "allow":
        return decision
    a = decision.args
    reasons = decision.reasons
    errors = decision.errors
    for reason, cond in deny_hooks:
        try:
            if cond is None or cond(a, x, g, t):
                return make_decision("deny", None, (*reasons, reason), errors)
        except Exception as exc:
            return make_decision(
                "deny",
                None,
                (*reasons, reason),
                (*errors, condition_error(reason, exc, "applied deny hook")),
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
            return make_decision(
                "deny",
                None,
                (*reasons, reason),
                (*errors, condition_error(reason, exc, "rewrite failed, denied")),
            )
        a = new
        reasons = (*reasons, reason)
        rewritten = True
    if rewritten:
        # A rewrite can never reach what the roles do not allow: check the new call.
        again = check(p, a, x, g, t)
        if again.effect != "allow":
            return make_decision(
                "deny",
                None,
                (*reasons, *again.reasons),
                (*errors, *again.errors),
                again.near_misses,
            )
        a = again.args
        errors = (*errors, *again.errors)
    # Every pause hook that applies is named, not only the first: the human approving sees
    # each reason, and an approval lifts only the pauses it named (a hook added since,
    # which that human never saw, pauses the re-check again: api.service.decisionlog).
    paused: tuple[Reason, ...] = ()
    for reason, cond in pause_hooks:
        try:
            if cond is None or cond(a, x, g, t):
                paused = (*paused, reason)
        except Exception as exc:
            paused = (*paused, reason)
            errors = (*errors, condition_error(reason, exc, "applied pause hook"))
    if paused:
        return make_decision("pause", a, (*reasons, *paused), errors)
    return make_decision("allow", a, reasons, errors)


# ---- building ---------------------------------------------------------------------------
def make_unknown_tool(tool: str) -> Decision:
    return make_decision("deny", None, (Reason("shape", f"unknown tool `{tool}`"),))


class PlanParts:
    """What plans of one snapshot share, so that 25,000 plans cost little memory: the run
    functions, one not-granted and one execute answer per tool, one copy of each
    distinct rule or hook tuple (the 50 tools under one `ns.*` grant all point at the
    same tuple), and one constant plan per tool for every profile in which no rule and
    no hook reaches it."""

    def __init__(self, runs: RunFunctions) -> None:
        self.runs = runs
        self._not_granted: dict[str, Decision] = {}
        self._execute: dict[str, Decision] = {}
        self._constant: tuple[dict[str, CompiledPlan], dict[str, CompiledPlan]] = ({}, {})
        self._tuples: dict[tuple[str, tuple[int, ...]], tuple[Any, ...]] = {}

    def not_granted(self, tool: str) -> Decision:
        found = self._not_granted.get(tool)
        if found is None:
            reason = Reason("not-granted", f"no rule grants `{tool}`")
            found = self._not_granted[tool] = make_decision("deny", None, (reason,))
        return found

    def execute_denied(self, tool: str) -> Decision:
        found = self._execute.get(tool)
        if found is None:
            reason = Reason("execute", EXECUTE_MESSAGE.format(name=tool))
            found = self._execute[tool] = make_decision("deny", None, (reason,))
        return found

    def constant(self, tool: str, execute_missing: bool) -> CompiledPlan:
        """Shape check, then not granted (or the `execute` answer): the same in every
        profile, so one plan per tool serves them all (plans are never changed once
        built)."""
        plans = self._constant[execute_missing]  # keyed by name alone: no tuple per tool
        found = plans.get(tool)
        if found is None:
            answer = self.execute_denied(tool) if execute_missing else self.not_granted(tool)
            found = plans[tool] = CompiledPlan(tool, self.runs.get(tool, "constant"), answer)
        return found

    def constants(self, execute_missing: bool) -> Mapping[str, CompiledPlan]:
        """The constant plans built so far, by tool name."""
        return self._constant[execute_missing]

    def intern(self, kind: str, entries: Sequence[Any], build: Callable[[], Any]) -> Any:
        key = (kind, tuple(id(e) for e in entries))
        found = self._tuples.get(key)
        if found is None:
            found = self._tuples[key] = build()
        return found

    def forget_tuples(self) -> None:
        """Drop the interning index (its keys cost as much as the tuples) once the
        eager plans are built; plans built later just share less."""
        self._tuples = {}


_Denies = tuple[tuple[Reason, ConditionFn | None, Decision], ...]
_Allows = tuple[tuple[tuple[Reason, ...], ConditionFn | None], ...]
_HookTuples = tuple[
    tuple[tuple[Reason, ConditionFn | None], ...],
    tuple[tuple[Reason, ConditionFn | None, tuple[tuple[str, ConditionFn], ...]], ...],
    tuple[tuple[Reason, ConditionFn | None], ...],
]


_NO_HOOKS: dict[RunFn, PlanHooks] = {}  # never written: a shape without hooks


class PlanShape:
    """What a plan holds besides its tool: the rule and hook tuples and which kind of run
    function reads them. Every tool that the same rules and hooks reach has the same
    shape (a profile's tools reached only through `*`, or by no rule, all have one), so a
    plan is built from its shape with a few stores (`shaped_plan`)."""

    __slots__ = ("allows", "checked", "denies", "hooks", "kind", "near")

    def __init__(
        self,
        kind: str,
        denies: _Denies = (),
        allows: _Allows = (),
        near: tuple[Reason, ...] = (),
        hooks: _HookTuples | None = None,
    ) -> None:
        self.kind = kind  # a kind of run function (engine.runfns.KINDS), or "hooks"
        self.denies = denies
        self.allows = allows
        self.near = near
        self.hooks = hooks
        # With hooks: the plans' `hooks` tuple, per roles check (one per signature).
        self.checked: dict[RunFn, PlanHooks] = {} if hooks is not None else _NO_HOOKS


CONSTANT = PlanShape("constant")


def plan_shape(
    denies: Sequence[RuleEntry],
    allows: Sequence[RuleEntry],
    hooks: Sequence[HookEntry],
    parts: PlanParts,
    execute_missing: bool = False,
) -> PlanShape:
    """The shape of the plans of the tools these denies, allows (in evaluation order: the
    compiler puts unconditional grants first) and hooks reach. Its tuples are shared
    through `parts` while it interns (see `PlanParts.forget_tuples`). The entries must
    stay alive as long as `parts` (it keys by id).

    A tool that runs code the profile may not run is denied unless a deny applies first
    (docs/design.md section 2: denies win, then the `execute` grant), so its allows are
    dropped and its default answer is the `execute` one."""
    if execute_missing:
        allows = ()
    if not denies and not hooks and not allows:
        return CONSTANT
    d: _Denies = ()
    a: _Allows = ()
    near: tuple[Reason, ...] = ()
    if denies:
        d = parts.intern(
            "denies", denies, lambda: tuple((e.reason, e.fn, e.denied) for e in denies)
        )
    if allows:
        a = parts.intern("allows", allows, lambda: tuple((e.reasons, e.fn) for e in allows))
        near = parts.intern(
            "near", allows, lambda: tuple(e.reason for e in allows if e.fn is not None)
        )
    if hooks:
        triple = parts.intern(
            "hooks",
            hooks,
            lambda: (
                tuple((h.reason, h.fn) for h in hooks if h.kind == "deny"),
                tuple((h.reason, h.fn, h.rewrites) for h in hooks if h.kind == "rewrite"),
                tuple((h.reason, h.fn) for h in hooks if h.kind == "pause"),
            ),
        )
        shape: PlanShape = parts.intern(
            "shape", (triple, *denies, *allows), lambda: PlanShape("hooks", d, a, near, triple)
        )
        return shape
    if denies:
        kind = "roles"
    elif allows[0].fn is None:
        kind = "allow"
        near = allows[0].reasons  # an `allow` plan keeps its grant's reasons in `near`
    else:
        kind = "allows"
    return PlanShape(kind, d, a, near)


def shaped_plan(
    tool: str, shape: PlanShape, parts: PlanParts, execute_missing: bool = False
) -> CompiledPlan:
    """The plan of `tool` with `shape` (made with the same `execute_missing`)."""
    kind = shape.kind
    if kind == "constant":
        return parts.constant(tool, execute_missing)
    answer = parts.execute_denied(tool) if execute_missing else parts.not_granted(tool)
    if kind != "hooks":
        plan = CompiledPlan(tool, parts.runs.get(tool, kind), answer)
    else:  # the roles check of the tool's signature, then the hooks (run_hooks)
        check = parts.runs.get(tool, "roles")
        plan = CompiledPlan(tool, run_hooks, answer)
        hooks = shape.checked.get(check)
        if hooks is None:
            triple = shape.hooks
            assert triple is not None
            hooks = shape.checked[check] = parts.intern(
                "checked", (triple, check), lambda: (*triple, check)
            )
        plan.hooks = hooks
    plan.denies = shape.denies
    plan.allows = shape.allows
    plan.near = shape.near
    return plan


def make_plan(
    tool: str,
    denies: Sequence[RuleEntry],
    allows: Sequence[RuleEntry],
    hooks: Sequence[HookEntry],
    parts: PlanParts,
    execute_missing: bool = False,
) -> CompiledPlan:
    """The plan for one tool (`plan_shape`, then `shaped_plan`)."""
    shape = plan_shape(denies, allows, hooks, parts, execute_missing)
    return shaped_plan(tool, shape, parts, execute_missing)
