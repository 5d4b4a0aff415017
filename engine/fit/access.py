"""One party of a fit question (caller or candidate) and its access to one tool, in z3.

Access(A) for a tool t and a valid call c (docs/design.md section 3, with the run-time rules
of section 2): no deny rule matching t holds *or errors*, the `execute` grant is there
when t's toolset runs code, and some allow rule matching t holds (an erroring allow does
not grant). Hooks play no part: they act on work the roles already allow.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from engine.decision import Request
from engine.fit.encode import Encoder
from engine.fit.terms import FALSE, all_and, any_or, negate
from engine.reference import _roles
from engine.workspace import Workspace
from policy import ast
from policy.catalogue import ToolSpec

EXECUTE = "execute"
_HELPER = "~fit-execute"


@dataclass(frozen=True)
class Side:
    """A set of roles in a workspace: a profile's, or one candidate role's.

    `assume_execute`: a lone role is checked as if the `execute` grant were present,
    because roles compose: another role of the same profile may supply it."""

    workspace: Workspace
    profile: ast.Profile
    assume_execute: bool = False
    label: str = ""
    _rules: dict[str, list[tuple[ast.Rule, str]]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _buckets: dict[str, list[tuple[int, ast.Rule, str]]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def _index(self) -> dict[str, list[tuple[int, ast.Rule, str]]]:
        """The side's rules bucketed by pattern (`=name`, `ns.`, `*`), numbered in order."""
        buckets = self._buckets
        if "\0built" not in buckets:
            buckets["\0built"] = []
            order = 0
            for name in dict.fromkeys(self.profile.roles):
                for rule in self.workspace.roles[name].rules:
                    for pattern in dict.fromkeys(rule.patterns):
                        key = {"exact": "=" + pattern.text, "namespace": pattern.namespace + "."}
                        bucket = key.get(pattern.kind, "*")
                        buckets.setdefault(bucket, []).append((order, rule, name))
                    order += 1
        return buckets

    def rules_for(self, tool: str) -> list[tuple[ast.Rule, str]]:
        found = self._rules.get(tool)
        if found is None:
            index = self._index()
            hits = [*index.get("=" + tool, ()), *index.get("*", ())]
            if "." in tool:  # `ns.*` matches every tool under `ns.`
                parts = tool.split(".")
                for end in range(1, len(parts)):
                    hits.extend(index.get(".".join(parts[:end]) + ".", ()))
            if not hits:
                self._rules[tool] = []
                return []
            seen: dict[int, tuple[ast.Rule, str]] = {}
            for order, rule, name in sorted(hits, key=lambda hit: hit[0]):
                seen.setdefault(order, (rule, name))
            found = list(seen.values())
            self._rules[tool] = found
        return found

    def allows(self, tool: str) -> list[tuple[ast.Rule, str]]:
        return [(r, n) for r, n in self.rules_for(tool) if r.effect == "allow"]

    def denies(self, tool: str) -> list[tuple[ast.Rule, str]]:
        return [(r, n) for r, n in self.rules_for(tool) if r.effect == "deny"]

    def allowed_tools(self) -> list[str]:
        """Every tool some allow rule of the side matches, in catalogue order."""
        patterns = [
            p
            for name in dict.fromkeys(self.profile.roles)
            for rule in self.workspace.roles[name].rules
            if rule.effect == "allow"
            for p in rule.patterns
        ]
        return [t.name for t in self.workspace.matching_tools(patterns)]

    def denied_tools(self) -> list[str]:
        patterns = [
            p
            for name in dict.fromkeys(self.profile.roles)
            for rule in self.workspace.roles[name].rules
            if rule.effect == "deny"
            for p in rule.patterns
        ]
        return [t.name for t in self.workspace.matching_tools(patterns)]

    def has_execute(self) -> bool:
        if self.assume_execute:
            return True
        rules = self.rules_for(EXECUTE)
        return any(r.effect == "allow" and r.where is None for r, _ in rules) and not any(
            r.effect == "deny" for r, _ in rules
        )

    def executes(self, spec: ToolSpec) -> bool:
        return not spec.runs_code or self.has_execute()

    def trivially_allows(self, spec: ToolSpec) -> bool:
        """Every valid call of the tool is allowed: no deny, an unconditional allow."""
        return (
            self.executes(spec)
            and not self.denies(spec.name)
            and any(r.where is None for r, _ in self.allows(spec.name))
        )

    # ---- z3 --------------------------------------------------------------------------
    def deny_fires(self, enc: Encoder) -> Any:
        """Some deny rule holds or errors (an erroring deny applies)."""
        fires = []
        for rule, _ in self.denies(enc.tool.name):
            value, err = enc.condition(rule.where)
            fires.append(any_or(err, value))
        return any_or(*fires)

    def grants(self, enc: Encoder) -> list[tuple[ast.Rule, str, Any]]:
        """Each allow rule with the formula for "its condition is true, no error"."""
        out = []
        for rule, name in self.allows(enc.tool.name):
            value, err = enc.condition(rule.where)
            out.append((rule, name, all_and(negate(err), value)))
        return out

    def allowed(self, enc: Encoder) -> Any:
        if not self.executes(enc.tool):
            return FALSE
        grants = self.grants(enc)
        if not grants:
            return FALSE
        return all_and(negate(self.deny_fires(enc)), any_or(*(g for _, _, g in grants)))

    # ---- the evaluator ----------------------------------------------------------------
    def decide_roles(self, spec: ToolSpec, call: dict[str, Any]) -> str:
        """The reference interpreter's roles step for a concrete call ("allow"/"deny")."""
        ws, profile = self.workspace, self.profile
        if spec.name not in ws.tools or ws.tools[spec.name] != spec:
            return "deny"
        if self.assume_execute and spec.runs_code:
            helper = ast.Role(_HELPER, (ast.Rule("allow", (ast.Pattern(EXECUTE),)),))
            ws = replace(ws, roles={**ws.roles, _HELPER: helper})
            profile = replace(profile, roles=(*profile.roles, _HELPER))
        request = Request(
            profile.name,
            spec.name,
            call["args"],
            call.get("context"),
            call.get("agent"),
            call.get("thread"),
        )
        effect, _ = _roles(ws, profile, spec, call["args"], request)
        return effect

    def deny_probe(self, spec: ToolSpec, call: dict[str, Any]) -> bool:
        """Whether the side's deny rules deny this call (evaluated by the reference)."""
        probe = "~fit-deny-probe"
        rules = (
            *tuple(r for r, _ in self.denies(spec.name)),
            ast.Rule("allow", (ast.Pattern(spec.name),)),
        )
        ws = replace(self.workspace, roles={**self.workspace.roles, probe: ast.Role(probe, rules)})
        side = Side(ws, ast.Profile(probe, (probe,)), assume_execute=True)
        return side.decide_roles(spec, call) == "deny"
