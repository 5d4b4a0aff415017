"""An agent's Seed grants narrow its profile's decisions (api.service.seedgrants): against
a reference written from Seed's rules alone (not engine.seed's), for chains of up to
three agents whose definitions name callables, aliases, publish names and other tools."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from api.records import Agent
from api.service.seedgrants import REASON, narrowed
from engine.check import check_sources
from engine.compile import compile_workspace
from engine.decision import Reason, make_decision

SNAPSHOT = compile_workspace(
    check_sources(
        [
            (
                "p.charter",
                """
toolset scripts {
  runs code
  tool run(source: str)
}
toolset mail {
  tool send(to: str)
}
role all {
  allow *
}
profile p {
  roles all
}
""",
            )
        ]
    ),
    1,
)
CALLABLE = ("search", "web_search", "navigate", "execute")
PUBLISHING = ("publish", "write", "memory_publish_document", "ipfs_write", "attachment_to_ipfs")
NAMES = st.sampled_from((*CALLABLE, *PUBLISHING, "execute_code", "read", "plan", "mail.send"))
TOOLS = st.none() | st.lists(NAMES, max_size=6)
CALLED = st.sampled_from((*CALLABLE, "publish", "scripts.run", "mail.send", "memory.write"))


def _grants(tools: list[str] | None, tool: str) -> bool:
    """Whether one definition's `tools` lets `tool` through, by Seed's rules as stated."""
    if tools is None:
        return True
    callables = {"execute" if t == "execute_code" else t for t in tools} & set(CALLABLE)
    if tool in CALLABLE:
        return tool in callables
    if tool == "publish":
        return any(t in PUBLISHING for t in tools)
    if tool == "scripts.run":
        return "execute" in callables
    return True  # (the verbs, memory writes and every other tool: never Seed's to gate)


def _chain(definitions: list[list[str] | str | None]) -> dict[str, Agent]:
    """Agents a0 (the root) ... an, each the parent of the next; "-" for no definition."""
    agents = {}
    for i, tools in enumerate(definitions):
        doc: dict[str, Any] = {
            "id": f"a{i}", "name": "n", "identity": "z", "profile": "p",
            "parent": f"a{i - 1}" if i else None, "created_at": 0, "updated_at": 0,
        }  # fmt: skip
        if tools != "-":
            doc["definition"] = {"name": "n", "systemPrompt": "p", "modelProvider": "x",
                                 "model": "y", **({} if tools is None else {"tools": tools})}  # fmt: skip
        agents[doc["id"]] = Agent.model_validate(doc)
    return agents


@settings(max_examples=300, deadline=None)
@given(
    st.lists(TOOLS | st.just("-"), min_size=1, max_size=3),
    CALLED,
    st.sampled_from(("allow", "pause", "deny")),
)
def test_the_definitions_in_a_chain_narrow_as_seed_says(
    definitions: list[list[str] | str | None], tool: str, effect: Any
) -> None:
    agents = _chain(definitions)
    last = agents[f"a{len(definitions) - 1}"]
    profile = make_decision(effect, {} if effect != "deny" else None, (Reason(effect, "p"),))
    found = narrowed(last, agents.get, SNAPSHOT, tool, profile)
    through = all(_grants(t, tool) for t in definitions if not isinstance(t, str))
    if effect == "deny" or through:
        assert found is profile  # (a definition never allows, nor touches what it lets by)
    else:
        assert found.effect == "deny" and found.args is None
        [reason] = found.reasons
        assert reason.kind == REASON and (
            "not enabled for this agent" in reason.message
            or reason.message.startswith("Publishing is not enabled")
        )
