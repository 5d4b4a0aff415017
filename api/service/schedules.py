"""Schedules: list, get, create, update, delete (the built-in tools `schedules.*`; running
one now, `schedules.run`, and the runner are api.service.schedulerun's).

A schedule is an agent's `prompt` under a `name`, with a 5-field `cron` expression
(api.service.cron), stored as a document of kind `schedules` tagged with its agent, so a
list of one agent's schedules reads the documents' tag index. It stores its `next_run`:
the first UTC minute its expression matches after it was made or its `cron` last
changed, moved on by each run (api.service.scheduledue; null when none does within a
year), and its `last_run` and `last_thread` once it has run.

Who reaches a schedule is as for threads (api.service.threads): an agent's token creates
schedules for itself only (`not-own-agent`) and reads, lists, changes, runs and deletes
those of itself and its descendants (`not-managed-agent`); an admin names the agent of a
new one. The `check_*` functions refuse such a request before it is decided
(api.service.manage), so it is neither logged nor paused; the operations refuse it again,
for a paused call that a human approves later.
"""

from __future__ import annotations

from typing import Any

from api import commands as c
from api.service import (
    agentowned,
    resources,  # (a module: it deletes an agent's schedules with it)
)
from api.service import cron as cronexpr
from api.service.agentowned import listed_agent, own_agent
from api.service.core import Service, new_id, now_ms
from api.service.errors import ServiceError
from api.service.etags import etag
from api.service.ops import Operation, Outcome, Result
from api.service.pages import decode, encode, limit_of
from api.service.tokens import Principal
from policy.store import Doc

KIND = agentowned.SCHEDULES
_REACH_HELP = "an agent's token reaches the schedules of itself and its descendants only"


def answer(doc: Any, at_ms: int | None = None) -> dict[str, Any]:
    """A stored schedule as answered: its stored `next_run` (one stored without it: the
    first minute after `at_ms`, default now, as the runner will set it), `last_run` and
    `last_thread`."""
    out = {key: doc[key] for key in ("id", "agent", "name", "cron", "prompt", "created_at",
                                     "updated_at")}  # fmt: skip
    if "next_run" in doc:
        out["next_run"] = doc["next_run"]
    else:
        after = now_ms() if at_ms is None else at_ms
        out["next_run"] = cronexpr.next_run(cronexpr.parse(doc["cron"]), after)
    out["last_run"] = doc.get("last_run")
    out["last_thread"] = doc.get("last_thread")
    return out


def _reach(service: Service, actor: Principal, agent_id: str, schedule: str | None = None) -> None:
    subject = None if schedule is None else (
        f"schedule `{schedule}` belongs to agent `{agent_id}`, which is"
    )  # fmt: skip
    resources.require_managed(service, actor, agent_id, subject, help=_REACH_HELP)


def stored(service: Service, actor: Principal, schedule_id: str) -> Any:
    """The schedule (`schedule-not-found` unknown), if the caller reaches it."""
    doc = service.store.get(KIND, schedule_id)
    if doc is None:
        raise ServiceError("schedule-not-found", f"no schedule `{schedule_id}`")
    _reach(service, actor, doc["agent"], schedule_id)
    return doc


def stored_for(service: Service, actor: Principal, command: c.ById) -> Doc:
    """The schedule `command.id` as stored, if the caller reaches it: what a `PATCH` or
    `DELETE` acts on, and its `If-Match` names (api.service.manage). Its runs change it
    (`next_run`, `last_run`, `last_thread`), so its `ETag` moves with each run."""
    found: Doc = stored(service, actor, command.id)
    return found


def check_list(service: Service, actor: Principal, command: c.ListSchedules) -> None:
    """Before an agent's `schedules.list` is decided."""
    agent = listed_agent(actor, command.agent)
    if agent is not None:
        _reach(service, actor, agent)


def check_one(service: Service, actor: Principal, command: c.ById) -> None:
    """Before an agent's `schedules.get`/`.delete` is decided."""
    stored(service, actor, command.id)


def check_update(service: Service, actor: Principal, command: c.UpdateSchedule) -> None:
    """Before an agent's `schedules.update` is decided: its cron and its schedule."""
    if command.cron is not None:
        cronexpr.parse(command.cron)
    stored(service, actor, command.id)


def check_create(service: Service, actor: Principal, command: c.CreateSchedule) -> None:
    """Before an agent's `schedules.create` is decided: its cron and its agent."""
    cronexpr.parse(command.cron)
    own_agent(actor, command.agent, "schedule", "makes schedules")


def schedules_list(service: Service, actor: Principal, command: c.ListSchedules) -> Result:
    agent = listed_agent(actor, command.agent)
    if agent is not None:
        _reach(service, actor, agent)
    after = decode(KIND, command.cursor, agent)
    limit = limit_of(command.limit)
    rows = service.store.page(KIND, after, limit + 1, agent)
    more = len(rows) > limit
    rows = rows[:limit]
    at = now_ms()
    cursor = encode(KIND, rows[-1].pos, listed=agent) if more and rows else None
    return Result(
        Outcome.DONE, {"items": [answer(row.body, at) for row in rows], "next_cursor": cursor}
    )  # fmt: skip


def schedules_get(service: Service, actor: Principal, command: c.GetSchedule) -> Result:
    doc = stored(service, actor, command.id)
    return Result(Outcome.DONE, answer(doc), etag(doc))


def schedules_create(service: Service, actor: Principal, command: c.CreateSchedule) -> Result:
    parsed = cronexpr.parse(command.cron)
    with service.store.atomic():  # the agent, as committed, is there when its schedule is
        service.sync()
        agent = service.agent(own_agent(actor, command.agent, "schedule", "makes schedules"))
        now, key = now_ms(), new_id()
        doc: dict[str, Any] = {"id": key, "agent": agent.id, "name": command.name, "cron": command.cron,
               "prompt": command.prompt, "created_at": now, "updated_at": now,
               "next_run": cronexpr.next_run(parsed, now), "last_run": None,
               "last_thread": None}  # fmt: skip
        service.store.insert(KIND, key, doc, tag=agent.id)
    return Result(Outcome.CREATED, answer(doc, now), etag(doc))


def schedules_update(service: Service, actor: Principal, command: c.UpdateSchedule) -> Result:
    if command.cron is not None:
        cronexpr.parse(command.cron)
    with service.store.atomic():  # the check and the write see the same schedule
        doc = dict(stored(service, actor, command.id))
        now = now_ms()
        if command.cron is not None and command.cron != doc["cron"]:
            # (a new expression's first minute after now; the same one keeps its due time)
            doc["cron"] = command.cron
            doc["next_run"] = cronexpr.next_run(cronexpr.parse(command.cron), now)
        if command.prompt is not None:
            doc["prompt"] = command.prompt
        doc["updated_at"] = now
        service.store.update(KIND, doc["id"], doc, tag=doc["agent"])
    return Result(Outcome.DONE, answer(doc, now), etag(doc))


def schedules_delete(service: Service, actor: Principal, command: c.DeleteSchedule) -> Result:
    with service.store.atomic():
        stored(service, actor, command.id)
        service.store.delete(KIND, command.id)
    return Result(Outcome.REMOVED, None)


OPERATIONS: dict[str, Operation] = {
    "schedules.list": schedules_list,
    "schedules.get": schedules_get,
    "schedules.create": schedules_create,
    "schedules.update": schedules_update,
    "schedules.delete": schedules_delete,
}
