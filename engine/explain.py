"""A readable trace of one decision: every rule and hook considered, and what it did."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.compile import Snapshot
from engine.decision import Decision, Request
from engine.reference import _Env, holds, validate
from engine.runtime import describe
from grammar.fmt import expr_text


def _verdict(result: bool | Exception) -> str:
    if isinstance(result, Exception):
        return f"error ({describe(result)})"
    return "true" if result else "false"


def explain(
    snapshot: Snapshot, request: Request, show: Callable[[Any], str] = str
) -> tuple[Decision, str]:
    """The compiled decision, and a step-by-step account of how it was reached; `show`
    writes the arguments (the command line gives its JSON, where a Decimal is a number
    with all its digits rather than `Decimal('0.1')`)."""
    decision = snapshot.decide(request)
    ws = snapshot.served
    lines = [f"decide `{request.tool}` for profile `{request.profile}`"]
    profile = ws.profiles.get(request.profile)
    tool = ws.tools.get(request.tool)
    if profile is None or tool is None:
        lines.append(f"  1. shape: {decision.reasons[0].message}")
    else:
        shaped = validate(tool, request.args)
        if isinstance(shaped, str):
            lines.append(f"  1. shape: {decision.reasons[0].message}")
        else:
            lines.append(f"  1. shape: ok, arguments {show(dict(shaped))}")
            env = _Env(shaped, request)
            step = 2
            for effect, title in (("deny", "denies win"), ("allow", "allows add up")):
                lines.append(f"  {step}. {title}:")
                step += 1
                found = False
                for name in dict.fromkeys(profile.roles):
                    for rule in ws.roles[name].rules:
                        if rule.effect != effect or not any(
                            p.matches(tool.name) for p in rule.patterns
                        ):
                            continue
                        found = True
                        cond = f" where {expr_text(rule.where)}" if rule.where is not None else ""
                        lines.append(
                            f"     - role `{name}` {rule.span}: {effect}{cond}"
                            f" -> {_verdict(holds(rule.where, env))}"
                        )
                if not found:
                    lines.append(f"     (no {effect} rule matches `{tool.name}`)")
            hooks = [
                h
                for h in ws.profile_hooks(profile)
                if any(p.matches(tool.name) for p in h.patterns)
            ]
            lines.append(f"  {step}. hooks:")
            for hook in hooks:
                cond = f" where {expr_text(hook.where)}" if hook.where is not None else ""
                lines.append(
                    f"     - hook `{hook.name}` ({hook.kind}){cond}"
                    f" -> {_verdict(holds(hook.where, env))}"
                )
            if not hooks:
                lines.append("     (no hook of this profile matches)")
    lines.append(f"result: {decision.effect.upper()}")
    for reason in decision.reasons:
        where = f" at {reason.location}" if reason.location else ""
        lines.append(f"  because {reason.message}{where}")
    for error in decision.errors:
        lines.append(f"  condition error at {error.location}: {error.message} ({error.effect})")
    for miss in decision.near_misses:
        lines.append(f"  near miss: {miss.message} at {miss.location} (its condition did not hold)")
    if decision.args is not None:
        lines.append(f"  arguments to use: {show(dict(decision.args))}")
    return decision, "\n".join(lines)
