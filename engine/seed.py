"""Deciding for a Seed `AgentDefinition` with Seed's own grant rules (docs/design.md section 7).

`definition.tools` is the whole permission model: it narrows the callable set and carries
the publish grant. The verbs are always on and never grants; memory writes are never
gated; an authored tool that runs code needs `execute`; a delegated child's tools are the
intersection with its parent's. `to_role_source` states the same grants as a Charter role,
so a Seed definition can also be decided by the ordinary engine.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from policy.seed import AgentDefinition

CALLABLES: tuple[str, ...] = ("search", "web_search", "navigate", "execute")
VERBS: tuple[str, ...] = ("read", "write", "call", "delegate", "plan", "return_result")
PUBLISH_NAMES: frozenset[str] = frozenset(
    {"publish", "write", "memory_publish_document", "ipfs_write", "attachment_to_ipfs"}
)
ALIASES: dict[str, str] = {"execute_code": "execute"}
AUTHORED_TOOL_NAME = re.compile(r"^[a-z][a-z0-9_-]{1,63}$")

PUBLISH_REFUSED = (
    "Publishing is not enabled for this agent. The owner can grant "
    '"Publish Seed content" in its tool settings.'
)
RUNS_CODE_REFUSED = (
    "Tool {name} runs code in the sandbox, which is not enabled for this agent. "
    "Its owner can grant code execution in the agent's tool settings."
)
PUBLIC_SCHEMES = ("hm://", "ipfs://")


@dataclass(frozen=True)
class SeedGrants:
    """What a definition grants: the callable set and the publish grant."""

    callables: frozenset[str]
    publish: bool

    @classmethod
    def of(cls, definition: AgentDefinition) -> SeedGrants:
        return cls.from_tools(definition.tools)

    @classmethod
    def from_tools(cls, tools: Iterable[str] | None) -> SeedGrants:
        if tools is None:  # absent: every callable and the publish grant
            return cls(frozenset(CALLABLES), True)
        names = [ALIASES.get(t, t) for t in tools]
        return cls(
            frozenset(n for n in names if n in CALLABLES),
            any(t in PUBLISH_NAMES for t in tools),
        )

    def delegate(self, child_tools: Iterable[str] | None) -> SeedGrants:
        """A delegated child's grants: only what both it asks for and the parent has."""
        child = SeedGrants.from_tools(child_tools)
        return SeedGrants(self.callables & child.callables, self.publish and child.publish)

    def tool_names(self) -> tuple[str, ...]:
        """These grants as a `tools` array (sorted; `publish` last when granted)."""
        return (*sorted(self.callables), *(("publish",) if self.publish else ()))


@dataclass(frozen=True)
class SeedDecision:
    allowed: bool
    status: int  # 200 when allowed, else the HTTP status Seed answers with
    message: str


_OK = SeedDecision(True, 200, "ok")


def decide_call(grants: SeedGrants, tool: str) -> SeedDecision:
    """`call` of a service callable."""
    name = ALIASES.get(tool, tool)
    if name in grants.callables:
        return _OK
    if name not in CALLABLES:
        return SeedDecision(False, 404, f"Tool {tool} not found")
    return SeedDecision(False, 403, f"Tool {tool} is not enabled for this agent")


def decide_write(grants: SeedGrants, url: str) -> SeedDecision:
    """`write`: memory writes are never gated; `hm://` and `ipfs://` need publishing."""
    if url.strip().lower().startswith(PUBLIC_SCHEMES) and not grants.publish:
        return SeedDecision(False, 403, PUBLISH_REFUSED)
    return _OK


def decide_authored_tool(grants: SeedGrants, name: str, runs_code: bool) -> SeedDecision:
    """Calling an authored tool (a tool document); one that runs code needs `execute`."""
    if not AUTHORED_TOOL_NAME.match(name):
        return SeedDecision(False, 400, f"Tool name {name} is invalid")
    if runs_code and "execute" not in grants.callables:
        return SeedDecision(False, 403, RUNS_CODE_REFUSED.format(name=name))
    return _OK


def to_role_source(name: str, grants: SeedGrants) -> str:
    """The same grants as a Charter role: the callables, and `publish` when granted."""
    tools = [*sorted(grants.callables), *(["publish"] if grants.publish else [])]
    body = f"  allow {', '.join(tools)}\n" if tools else ""
    return f"role {name} {{\n{body}}}\n"
