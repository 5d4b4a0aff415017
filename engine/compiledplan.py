"""The compiled plan: what one decision for one profile x tool reads, and the type of the
run functions that read it.

`engine.plan` builds plans and `engine.runfns` generates the run functions most of them
run; both import this module and neither imports the other (a plan's `run` is typed
with the plan it is given, which is typed with its `run`: the two are one concept).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.codegen import ConditionFn
from engine.decision import Decision, Reason

# What decides a plan: `run(plan, args, context, agent, thread)`.
RunFn = Callable[["CompiledPlan", Any, Any, Any, Any], Decision]
PlanHooks = tuple[
    tuple[tuple[Reason, "ConditionFn | None"], ...],
    tuple[tuple[Reason, "ConditionFn | None", tuple[tuple[str, "ConditionFn"], ...]], ...],
    tuple[tuple[Reason, "ConditionFn | None"], ...],
    RunFn,  # the roles check of the tool's signature (run first, and again after rewrites)
]


class CompiledPlan:
    """One profile x tool (a constant plan is shared by every profile that has it).
    Callable as a `Plan`: `plan(args, context, agent, thread)`. The snapshot's hot path
    calls `plan.run(plan, ...)` directly (one frame less)."""

    __slots__ = ("allows", "denies", "hooks", "near", "not_granted", "run", "tool")

    def __init__(self, tool: str, run: RunFn, not_granted: Decision) -> None:
        self.tool = tool
        self.run = run
        self.denies: tuple[tuple[Reason, ConditionFn | None, Decision], ...] = ()
        self.allows: tuple[tuple[tuple[Reason, ...], ConditionFn | None], ...] = ()
        # Near misses: the conditional allows, reported when none applies. An `allow`
        # plan (unconditional grant first) has none, and keeps its grant's reasons here
        # instead: one object fewer to reach on the most common path.
        self.near: tuple[Reason, ...] = ()
        # The default deny: not granted (shared per tool), or the `execute` answer when
        # the tool runs code the profile may not run (then no allow can apply).
        self.not_granted = not_granted
        self.hooks: PlanHooks | None = None

    def __call__(self, args: Any, x: Any = None, g: Any = None, t: Any = None) -> Decision:
        return self.run(self, args, x, g, t)
