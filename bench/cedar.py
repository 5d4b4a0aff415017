"""The side-by-side Cedar row (`pip install '.[bench]'` installs cedarpy).

Translation of the workload: a profile is a principal `Profile::"p"` whose parents are its
roles (`Role::"r"`); each rule becomes one policy `permit`/`forbid (principal in Role::"r",
action == Action::"call", resource ...)`; `ns.*` becomes `resource in Namespace::"ns"`
(each toolset tool is an entity under its namespace); a condition reads
`context.args`: numeric `<` as is, `endswith`/`startswith` as `like "*s"` / `like "p*"`.
Cedar has no argument validation and no hooks, like the baseline. Policies and entities
are parsed once into cedarpy's reusable handles, so the timed part is one
`is_authorized` call per request.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

from bench.workload import Condition, RuleDef, Workload
from engine.decision import Request

# Optional (the `bench` extra), imported by name so the module type checks with or
# without it installed.
cedarpy: Any
try:
    cedarpy = importlib.import_module("cedarpy")
except ImportError:  # pragma: no cover - depends on the environment
    cedarpy = None


def available() -> bool:
    return cedarpy is not None


def _condition(cond: Condition) -> str:
    if cond.op == "<":
        return f"context.args.{cond.arg} < {cond.value}"
    if cond.op == "endswith":
        return f'context.args.{cond.arg} like "*{cond.value}"'
    return f'context.args.{cond.arg} like "{cond.value}*"'


def _policy(role: str, rule: RuleDef) -> str:
    effect = "permit" if rule.effect == "allow" else "forbid"
    if rule.wildcard:
        resource = f'resource in Namespace::"{rule.pattern[:-2]}"'
    else:
        resource = f'resource == Tool::"{rule.pattern}"'
    when = "" if rule.condition is None else f" when {{ {_condition(rule.condition)} }}"
    return f'{effect}(principal in Role::"{role}", action == Action::"call", {resource}){when};'


def policies(work: Workload) -> str:
    used = {role for p in work.profiles.values() for role in p.roles}
    return "\n".join(
        _policy(role, rule) for role in sorted(used) for rule in work.roles[role].rules
    )


def entities(work: Workload) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for profile in work.profiles.values():
        out.append(
            {
                "uid": {"type": "Profile", "id": profile.name},
                "attrs": {},
                "parents": [{"type": "Role", "id": r} for r in profile.roles],
            }
        )
    for role in {r for p in work.profiles.values() for r in p.roles}:
        out.append({"uid": {"type": "Role", "id": role}, "attrs": {}, "parents": []})
    for ns, tools in work.namespaces.items():
        out.append({"uid": {"type": "Namespace", "id": ns}, "attrs": {}, "parents": []})
        for tool in tools:
            out.append(
                {
                    "uid": {"type": "Tool", "id": tool},
                    "attrs": {},
                    "parents": [{"type": "Namespace", "id": ns}],
                }
            )
    return out


def _context_value(value: Any) -> bool:
    # Cedar has no floats; the conditions never read those arguments.
    return type(value) in (str, int, bool) or (
        type(value) is list and all(type(v) is str for v in value)
    )


def request(req: Request) -> dict[str, Any]:
    args = {k: v for k, v in req.args.items() if _context_value(v)}
    return {
        "principal": {"type": "Profile", "id": req.profile},
        "action": {"type": "Action", "id": "call"},
        "resource": {"type": "Tool", "id": req.tool},
        "context": {"args": args},
    }


class CedarEngine:
    """The workload as parsed Cedar handles; `decide(cedar_request) -> bool`."""

    def __init__(self, work: Workload) -> None:
        assert cedarpy is not None
        self.policy_text = policies(work)
        self.policies = cedarpy.PolicySet.from_str(self.policy_text)
        self.entities = cedarpy.Entities.from_json_str(json.dumps(entities(work)))

    def decide(self, cedar_request: dict[str, Any]) -> bool:
        result = cedarpy.is_authorized(cedar_request, self.policies, self.entities)
        return bool(result.allowed)
