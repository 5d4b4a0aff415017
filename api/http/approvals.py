"""Approvals that reach people and programs: `GET /v1/approvals/{id}?wait=SECONDS`, a
long poll answered once the approval is decided (or with it pending at the end of the
wait), and `GET /v1/approvals/events`, a stream of Server-Sent Events of the approvals
opened and decided. Both wait on the app's approval watch (api/http/approvalwatch.py):
no thread, transaction or time of the event loop is held while they wait.

Who may: as `approvals.get` and `approvals.list`. The long poll is the `approvals.get`
(an agent's token: decided and logged once, as any get); the stream is decided as an
`approvals.list` when it opens, and shows an agent's token only the approvals its
`approvals.get` would be allowed (as the list's pages do)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from api import commands as c
from api.http.approvalwatch import closing, wait_any
from api.http.auth import require_manager
from api.http.body import checked, single_header
from api.http.pagination import int_query
from api.http.parts import parts_of
from api.http.routing import json_response, path_ids
from api.records import Approval
from api.service.approvalfeed import Event, Events, events_after, version
from api.service.approvals import readable
from api.service.core import Service
from api.service.encoding import dumps
from api.service.errors import ServiceError
from api.service.manage import manage
from api.service.ops import Outcome
from api.service.tokens import Principal

MAX_WAIT = 60  # seconds a long poll may wait (`wait`)
# Query parameters that are no argument of the route's tool: how long the answer waits,
# not what it is (nothing a policy decides on or a log shows).
NOT_ARGUMENTS = frozenset({"wait"})
KEEP_ALIVE = 15.0  # seconds between an event stream's comments when nothing happens
RETRY_MS = 2000  # what an event stream asks a client to wait before it reconnects


def _status(outcome: Outcome) -> int:
    return 202 if outcome is Outcome.PENDING else 200


async def get_approval(request: Request) -> Response:
    actor = require_manager(request)
    path = path_ids(request)
    wait = int_query(request, "wait", 0, minimum=0, maximum=MAX_WAIT)
    parts = parts_of(request)
    command = checked(c.GetApproval, path)
    result = await run_in_threadpool(manage, parts.service, actor, command, None)
    body = result.body
    if wait and isinstance(body, Approval) and body.status == "pending":
        # (its id as allowed: a rewrite may have the get read another approval)
        body = await _decided(request, body.id, wait)
    return json_response(body, _status(result.outcome))


async def _decided(request: Request, approval_id: str, seconds: int) -> Approval:
    """The approval once it is decided, or as it is after `seconds` (or when
    the server shuts down). It is read again after the watch is joined: a decision
    committed after the get's read and before that is seen by this read."""
    parts = parts_of(request)
    service = parts.service
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    stop = closing(request.scope)
    async with parts.approvals.watching(approval_id) as woken:
        while True:
            approval = await run_in_threadpool(service.record, Approval, "approval", approval_id)
            left = deadline - loop.time()
            if approval.status != "pending" or left <= 0 or stop.is_set():
                return approval
            await wait_any(woken, stop, timeout=left)
            woken.clear()


def _last_event_id(request: Request) -> int | None:
    raw = single_header(request.scope, b"last-event-id")
    if raw is None or raw == "":
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise ServiceError(
            "bad-last-event-id", "`Last-Event-ID` must be the `id` of an event of this stream",
            help="send back the last `id:` the stream gave, or no `Last-Event-ID`",
        )  # fmt: skip
    return int(raw)


async def approval_events(request: Request) -> Response:
    actor = require_manager(request)
    after = _last_event_id(request)
    parts = parts_of(request)
    service = parts.service
    if actor.agent is not None:  # decided (and logged) as the agent's list of approvals
        listed = checked(c.ListApprovals, {})
        result = await run_in_threadpool(manage, service, actor, listed, None)
        if result.outcome is not Outcome.DONE:  # (its policy paused it: a 202)
            return json_response(result.body, _status(result.outcome))
    start = await run_in_threadpool(version, service) if after is None else after
    stream = _stream(request, actor, start, resumed=after is not None)
    return StreamingResponse(
        stream,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _stream(
    request: Request, actor: Principal, after: int, *, resumed: bool
) -> AsyncIterator[bytes]:
    """`ready` (or, resumed, the events after `Last-Event-ID`), then each approval opened
    and decided as it happens; a comment every KEEP_ALIVE seconds that carries the
    stream's position as its `id`, so a client that reconnects resumes from there."""
    parts = parts_of(request)
    service = parts.service
    stop = closing(request.scope)
    yield b"retry: %d\n\n" % RETRY_MS
    if not resumed:
        yield _event("ready", after, {"after": after})
    async with parts.approvals.watching() as woken:
        while not stop.is_set():
            woken.clear()  # (before the read: what commits during it wakes the next wait)
            found = await run_in_threadpool(_events, service, actor, after)
            if found.events is None:  # (the feed does not hold what came after `after`)
                detail = "events were missed: read `GET /v1/approvals?status=pending` again"
                yield _event("reset", found.version, {"after": found.version, "detail": detail})
            else:
                for event in found.events:
                    yield _event(f"approval.{event.kind}", event.seq, event.approval)
            if found.version != after:
                after = found.version
                yield b"id: %d\n\n" % after  # (past changes of other kinds too)
            await wait_any(woken, stop, timeout=KEEP_ALIVE)
            if not woken.is_set() and not stop.is_set():
                yield b": keep-alive\nid: %d\n\n" % after


def _events(service: Service, actor: Principal, after: int) -> Events:
    """The events after `after` that `actor` may see."""
    found = events_after(service, after)
    if actor.agent is None or not found.events:
        return found
    approvals = [event.approval for event in found.events]
    shown = readable(service, actor.agent, approvals)
    kept: list[Event] = [e for e, ok in zip(found.events, shown, strict=True) if ok]
    return Events(found.version, tuple(kept))


def _event(kind: str, seq: int, data: object) -> bytes:
    """One event: its type, its `id` (what `Last-Event-ID` gives back) and its JSON."""
    return b"event: %s\nid: %d\ndata: %s\n\n" % (kind.encode(), seq, dumps(data))
