"""Compile a checked workspace into an immutable snapshot, and decide with it.

Per profile, an index from tool name to a plan (see `engine.plan`): that tool's deny
rules, allow rules and hooks with their conditions already compiled to Python. A
decision is two dict look-ups and one call; its cost follows the profile's own rules for
that tool, never the size of the workspace (docs/design.md section 5).

Compile order: bucket every profile's rules by pattern kind, queue every condition the
eager plans need, compile all conditions with one `exec`, then build the plans, each
profile's one shape for the tools that only `*` reaches (`ProfilePlan.star`), and the
constant plans of the tools some profile reaches by nothing. Rule and hook entries are
prepared once per rule and shared by every profile and plan that selects them.

The first call of a (profile, tool) pair whose plan is not built yet costs a missed
look-up and a few stores: the plan is the shared constant plan or is made from the
profile's shape, then cached. The answers of unknown tool names are kept within a bound
(`engine.unknowntools`).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.codegen import ConditionCompiler, ConditionFn, fresh_copy
from engine.collector import collector_paused
from engine.compiledplan import CompiledPlan
from engine.decision import Decision, Reason, Request, make_decision
from engine.plan import (
    CONSTANT,
    HookEntry,
    Plan,
    PlanParts,
    PlanShape,
    RuleEntry,
    make_plan,
    plan_shape,
    rule_entry,
    shaped_plan,
)
from engine.reads import reads_thread_cost
from engine.runfns import RunFunctions
from engine.unknowntools import UnknownToolPlan, UnknownTools
from engine.workspace import Workspace
from policy import ast
from policy.catalogue import ToolSpec

__all__ = ["Plan", "ProfilePlan", "Snapshot", "compile_workspace", "decide"]

EXECUTE = "execute"

_Matched = tuple[ast.Rule, str]  # a rule and the name of the role it comes from


@dataclass
class _ProfileRules:
    """A profile's rules and hooks bucketed by pattern kind, before plans are built."""

    exact: dict[str, list[_Matched]] = field(default_factory=lambda: defaultdict(list))
    namespace: dict[str, list[_Matched]] = field(default_factory=lambda: defaultdict(list))
    star: list[_Matched] = field(default_factory=list)
    hooks: list[ast.Hook] = field(default_factory=list)

    def for_tool(self, spec: ToolSpec) -> list[_Matched]:
        found = list(self.exact.get(spec.name, ()))
        if spec.namespace:
            found.extend(self.namespace.get(spec.namespace, ()))
        found.extend(self.star)
        return list(dict.fromkeys(found))

    def all_rules(self) -> list[_Matched]:
        out = [m for ms in self.exact.values() for m in ms]
        out += [m for ms in self.namespace.values() for m in ms]
        return out + self.star


class _RuleEntries:
    """What a plan built on first use needs of its snapshot: the tools, the plan parts
    and each rule's prepared entry (built once, shared by every plan it reaches).

    Profiles hold this, never their snapshot: a snapshot's profiles pointing back at it
    would make every snapshot a reference cycle, which reference counting never frees; a
    serving process, whose collector runs a full collection rarely (see
    `api.http.app.tune_gc`), then kept every revision it had compiled (about 0.75 MB a
    revision of the example workspace)."""

    __slots__ = ("entries", "fns", "parts", "tools")

    def __init__(self, tools: Mapping[str, ToolSpec], parts: PlanParts) -> None:
        self.tools = tools
        self.parts = parts
        # id(rule) -> its compiled condition (None: it has none), for every rule of the
        # snapshot's roles that a profile selects (each rule is alive while its snapshot
        # is: its id names it alone).
        self.fns: dict[int, ConditionFn | None] = {}
        self.entries: dict[int, RuleEntry] = {}

    def rule_entry(self, rule: ast.Rule, role: str) -> RuleEntry:
        entry = self.entries.get(id(rule))
        if entry is None:
            verb = "allowed" if rule.effect == "allow" else "denied"
            reason = Reason(
                rule.effect, f"{verb} by role `{role}`", role=role, location=str(rule.span)
            )
            entry = rule_entry(reason, self.fns[id(rule)])
            self.entries[id(rule)] = entry
        return entry


_NONE: Mapping[str, CompiledPlan] = {}  # never written


class ProfilePlan:
    """One profile's index from tool name to plan. Plans for tools reached only through
    `*` (or by no rule at all) are built on first use from the profile's one shape for
    them (`star`), a few stores each, and cached: building all of them up front would
    cost tools x profiles plans for nothing. Unknown names are cached within a bound
    (`engine.unknowntools`)."""

    __slots__ = (
        "_entries",
        "constants",
        "execute_constants",
        "has_execute",
        "hooks",
        "name",
        "plans",
        "rules",
        "star",
    )

    def __init__(self, entries: _RuleEntries, name: str, rules: _ProfileRules) -> None:
        self._entries = entries
        self.name = name
        self.rules = rules
        self.hooks: list[tuple[HookEntry, ast.Hook]] = []
        self.has_execute = _has_execute(rules)
        self.plans: dict[str, CompiledPlan] = {}
        # The shape of every plan built on first use: [without, with] the `execute` answer.
        self.star: tuple[PlanShape, PlanShape] = (CONSTANT, CONSTANT)
        # When `star` is constant: the snapshot's constant plans by tool name, and those
        # with the `execute` answer when the profile may not run code (else empty).
        self.constants: Mapping[str, CompiledPlan] | None = None
        self.execute_constants: Mapping[str, CompiledPlan] = _NONE

    def carried(self, entries: _RuleEntries) -> ProfilePlan:
        """This profile's plans, unchanged, for a snapshot derived from this one's
        (`Snapshot(..., base=)`): the plans built so far and its shape for the rest, shared,
        on `entries` (the same tools and parts). Never this very object: its entries would
        keep the older snapshot's rule index alive.
        """
        copy = ProfilePlan(entries, self.name, self.rules)
        copy.has_execute = self.has_execute  # (its rules are dropped once it is built)
        copy.hooks = self.hooks
        copy.plans = dict(self.plans)
        copy.star = self.star
        copy.constants = self.constants
        copy.execute_constants = self.execute_constants
        return copy

    def build(self, tool: str) -> CompiledPlan | None:
        """The plan of `tool` from every rule and hook that reaches it (at compile)."""
        snap = self._entries
        spec = snap.tools.get(tool)
        if spec is None:
            return None
        matched = self.rules.for_tool(spec)
        hooks = [entry for entry, hook in self.hooks if any(p.matches(tool) for p in hook.patterns)]
        return make_plan(
            tool,
            *self._entries_of(matched),
            hooks,
            snap.parts,
            execute_missing=spec.runs_code and not self.has_execute,
        )

    def _entries_of(self, matched: list[_Matched]) -> tuple[list[RuleEntry], list[RuleEntry]]:
        snap = self._entries
        denies = [snap.rule_entry(r, role) for r, role in matched if r.effect == "deny"]
        allows = [snap.rule_entry(r, role) for r, role in matched if r.effect == "allow"]
        allows.sort(key=lambda e: e.fn is not None)  # unconditional grants first
        return denies, allows

    def shape_star(self) -> None:
        """Make `star`: what reaches a tool that no exact or namespace rule or hook
        pattern reaches is the `*` rules and the hooks with a `*` pattern, the same for
        every such tool (at compile, once the eager plans are built; the rules and hooks
        are dropped then: every plan built later comes from `star`)."""
        denies, allows = self._entries_of(list(dict.fromkeys(self.rules.star)))
        hooks = [e for e, hook in self.hooks if any(p.kind == "all" for p in hook.patterns)]
        parts = self._entries.parts
        self.star = (
            plan_shape(denies, allows, hooks, parts, execute_missing=False),
            plan_shape(denies, allows, hooks, parts, execute_missing=True),
        )
        self.rules = _ProfileRules()
        self.hooks = []

    def plan_for(self, tool: str) -> CompiledPlan | None:
        """The plan of `tool`, built and cached on first use; None for an unknown name."""
        plan = self.plans.get(tool)
        return self.first_use(tool) if plan is None else plan

    def first_use(self, tool: str) -> CompiledPlan | None:
        """The plan of `tool`, not in the index yet (on the first call of the pair): the
        shared constant plan when no `*` rule or hook reaches the profile, else built
        from `star`. Cached; None for an unknown name."""
        if self.constants is not None:
            plan = self.execute_constants.get(tool) or self.constants.get(tool)
            if plan is None:
                return None
        else:
            spec = self._entries.tools.get(tool)
            if spec is None:
                return None
            execute_missing = spec.runs_code and not self.has_execute
            shape = self.star[execute_missing]
            plan = shaped_plan(tool, shape, self._entries.parts, execute_missing)
        self.plans[tool] = plan  # idempotent: a race builds the same plan twice
        return plan


class Snapshot:
    """A compiled, immutable policy revision (its `revision` number is set once, by the
    upload that stores it, before the snapshot is shared).

    `base`: the snapshot of the policy this one changes. When the workspace was checked
    against `base`'s with the same tool catalogue (its `tools` is `base`'s very mapping:
    engine/rebuild.py), what did not change is taken from `base` rather than compiled
    again: a profile whose declaration, roles and hooks are the very objects `base`
    compiled keeps its plans, and a rule or hook `base` compiled keeps its compiled
    condition. A snapshot decides exactly as one compiled whole.

    With `every_plan`, every profile x tool plan is built at compile from every rule and
    hook that reaches the tool (tests compare the plans built on first use with these).

    `served` is the workspace it was compiled from, all that deciding reads: every
    toolset, hook and profile, and at least the roles the profiles select. It is the
    whole workspace, unless `whole` is given: then `served` is a partial one
    (engine/served.py) and `whole` checks the whole one from the texts, once, when
    `workspace` is first read (what a role's view, a change or a candidate's fit check
    needs)."""

    served: Workspace

    @collector_paused()
    def __init__(
        self,
        workspace: Workspace,
        revision: int = 0,
        base: Snapshot | None = None,
        every_plan: bool = False,
        whole: Callable[[], Workspace] | None = None,
    ) -> None:
        if base is not None and (workspace.tools is not base.served.tools or every_plan):
            base = None  # (another catalogue: nothing compiled against it carries over;
            # every plan built: nothing is taken either)
        self.served = workspace
        self._whole: Workspace | None = workspace if whole is None else None
        self._load_whole = whole
        self._whole_lock = threading.Lock()
        self.revision = revision
        self.tools: Mapping[str, ToolSpec] = workspace.tools
        # The index's keys: one fresh copy of every tool name, shared by every profile (a
        # look-up compares the caller's string with the key; see fresh_copy).
        self._names: dict[str, str]
        if base is None:
            self.parts = PlanParts(RunFunctions(workspace.tools.values()))
            self._names = {name: fresh_copy(name) for name in sorted(workspace.tools)}
        else:
            self.parts, self._names = base.parts, base._names
        names = self._names
        self._by_namespace = workspace.tools_by_namespace
        self._conditions = ConditionCompiler()
        self._entries = _RuleEntries(self.tools, self.parts)
        self._rule_slots: dict[int, int | None] = {}  # id(rule) -> its slot, while compiling
        self._hook_slots: dict[int, tuple[int | None, tuple[tuple[str, int], ...]]] = {}
        self.profiles: dict[str, ProfilePlan] = {}
        # Per profile, the tools of its rules and hooks whose conditions read the
        # thread's cost (no entry: none does); see `reads_thread_cost`.
        self._cost_tools: dict[str, frozenset[str]] = {}
        self._cost_reads: dict[int, bool] = {}  # per rule or hook, while compiling
        # id(hook) -> its prepared entry, for every hook a profile installs.
        self._hook_entries: dict[int, HookEntry] = {}
        carried: dict[str, ProfilePlan] = {}
        if base is not None:
            self._inherit(base)
            carried = base._unchanged_profiles(workspace)
        eager: dict[str, set[str]] = {}
        for profile in workspace.profiles.values():
            kept = carried.get(profile.name)
            if kept is not None:
                self.profiles[profile.name] = kept.carried(self._entries)
                assert base is not None
                cost = base._cost_tools.get(profile.name)
                if cost is not None:
                    self._cost_tools[profile.name] = cost
                continue
            self.profiles[profile.name], eager[profile.name] = self._prepare(profile)
        functions = self._conditions.build()
        fns = self._entries.fns
        for rule_id, slot in self._rule_slots.items():
            fns[rule_id] = None if slot is None else functions[slot]
        for profile_name in eager:
            plans = self.profiles[profile_name]
            for hook in plans.rules.hooks:
                entry = self._hook_entries.get(id(hook))
                if entry is None:
                    entry = self._hook_entries[id(hook)] = self._hook_entry(hook, functions)
                plans.hooks.append((entry, hook))
            for tool in workspace.tools if every_plan else eager[profile_name]:
                plan = plans.build(tool)
                if plan is not None:
                    plans.plans[names.get(tool, tool)] = plan
            # Every tool an exact or namespace rule reaches has its plan now; what is built
            # later is reached through `*` or by nothing: one shape.
            plans.shape_star()
        self._constant_plans()
        self.parts.forget_tuples()
        self._unknown = UnknownTools()
        self._cost_reads = {}
        self._rule_slots = {}
        self._hook_slots = {}
        # The hot path's index: profile -> tool -> plan (the same dicts the ProfilePlans own).
        self._index: dict[str, dict[str, CompiledPlan]] = {
            fresh_copy(name): plans.plans for name, plans in self.profiles.items()
        }

    @property
    def workspace(self) -> Workspace:
        """The whole workspace: every declaration of the revision (checked from the texts
        on first use when the snapshot was compiled from a partial one)."""
        found = self._whole
        if found is None:
            with self._whole_lock:
                if self._whole is None:
                    assert self._load_whole is not None
                    self._whole = self._load_whole()
                found = self._whole
        return found

    def whole_loaded(self) -> Workspace | None:
        """The whole workspace when it is at hand, without loading it (None if not)."""
        return self._whole

    # ---- what a derived snapshot takes from its base ------------------------------------
    def _inherit(self, base: Snapshot) -> None:
        """The compiled conditions of every rule and the entries of every hook that are
        the very objects of `base`'s workspace (alive with it: their ids name them alone):
        `base`'s, less those of the roles this workspace does not hold as they were."""
        fns = self._entries.fns = dict(base._entries.fns)
        roles = self.served.roles
        for name, role in base.served.roles.items():
            if roles.get(name) is not role:
                for rule in role.rules:
                    fns.pop(id(rule), None)
        old_hooks = base.served.hooks
        for name, hook in self.served.hooks.items():
            entry = base._hook_entries.get(id(hook))
            if entry is not None and old_hooks.get(name) is hook:
                self._hook_entries[id(hook)] = entry

    def _unchanged_profiles(self, workspace: Workspace) -> dict[str, ProfilePlan]:
        """The profiles of `workspace` that decide as this snapshot's do: the same
        declaration, the same role objects under each name it selects, the same hooks."""
        mine = self.served
        found: dict[str, ProfilePlan] = {}
        for name, profile in workspace.profiles.items():
            if mine.profiles.get(name) is not profile or name not in self.profiles:
                continue
            if any(workspace.roles.get(r) is not mine.roles.get(r) for r in profile.roles):
                continue
            now, before = workspace.profile_hooks(profile), mine.profile_hooks(profile)
            if len(now) != len(before) or any(a is not b for a, b in zip(now, before, strict=True)):
                continue
            found[name] = self.profiles[name]
        return found

    # ---- compile ----------------------------------------------------------------------
    def _constant_plans(self) -> None:
        """Build every constant plan a first call may take: a tool that a profile reaches
        by no rule and no hook has the constant plan every such profile shares, so the
        first call of the pair finds it with a dict look-up (built on that call, it
        would cost the call about as much again as a warm decision). Most of what they
        hold is built already: the other plans of the tool share its not-granted
        answer."""
        bare = [plans for plans in self.profiles.values() if plans.star[False] is CONSTANT]
        if not bare:
            return
        lacking = any(not plans.has_execute for plans in bare)
        for spec in self.tools.values():
            self.parts.constant(spec.name, False)
            if lacking and spec.runs_code:
                self.parts.constant(spec.name, True)
        for plans in bare:
            plans.constants = self.parts.constants(False)
            if not plans.has_execute:
                plans.execute_constants = self.parts.constants(True)

    def _prepare(self, profile: ast.Profile) -> tuple[ProfilePlan, set[str]]:
        rules = _ProfileRules()
        for role_name in dict.fromkeys(profile.roles):
            for rule in self.served.roles[role_name].rules:
                for pattern in dict.fromkeys(rule.patterns):
                    if pattern.kind == "exact":
                        rules.exact[pattern.text].append((rule, role_name))
                    elif pattern.kind == "namespace":
                        rules.namespace[pattern.namespace].append((rule, role_name))
                    else:
                        rules.star.append((rule, role_name))
        rules.hooks = list(self.served.profile_hooks(profile))
        costly: list[ast.Pattern] = []
        for rule, _ in rules.all_rules():
            self._queue_rule(rule)
            if self._reads_cost(rule, rule.where):
                costly += rule.patterns
        for hook in rules.hooks:
            self._queue_hook(hook)
            if self._reads_cost(hook, (hook.where, hook.rewrites)):
                costly += hook.patterns
        if costly:  # the tools those rules and hooks may run for, found once here
            tools = self.served.matching_tools(dict.fromkeys(costly))
            self._cost_tools[profile.name] = frozenset(tool.name for tool in tools)
        eager = set(rules.exact)
        for namespace in rules.namespace:
            eager.update(self._namespace_tools(namespace))
        for hook in rules.hooks:
            for pattern in hook.patterns:
                if pattern.kind == "exact":
                    eager.add(pattern.text)
                elif pattern.kind == "namespace":
                    eager.update(self._namespace_tools(pattern.namespace))
        return ProfilePlan(self._entries, profile.name, rules), eager

    def _reads_cost(self, node: ast.Rule | ast.Hook, condition: object) -> bool:
        found = self._cost_reads.get(id(node))
        if found is None:
            found = self._cost_reads[id(node)] = reads_thread_cost(condition)
        return found

    def _namespace_tools(self, namespace: str) -> list[str]:
        if "." in namespace:
            return [t.name for t in self.served.matching_tools([ast.Pattern(namespace + ".*")])]
        return self._by_namespace.get(namespace, [])

    def _queue_rule(self, rule: ast.Rule) -> None:
        if id(rule) not in self._rule_slots and id(rule) not in self._entries.fns:
            tools = self.served.matching_tools(rule.patterns)
            slot = None if rule.where is None else self._conditions.add(rule.where, tools)
            self._rule_slots[id(rule)] = slot

    def _queue_hook(self, hook: ast.Hook) -> None:
        if id(hook) not in self._hook_slots and id(hook) not in self._hook_entries:
            tools = self.served.matching_tools(hook.patterns)
            slot = None if hook.where is None else self._conditions.add(hook.where, tools)
            rewrites = tuple(
                (r.target.parts[0], self._conditions.add(r.value, tools, value=True))
                for r in hook.rewrites
            )
            self._hook_slots[id(hook)] = (slot, rewrites)

    def rule_entry(self, rule: ast.Rule, role: str) -> RuleEntry:
        """The prepared entry of a rule (built once, shared by every plan it reaches)."""
        return self._entries.rule_entry(rule, role)

    def _hook_entry(self, hook: ast.Hook, functions: list[ConditionFn]) -> HookEntry:
        slot, rewrites = self._hook_slots[id(hook)]
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
        fn = None if slot is None else functions[slot]
        return HookEntry(reason, hook.kind, fn, tuple((name, functions[s]) for name, s in rewrites))

    # ---- decide -----------------------------------------------------------------------
    def decide(self, request: Request) -> Decision:
        """docs/design.md section 2, steps 2-5 and 7. The hot path: two dict subscripts and the
        plan's run function; everything else (plans not built yet, unknown names) is
        `_decide_slow`."""
        try:
            plan = self._index[request.profile][request.tool]
        except KeyError:  # free in 3.11 until raised: a plan not built yet, or an unknown name
            return self._decide_slow(
                request.profile,
                request.tool,
                request.args,
                request.context,
                request.agent,
                request.thread,
            )
        return plan.run(plan, request.args, request.context, request.agent, request.thread)

    def decide_call(
        self,
        profile: str,
        tool: str,
        args: Mapping[str, Any],
        context: Mapping[str, Any] | None = None,
        agent: Mapping[str, Any] | None = None,
        thread: Mapping[str, Any] | None = None,
    ) -> Decision:
        """`decide` of the call these fields make, without building its `Request` (a
        frozen dataclass's construction costs about as much as a warm decision): for a
        caller that has the fields at hand and decides each call once, as the services
        do. The same hot path, the same answers."""
        try:
            plan = self._index[profile][tool]
        except KeyError:
            return self._decide_slow(profile, tool, args, context, agent, thread)
        return plan.run(plan, args, context, agent, thread)

    def _decide_slow(
        self,
        profile_name: str,
        tool: str,
        args: Mapping[str, Any],
        context: Mapping[str, Any] | None,
        agent: Mapping[str, Any] | None,
        thread: Mapping[str, Any] | None,
    ) -> Decision:
        profile = self.profiles.get(profile_name)
        if profile is None:
            return make_decision(
                "deny", None, (Reason("shape", f"{_NO_PROFILE} `{profile_name}`"),)
            )
        plan = profile.first_use(tool)
        if plan is None:
            return self._unknown.answer(tool)
        return plan.run(plan, args, context, agent, thread)

    def reads_thread_cost(self, profile: str, tool: str) -> bool:
        """Whether a condition that may run for a call of `tool` under `profile` (a rule's
        or a hook's, a rewrite's value too) reads `thread.cost`: the call's outcome may
        then depend on what its thread has spent. Over-approximates (a namespace pattern
        counts for every tool under it), never under."""
        tools = self._cost_tools.get(profile)
        return tools is not None and tool in tools

    def plan(self, profile: str, tool: str) -> Plan | None:
        plans = self.profiles.get(profile)
        if plans is None:
            return None
        plan = plans.plan_for(tool)
        return UnknownToolPlan(self._unknown.answer(tool)) if plan is None else plan


def _has_execute(rules: _ProfileRules) -> bool:
    """The `execute` grant: an unconditional allow of `execute` and no deny of it at all
    (a conditional deny cannot be evaluated for another tool's call, so it counts)."""
    matched = list(rules.exact.get(EXECUTE, ())) + rules.star
    allowed = any(r.effect == "allow" and r.where is None for r, _ in matched)
    denied = any(r.effect == "deny" for r, _ in matched)
    return allowed and not denied


_NO_PROFILE = "unknown profile"


def decide(snapshot: Snapshot, request: Request) -> Decision:
    """docs/design.md section 2, steps 2-5 and 7, on a compiled snapshot."""
    return snapshot.decide(request)


def compile_workspace(
    workspace: Workspace, revision: int = 0, base: Snapshot | None = None
) -> Snapshot:
    """`workspace` compiled; `base`: the snapshot of the policy it changes (see Snapshot)."""
    return Snapshot(workspace, revision, base)
