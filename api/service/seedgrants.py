"""An agent's Seed grants in its decisions: the `tools` of its definition, and of every
ancestor's that has one, narrow what the profile allows (docs/design.md section 7).

The profile decides first, as for every agent; then, for an agent made from a Seed
`AgentDefinition` (or below one), a Seed callable its grants lack (`search`,
`web_search`, `navigate`, `execute`), `publish` without the publish grant, and a tool of
a toolset that runs code without `execute` are denied with Seed's own message
(engine.seed). A definition only takes away: it never allows what the profile does not,
so an agent's token that writes one can widen nothing. A child's grants are the
intersection with each ancestor's, as Seed's delegated children's are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from api.records import Agent
from api.service.budget import ancestors
from engine import seed
from engine.compile import Snapshot
from engine.decision import Decision, Reason, make_decision
from policy.catalogue import PUBLISH

REASON = "definition"  # the kind of a reason these denials give


def grants_of(agent: Agent, load_agent: Callable[[str], Agent | None]) -> seed.SeedGrants | None:
    """What `agent` may use of Seed's callables and publishing: its definition's grants,
    intersected with each ancestor's that has one; None when none of them has one."""
    found: seed.SeedGrants | None = None
    for node in ancestors(agent, load_agent):
        if node.definition is None:
            continue
        tools = node.definition.get("tools")
        own = seed.SeedGrants.from_tools(None if tools is None else list(tools))
        found = own if found is None else seed.SeedGrants(
            found.callables & own.callables, found.publish and own.publish
        )  # fmt: skip
    return found


def refusal(grants: seed.SeedGrants, snapshot: Snapshot, tool: str) -> str | None:
    """Seed's message refusing a call of `tool` with `grants`; None when they allow it."""
    if tool in seed.CALLABLES:
        found = seed.decide_call(grants, tool)
        return None if found.allowed else found.message
    if tool == PUBLISH:
        return None if grants.publish else seed.PUBLISH_REFUSED
    spec = snapshot.tools.get(tool)
    if spec is not None and spec.runs_code and "execute" not in grants.callables:
        return seed.RUNS_CODE_REFUSED.format(name=tool)
    return None


def narrowed(
    agent: Agent,
    load_agent: Callable[[str], Agent | None],
    snapshot: Snapshot,
    tool: str,
    decision: Decision,
) -> Decision:
    """`decision` (the profile's) narrowed by the agent's Seed grants: an allow or a pause
    they refuse is a deny with Seed's message as its reason."""
    if decision.effect == "deny" or (agent.definition is None and agent.parent is None):
        return decision
    grants = grants_of(agent, load_agent)
    if grants is None:
        return decision
    message = refusal(grants, snapshot, tool)
    if message is None:
        return decision
    return make_decision("deny", None, (Reason(REASON, message),), decision.errors)


def narrowed_listing(
    grants: seed.SeedGrants, snapshot: Snapshot, tools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A profile's tool listing (engine.listing, as JSON) as an agent with `grants` sees
    it: each tool they refuse is `deny`, as its calls are decided."""
    out = []
    for item in tools:
        if item["status"] != "deny" and refusal(grants, snapshot, item["tool"]) is not None:
            item = {"tool": item["tool"], "status": "deny", "hooks": item["hooks"]}
        out.append(item)
    return out
