"""Threads: list, get, create, update, delete.

With an agent's token a thread operation reaches only the threads of the agent itself and
of its descendants (a parent manages its children, as for `agents.update`; docs/design.md
section 3), else `not-managed-agent`, and an agent opens threads for itself only
(`not-own-agent`). The `check_*` functions refuse such a request before it is decided
(api.service.manage), so it is neither logged nor paused; the operations refuse it again,
for a paused call that a human approves later.
"""

from __future__ import annotations

from typing import Any

from api import commands as c
from api.records import Thread
from api.service import threadevents
from api.service.agentowned import listed_agent, own_agent
from api.service.approved import reject_orphans
from api.service.budget import parse_usd
from api.service.core import Service, new_id, now_ms
from api.service.etags import etag
from api.service.ops import Operation, Outcome, Result
from api.service.pages import limit_of, page
from api.service.resources import require_managed
from api.service.tokens import Principal
from policy.store import Doc, Store


def _reach(service: Service, actor: Principal, agent_id: str, thread: str | None = None) -> None:
    """With an agent's token, `agent_id` (whose threads are listed, or the agent of
    `thread`) must be the agent itself or one of its descendants, else `not-managed-agent`."""
    subject = None if thread is None else (
        f"thread `{thread}` belongs to agent `{agent_id}`, which is"
    )  # fmt: skip
    require_managed(
        service, actor, agent_id, subject,
        help="an agent's token reaches the threads of itself and its descendants only",
    )  # fmt: skip


def reach_thread(service: Service, actor: Principal, thread_id: str) -> Thread:
    """The thread (`thread-not-found` unknown), if the caller reaches it (see `_reach`)."""
    thread = service.record(Thread, "thread", thread_id)
    _reach(service, actor, thread.agent, thread_id)
    return thread


def by(actor: Principal) -> str:
    """Who did it, as an event names them (as an approval's `decided_by`): an agent by its
    id, anyone else by their token's, `token:<id>`."""
    return actor.agent or f"token:{actor.token_id}"


def check_thread(service: Service, actor: Principal, command: c.ById) -> None:
    """Before an agent's `threads.get`/`.update`/`.delete` is decided."""
    reach_thread(service, actor, command.id)


def stored(service: Service, actor: Principal, command: c.ById) -> Doc:
    """The thread `command.id` as stored, if the caller reaches it: what a `PATCH` or
    `DELETE` acts on, and its `If-Match` names (api.service.manage)."""
    return reach_thread(service, actor, command.id).stored()


def check_list(service: Service, actor: Principal, command: c.ListThreads) -> None:
    """Before an agent's `threads.list` is decided."""
    agent = listed_agent(actor, command.agent)
    if agent is not None:
        _reach(service, actor, agent)


def check_create(service: Service, actor: Principal, command: c.CreateThread) -> None:
    """Before an agent's `threads.create` is decided."""
    own_agent(actor, command.agent, "thread", "opens threads")


def threads_list(service: Service, actor: Principal, command: c.ListThreads) -> Result:
    agent = listed_agent(actor, command.agent)
    if agent is not None:
        _reach(service, actor, agent)
    return page(service, "threads", command, tag=agent, listed=agent)


def threads_get(service: Service, actor: Principal, command: c.GetThread) -> Result:
    thread = reach_thread(service, actor, command.id)
    return Result(Outcome.DONE, thread, etag(thread.stored()))


def threads_create(service: Service, actor: Principal, command: c.CreateThread) -> Result:
    with service.store.atomic():  # the agent, as committed, is there when its thread is
        service.sync()
        agent = service.agent(own_agent(actor, command.agent, "thread", "opens threads"))
        max_cost = None
        if command.max_cost is not None:
            max_cost = parse_usd(command.max_cost, "invalid-max-cost", "max_cost")
        thread = open_thread(service.store, agent.id, command.prompt, max_cost, by(actor))
    return Result(Outcome.CREATED, thread, etag(thread.stored()))


def open_thread(
    store: Store, agent: str, prompt: str, max_cost: str | None, who: str,
    schedule: str | None = None, due: int | None = None,
) -> Thread:  # fmt: skip
    """Inside the caller's transaction: a new `open` thread of `agent` and its `created`
    event (`schedule`, `due`: the run of a schedule that starts it, api.service.schedulerun)."""
    now = now_ms()
    thread = Thread(
        id=new_id(), agent=agent, prompt=prompt,
        max_cost=max_cost, depth=0, status="open", created_at=now, updated_at=now,
    )  # fmt: skip
    store.insert(Thread.KIND, thread.id, thread.stored(), tag=thread.agent)
    threadevents.record(
        store, thread.id, "created", now, agent=agent, by=who, max_cost=max_cost,
        schedule=schedule, due=due,
    )  # fmt: skip
    return thread


def threads_update(service: Service, actor: Principal, command: c.UpdateThread) -> Result:
    with service.store.atomic():  # the check and the write see the same thread
        thread = reach_thread(service, actor, command.id)
        now = now_ms()
        changes: dict[str, Any] = {"updated_at": now}
        if command.status is not None:  # (a ThreadStatus: the command's type)
            changes["status"] = command.status
        was = thread.status
        thread = thread.changed(**changes)
        service.store.update(Thread.KIND, thread.id, thread.stored(), tag=thread.agent)
        if thread.status != was:
            threadevents.record(
                service.store, thread.id, "status", now, status=thread.status, was=was,
                by=by(actor),
            )  # fmt: skip
        service.read.note_thread(thread.id)
    return Result(Outcome.DONE, thread, etag(thread.stored()))


def threads_delete(service: Service, actor: Principal, command: c.DeleteThread) -> Result:
    with service.store.atomic():
        reach_thread(service, actor, command.id)
        service.store.delete("threads", command.id)
        threadevents.delete_all(service.store, command.id)
        service.read.forget_thread(command.id)  # (every process's cache of it)
        service.read.note_thread(command.id)
        reject_orphans(service, "thread", command.id, f"thread `{command.id}` was deleted")
    return Result(Outcome.REMOVED, None)


def threads_wait(service: Service, actor: Principal, command: c.WaitThread) -> Result:
    """The thread as it is now: the HTTP endpoint waits, after the decision, while it is
    `running` (api/http/threadwait.py)."""
    thread = reach_thread(service, actor, command.id)
    return Result(Outcome.DONE, thread, etag(thread.stored()))


def threads_events(service: Service, actor: Principal, command: c.ThreadEvents) -> Result:
    """A page of the thread's events, oldest first (api.service.threadevents)."""
    reach_thread(service, actor, command.id)
    limit = limit_of(command.limit)
    return Result(
        Outcome.DONE, threadevents.page(service.store, command.id, command.cursor, limit)
    )  # fmt: skip


OPERATIONS: dict[str, Operation] = {
    "threads.list": threads_list,
    "threads.get": threads_get,
    "threads.create": threads_create,
    "threads.update": threads_update,
    "threads.delete": threads_delete,
    "threads.wait": threads_wait,
    "threads.events": threads_events,
}
