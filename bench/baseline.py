"""The obvious baseline: per profile, a dict from tool name to a list of (effect, lambda).

It implements the same rules as the workload's DSL (denies win, then any allow whose
condition holds), built straight from the workload's Python model: no parser, no checker,
no argument validation, no hooks, no reasons. It is what a careful engineer would write by
hand in an afternoon, and the speed Charter's compiled plans are measured against.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.workload import Condition, Workload
from engine.decision import Request

Check = Callable[[Any], Any]
Table = dict[str, dict[str, list[tuple[str, Check | None]]]]


def _lambda(cond: Condition) -> Check:
    arg, value = cond.arg, cond.value
    if cond.op == "<":
        return lambda a: a[arg] < value
    if cond.op == "endswith":
        return lambda a: a[arg].endswith(value)
    return lambda a: a[arg].startswith(value)


def build(work: Workload) -> Table:
    """profile -> tool -> [(effect, condition or None)], denies first."""
    table: Table = {}
    for profile in work.profiles:
        tools: dict[str, list[tuple[str, Check | None]]] = {}
        for _, rule in work.profile_rules(profile):
            fn = None if rule.condition is None else _lambda(rule.condition)
            for tool in work.expand(rule.pattern):
                tools.setdefault(tool, []).append((rule.effect, fn))
        for rules in tools.values():
            rules.sort(key=lambda r: r[0] != "deny")
        table[profile] = tools
    return table


class Baseline:
    def __init__(self, work: Workload) -> None:
        self.table = build(work)

    def decide(self, request: Request) -> bool:
        tools = self.table.get(request.profile)
        if tools is None:
            return False
        rules = tools.get(request.tool)
        if rules is None:
            return False
        args = request.args
        for effect, cond in rules:
            if cond is None or cond(args):
                return effect == "allow"
        return False
