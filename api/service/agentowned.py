"""The documents an agent owns besides its record: its memory entries and its schedules,
each tagged with the agent's id, and deleted in the transaction that deletes the agent
(an agent made later under the same id is another agent, which must not read them)."""

from __future__ import annotations

from api.service.core import Service

MEMORY = "memory"  # api/service/memoryentries.py
SCHEDULES = "schedules"  # api/service/schedules.py


def delete_all(service: Service, agent_id: str) -> None:
    """Inside the transaction that deletes agent `agent_id`: what it owns, through the
    tag index."""
    for kind in (MEMORY, SCHEDULES):
        for key in [row.id for row in service.store.scan(kind, tag=agent_id)]:
            service.store.delete(kind, key)
