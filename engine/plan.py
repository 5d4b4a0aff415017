"""Plans: the closure that decides one tool for one profile.

A plan runs DESIGN.md section 2 in order: shape (validate and apply defaults), denies
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
from engine.shape import Validator

Plan = Callable[[Any, Any, Any, Any], Decision]

EXECUTE_MESSAGE = (
    "Tool {name} runs code in the sandbox, which is not enabled for this agent. "
    "Its owner can grant code execution in the agent's tool settings."
)


@dataclass(frozen=True)
class RuleEntry:
    reason: Reason
    slot: int | None
    resolve: Callable[[int], ConditionFn]

    def fn(self) -> ConditionFn | None:
        return None if self.slot is None else self.resolve(self.slot)


@dataclass(frozen=True)
class HookEntry:
    reason: Reason
    kind: str
    slot: int | None
    rewrites: tuple[tuple[str, int], ...]
    resolve: Callable[[int], ConditionFn]

    def fn(self) -> ConditionFn | None:
        return None if self.slot is None else self.resolve(self.slot)


def make_unknown_tool(tool: str) -> Plan:
    decision = Decision("deny", None, (Reason("shape", f"unknown tool `{tool}`"),))

    def unknown(args: Any, x: Any, g: Any, t: Any) -> Decision:
        return decision

    return unknown


def _error(reason: Reason, exc: BaseException, effect: str) -> ConditionError:
    return ConditionError(reason.location or "", describe(exc), effect)


def make_roles_check(
    tool: str,
    validate: Validator,
    denies: Sequence[RuleEntry],
    allows: Sequence[RuleEntry],
    execute_missing: bool,
) -> Plan:
    """Steps 2-5: shape, denies win, allows add up, fail closed."""
    deny_rules = tuple((e.reason, e.fn()) for e in denies)
    allow_rules = tuple((e.reason, e.fn()) for e in allows)
    near = tuple(r for r, fn in allow_rules if fn is not None)
    not_granted_reason = (Reason("not-granted", f"no rule grants `{tool}`"),)
    not_granted = Decision("deny", None, not_granted_reason, (), near)
    deny_decisions = {id(r): Decision("deny", None, (r,)) for r, _ in deny_rules}
    execute_denied = Decision("deny", None, (Reason("execute", EXECUTE_MESSAGE.format(name=tool)),))

    def check(args: Any, x: Any, g: Any, t: Any) -> Decision:
        try:
            a = validate(args)
        except ShapeError as exc:
            return Decision("deny", None, (Reason("shape", str(exc)),))
        for reason, cond in deny_rules:
            if cond is None:
                return deny_decisions[id(reason)]
            try:
                if cond(a, x, g, t):
                    return deny_decisions[id(reason)]
            except Exception as exc:
                return Decision("deny", None, (reason,), (_error(reason, exc, "applied deny"),))
        if execute_missing:
            return execute_denied
        errors: list[ConditionError] | None = None
        for reason, cond in allow_rules:
            if cond is None:
                return Decision("allow", a, (reason,), tuple(errors) if errors else ())
            try:
                if cond(a, x, g, t):
                    return Decision("allow", a, (reason,), tuple(errors) if errors else ())
            except Exception as exc:
                if errors is None:
                    errors = []
                errors.append(_error(reason, exc, "ignored allow"))
        if errors is None:
            return not_granted
        return Decision("deny", None, not_granted_reason, tuple(errors), near)

    return check


def make_plan(
    tool: str,
    validate: Validator,
    denies: Sequence[RuleEntry],
    allows: Sequence[RuleEntry],
    hooks: Sequence[HookEntry],
    execute_missing: bool = False,
) -> Plan:
    check = make_roles_check(tool, validate, denies, allows, execute_missing)
    if not hooks:
        return check
    deny_hooks = tuple((h.reason, h.fn()) for h in hooks if h.kind == "deny")
    rewrite_hooks = tuple(
        (h.reason, h.fn(), tuple((name, h.resolve(slot)) for name, slot in h.rewrites))
        for h in hooks
        if h.kind == "rewrite"
    )
    pause_hooks = tuple((h.reason, h.fn()) for h in hooks if h.kind == "pause")

    def plan(args: Any, x: Any, g: Any, t: Any) -> Decision:
        decision = check(args, x, g, t)
        if decision.effect != "allow":
            return decision
        a = decision.args
        reasons = decision.reasons
        errors = decision.errors
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
            again = check(a, x, g, t)
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

    return plan
