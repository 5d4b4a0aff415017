"""What an agent owns besides its record (its threads, memory entries and schedules): which
agent a request's own is, and the documents deleted with the agent. Memory entries and
schedules are tagged with the agent's id and deleted in the transaction that deletes the
agent (an agent made later under the same id is another agent, which must not read them)."""

from __future__ import annotations

from api.service.core import Service
from api.service.errors import ServiceError
from api.service.tokens import Principal

MEMORY = "memory"  # api/service/memoryentries.py
SCHEDULES = "schedules"  # api/service/schedules.py


def delete_all(service: Service, agent_id: str) -> None:
    """Inside the transaction that deletes agent `agent_id`: what it owns, through the
    tag index."""
    for kind in (MEMORY, SCHEDULES):
        for key in [row.id for row in service.store.scan(kind, tag=agent_id)]:
            service.store.delete(kind, key)


def listed_agent(actor: Principal, agent: str | None) -> str | None:
    """The agent a list is of: the one it names, else an agent token's own (an admin's,
    naming none, is everyone's)."""
    if agent is None and actor.agent is not None:
        return actor.agent
    return agent


def own_agent(actor: Principal, agent: str | None, one: str, makes: str) -> str:
    """The agent a new `one` (a thread, a schedule) belongs to: the one named, else the
    caller's own; an agent's token `makes` them for itself only (`not-own-agent`)."""
    agent_id = agent or actor.agent
    if not agent_id:
        raise ServiceError("agent-required", f"a {one} needs an agent")
    if actor.agent is not None and agent_id != actor.agent:
        raise ServiceError(
            "not-own-agent",
            f"agent `{actor.agent}` {makes} for itself only, not for agent `{agent_id}`",
            help="leave out `agent`, or send the request with that agent's own token",
        )  # fmt: skip
    return str(agent_id)
