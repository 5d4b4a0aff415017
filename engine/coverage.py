"""`charter test --coverage`: which rules and hooks no test's call reached.

A rule is reached when a decision of a test names it among its reasons (the allow or the
deny that decided, by its role and location); a hook, when a decision names it (it
paused, denied or rewrote the call). A rule that also applied to a call another rule
decided first is not counted: coverage says which parts of the policy some test shows
deciding. Only the workspace's own rules and hooks are counted, not the built-in
default approval hooks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from engine.testing import ExpectResult
from engine.workspace import Workspace
from grammar.fmt import expr_text

_BUILTIN = "<default hooks>"


@dataclass(frozen=True)
class Unreached:
    kind: str  # "rule" or "hook"
    name: str  # the role's or the hook's
    location: str
    text: str  # the rule's first line as written (`allow mail.send where ...`), or the hook's

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "location": self.location, "text": self.text}


@dataclass(frozen=True)
class Coverage:
    rules: int
    rules_reached: int
    hooks: int
    hooks_reached: int
    unreached: list[Unreached] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "rules": {"reached": self.rules_reached, "total": self.rules},
            "hooks": {"reached": self.hooks_reached, "total": self.hooks},
            "unreached": [u.to_json() for u in self.unreached],
        }


def _rule_text(effect: str, patterns: Iterable[str], where: Any) -> str:
    text = f"{effect} {', '.join(patterns)}"
    return text + (f" where {expr_text(where)}" if where is not None else "")


def coverage(ws: Workspace, results: Iterable[ExpectResult]) -> Coverage:
    rules_seen: set[tuple[str, str]] = set()
    hooks_seen: set[str] = set()
    for result in results:
        for reason in result.decision.reasons:
            if reason.hook is not None:
                hooks_seen.add(reason.hook)
            elif reason.role is not None and reason.location is not None:
                rules_seen.add((reason.role, reason.location))
    unreached: list[Unreached] = []
    rules = reached = 0
    for role in ws.roles.values():
        for rule in role.rules:
            rules += 1
            where = str(rule.span)
            if (role.name, where) in rules_seen:
                reached += 1
                continue
            patterns = (p.text for p in rule.patterns)
            unreached.append(
                Unreached("rule", role.name, where, _rule_text(rule.effect, patterns, rule.where))
            )
    hooks = [h for h in ws.hooks.values() if h.span.file != _BUILTIN]
    for hook in hooks:
        if hook.name not in hooks_seen:
            unreached.append(Unreached("hook", hook.name, str(hook.span), f"hook {hook.name}"))
    hooks_reached = sum(h.name in hooks_seen for h in hooks)
    unreached.sort(key=lambda u: _order(u.location))
    return Coverage(rules, reached, len(hooks), hooks_reached, unreached)


def _order(location: str) -> tuple[str, int, int]:
    file, _, rest = location.rpartition(":")
    path, _, line = file.rpartition(":")
    return (path, int(line or 0), int(rest or 0))
