"""Compile a checked workspace into an immutable snapshot, and decide with it.

Per profile, an index from tool name to a plan: a closure holding that tool's deny
rules, allow rules and hooks with their conditions already compiled to Python. A
decision is one dict look-up and one call; its cost follows the profile's own rules for
that tool, never the size of the workspace (DESIGN.md section 5).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.check import Workspace
from engine.codegen import ConditionCompiler, ConditionFn
from engine.decision import Decision, Reason, Request
from engine.plan import HookEntry, RuleEntry, make_plan, make_unknown_tool
from engine.shape import Validator, build_validators
from policy import ast
from policy.catalogue import ToolSpec

Plan = Callable[[Any, Any, Any, Any], Decision]

EXECUTE = "execute"


@dataclass
class _ProfileRules:
    """A profile's rules and hooks bucketed by pattern kind, before plans are built."""

    exact: dict[str, list[tuple[ast.Rule, str]]] = field(default_factory=lambda: defaultdict(list))
    namespace: dict[str, list[tuple[ast.Rule, str]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    star: list[tuple[ast.Rule, str]] = field(default_factory=list)
    hooks: list[ast.Hook] = field(default_factory=list)


class ProfilePlan:
    """One profile's index from tool name to plan. Plans for tools reached only through
    `*` are built on first use and cached (building all of them up front would cost
    tools x profiles closures for nothing)."""

    __slots__ = ("_build", "_lock", "has_execute", "name", "plans")

    def __init__(
        self, name: str, plans: dict[str, Plan], build: Callable[[str], Plan], has_execute: bool
    ) -> None:
        self.name = name
        self.plans = plans
        self.has_execute = has_execute
        self._build = build
        self._lock = threading.Lock()

    def plan_for(self, tool: str) -> Plan:
        plan = self.plans.get(tool)
        if plan is None:
            with self._lock:
                plan = self.plans.get(tool)
                if plan is None:
                    plan = self._build(tool)
                    self.plans[tool] = plan
        return plan


class Snapshot:
    """A compiled, immutable policy revision."""

    def __init__(self, workspace: Workspace, revision: int = 0) -> None:
        self.workspace = workspace
        self.revision = revision
        self.tools: Mapping[str, ToolSpec] = workspace.tools
        self.validators: dict[str, Validator] = build_validators(workspace.tools.values())
        self._by_namespace: dict[str, list[str]] = defaultdict(list)
        for name, tool in self.tools.items():
            if tool.namespace:
                self._by_namespace[tool.namespace].append(name)
        self._conditions = ConditionCompiler()
        self._functions: list[ConditionFn] = []
        self._pending: list[Callable[[], None]] = []
        self.profiles: dict[str, ProfilePlan] = {}
        for profile in workspace.profiles.values():
            self.profiles[profile.name] = self._compile_profile(profile)
        self._functions = self._conditions.build()
        for finish in self._pending:
            finish()
        self._pending.clear()

    # ---- compile ----------------------------------------------------------------------
    def _bucket(self, profile: ast.Profile) -> _ProfileRules:
        rules = _ProfileRules()
        for role_name in dict.fromkeys(profile.roles):
            role = self.workspace.roles[role_name]
            for rule in role.rules:
                for pattern in dict.fromkeys(rule.patterns):
                    if pattern.kind == "exact":
                        rules.exact[pattern.text].append((rule, role_name))
                    elif pattern.kind == "namespace":
                        rules.namespace[pattern.namespace].append((rule, role_name))
                    else:
                        rules.star.append((rule, role_name))
        rules.hooks = list(self.workspace.profile_hooks(profile))
        return rules

    def _compile_profile(self, profile: ast.Profile) -> ProfilePlan:
        rules = self._bucket(profile)
        has_execute = _has_execute(rules)
        entries: dict[int, RuleEntry] = {}

        def rule_entry(rule: ast.Rule, role: str) -> RuleEntry:
            key = id(rule)
            entry = entries.get(key)
            if entry is None:
                tools = self.workspace.matching_tools(rule.patterns)
                slot = None if rule.where is None else self._conditions.add(rule.where, tools)
                verb = "allowed" if rule.effect == "allow" else "denied"
                reason = Reason(
                    rule.effect, f"{verb} by role `{role}`", role=role, location=str(rule.span)
                )
                entry = RuleEntry(reason, slot, self._condition)
                entries[key] = entry
            return entry

        hook_entries = [self._hook_entry(h) for h in rules.hooks]

        def rules_for(tool: str) -> list[tuple[ast.Rule, str]]:
            spec = self.tools[tool]
            found = list(rules.exact.get(tool, ()))
            if spec.namespace:
                found.extend(rules.namespace.get(spec.namespace, ()))
            found.extend(rules.star)
            return list(dict.fromkeys(found))

        def build(tool: str) -> Plan:
            spec = self.tools.get(tool)
            if spec is None:
                return make_unknown_tool(tool)
            matched = rules_for(tool)
            denies = [rule_entry(r, role) for r, role in matched if r.effect == "deny"]
            allows = [rule_entry(r, role) for r, role in matched if r.effect == "allow"]
            allows.sort(key=lambda e: e.slot is not None)  # unconditional grants first
            hooks = [
                h
                for h, hook in zip(hook_entries, rules.hooks, strict=True)
                if any(p.matches(tool) for p in hook.patterns)
            ]
            return make_plan(
                tool,
                self.validators[tool],
                denies,
                allows,
                hooks,
                execute_missing=spec.runs_code and not has_execute,
            )

        plans: dict[str, Plan] = {}
        eager = set(rules.exact)
        for namespace in rules.namespace:
            eager.update(self._by_namespace.get(namespace, ()))
        for hook in rules.hooks:
            for pattern in hook.patterns:
                if pattern.kind == "exact":
                    eager.add(pattern.text)
                elif pattern.kind == "namespace":
                    eager.update(self._by_namespace.get(pattern.namespace, ()))

        def finish() -> None:
            for tool in eager:
                if tool in self.tools:
                    plans[tool] = build(tool)

        self._pending.append(finish)
        # Star rules: compile their conditions now (the batch is built once).
        for rule, role in rules.star:
            rule_entry(rule, role)
        for tool in eager:
            if tool in self.tools:
                for rule, role in rules_for(tool):
                    rule_entry(rule, role)
        return ProfilePlan(profile.name, plans, build, has_execute)

    def _hook_entry(self, hook: ast.Hook) -> HookEntry:
        tools = self.workspace.matching_tools(hook.patterns)
        slot = None if hook.where is None else self._conditions.add(hook.where, tools)
        rewrites = tuple(
            (r.target.parts[0], self._conditions.add(r.value, tools, value=True))
            for r in hook.rewrites
        )
        text = (
            hook.message
            or {"pause": "paused for approval", "deny": "denied", "rewrite": "arguments rewritten"}[
                hook.kind
            ]
        )
        reason = Reason(
            f"hook-{hook.kind}",
            f"hook `{hook.name}`: {text}",
            hook=hook.name,
            location=str(hook.span),
        )
        return HookEntry(reason, hook.kind, slot, rewrites, self._condition)

    def _condition(self, slot: int) -> ConditionFn:
        return self._functions[slot]

    # ---- decide -----------------------------------------------------------------------
    def decide(self, request: Request) -> Decision:
        return decide(self, request)

    def plan(self, profile: str, tool: str) -> Plan | None:
        plans = self.profiles.get(profile)
        return None if plans is None else plans.plan_for(tool)


def _has_execute(rules: _ProfileRules) -> bool:
    """The `execute` grant: an unconditional allow of `execute` and no deny of it at all
    (a conditional deny cannot be evaluated for another tool's call, so it counts)."""
    matched = list(rules.exact.get(EXECUTE, ())) + rules.star
    allowed = any(r.effect == "allow" and r.where is None for r, _ in matched)
    denied = any(r.effect == "deny" for r, _ in matched)
    return allowed and not denied


_NO_PROFILE = "unknown profile"


def decide(snapshot: Snapshot, request: Request) -> Decision:
    """DESIGN.md section 2, steps 2-5 and 7, on a compiled snapshot."""
    plans = snapshot.profiles.get(request.profile)
    if plans is None:
        return Decision("deny", None, (Reason("shape", f"{_NO_PROFILE} `{request.profile}`"),))
    return plans.plan_for(request.tool)(
        request.args, request.context, request.agent, request.thread
    )


def compile_workspace(workspace: Workspace, revision: int = 0) -> Snapshot:
    return Snapshot(workspace, revision)
