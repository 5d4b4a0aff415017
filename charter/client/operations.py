"""The operations of the client, each as the request it sends (`Ask`) or, for one of
several requests, as its plan: what both clients call, so each operation is mapped to
HTTP once. Request bodies are the server's own models (api.http.models, the AuthZEN
model), checked here before they are sent; answers are read as the server's answer
models. A body is written as the service writes JSON: a `Decimal` as a JSON number with
its exact digits."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from functools import partial
from typing import Any, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from api.commands import ThreadCreate, ThreadUpdate, ThreadWait
from api.http.answers import (
    Approved,
    BatchResponse,
    CostCharged,
    NotReady,
    Ready,
    Rejected,
    ThreadEventPage,
    ToolListing,
)
from api.http.authzenmodel import Decision, Decisions, Evaluation, Evaluations
from api.http.models import BatchRequest, CostReport, DecisionRequest, TurnRequest
from api.records import Approval, DecisionResponse, Thread, ThreadStatus, Turn
from api.service.encoding import dumps, loads
from charter.client.ask import Ask, Plan, reader

W = TypeVar("W", Approval, Thread)
MAX_WAIT = 60  # seconds one long poll may wait (the server's bound on `?wait=`)
# Seconds the approvals' stream is ever silent: the server sends a comment every 15
# seconds when nothing happens (api/http/approvals.py).
KEEP_ALIVE = 15.0


def _json(model: BaseModel) -> bytes:
    return dumps(model.model_dump(exclude_none=True))


def _id(value: str) -> str:
    """An id as a path's segment: every character but the unreserved ones escaped."""
    return quote(value, safe="")


def _receipt(receipt: bool) -> tuple[tuple[str, str], ...]:
    return (("receipt", "true"),) if receipt else ()


def call(
    agent: str,
    tool: str,
    args: Mapping[str, Any] | None = None,
    *,
    thread: str | None = None,
    turn: str | None = None,
    context: Mapping[str, Any] | None = None,
    expected_cost: Decimal | int | str | None = None,
    connection: str | None = None,
) -> DecisionRequest:
    """A call to decide, checked as the server checks one (pydantic's ValidationError when
    it is not one: an empty tool, an id over 200 characters, a negative cost)."""
    return DecisionRequest.model_validate(
        {"agent": agent, "tool": tool, "args": dict(args or {}), "thread": thread,
         "turn": turn, "context": None if context is None else dict(context),
         "expected_cost": expected_cost, "connection": connection}
    )  # fmt: skip


def decide(request: DecisionRequest, *, receipt: bool = False) -> Ask[DecisionResponse]:
    return Ask("POST", "/v1/decisions", reader(DecisionResponse), _json(request),
               _receipt(receipt))  # fmt: skip


def decide_batch(
    calls: Sequence[DecisionRequest], *, receipt: bool = False
) -> Ask[list[DecisionResponse]]:
    batch = BatchRequest(calls=list(calls))
    return Ask("POST", "/v1/decisions/batch", lambda content: reader(BatchResponse)(content).decisions,
               _json(batch), _receipt(receipt))  # fmt: skip


def report_cost(decision: str, seq: int, amount: Decimal | int | str) -> Ask[CostCharged]:
    """An allowed call's cost, once it ran: charged once to its budgets."""
    body = _json(CostReport.model_validate({"seq": seq, "amount": amount}))
    return Ask("POST", f"/v1/decisions/{_id(decision)}/cost", reader(CostCharged), body)


def list_tools(agent: str) -> Ask[ToolListing]:
    return Ask("GET", f"/v1/agents/{_id(agent)}/tools", reader(ToolListing))


def admit_turn(agent: str, thread: str | None = None) -> Ask[Turn]:
    return Ask("POST", "/v1/turns", reader(Turn), _json(TurnRequest(agent=agent, thread=thread)))


def readiness() -> Ask[Ready | NotReady]:
    """`/readyz`: ready (with the latest revision), or not (503, with why)."""

    def read(content: bytes) -> Ready | NotReady:
        found = loads(content)
        if isinstance(found, dict) and found.get("status") == "ready":
            return Ready.model_validate(found)
        return NotReady.model_validate(found)

    return Ask("GET", "/readyz", read, also=frozenset({503}))


def approval(approval_id: str, wait: int = 0) -> Ask[Approval]:
    """The approval; with `wait` (1 to MAX_WAIT seconds), once it is decided or as it is
    after `wait` seconds."""
    query = (("wait", str(wait)),) if wait else ()
    return Ask("GET", f"/v1/approvals/{_id(approval_id)}", reader(Approval), query=query,
               waits=float(wait))  # fmt: skip


def _long_polls(
    poll: Callable[[int], Ask[W]], done: Callable[[W], bool], timeout: float,
    clock: Callable[[], float],
) -> Plan[W]:  # fmt: skip
    """`poll(wait)` sent until what it answers is `done`, or `timeout` seconds passed:
    each waits 1 to MAX_WAIT seconds, and 0 once no time is left."""
    deadline = clock() + timeout
    while True:
        left = deadline - clock()
        wait = max(1, min(MAX_WAIT, math.ceil(left))) if left > 0 else 0
        found: W = yield poll(wait)
        if done(found) or clock() >= deadline:
            return found


def wait_for_approval(
    approval_id: str, timeout: float, clock: Callable[[], float] = time.monotonic
) -> Plan[Approval]:
    """The approval once it is decided, or as it is (pending) after `timeout` seconds:
    long polls of at most MAX_WAIT seconds each, one after the other."""
    return _long_polls(
        partial(approval, approval_id), lambda found: found.status != "pending", timeout, clock
    )


def approve(approval_id: str) -> Ask[Approved]:
    return Ask("POST", f"/v1/approvals/{_id(approval_id)}/approve", reader(Approved))


def reject(approval_id: str, reason: str | None = None) -> Ask[Rejected]:
    body = dumps({"reason": reason} if reason is not None else {})
    return Ask("POST", f"/v1/approvals/{_id(approval_id)}/reject", reader(Rejected), body)


def approval_events(last_event_id: int | None = None) -> Ask[None]:
    """The approvals' event stream (its answer is read by charter.client.events); after
    `last_event_id`, the events it missed first."""
    headers = (("Last-Event-ID", str(last_event_id)),) if last_event_id is not None else ()
    return Ask("GET", "/v1/approvals/events", lambda content: None, headers=headers,
               waits=KEEP_ALIVE)  # fmt: skip


def create_thread(
    agent: str | None = None, prompt: str = "", max_cost: Decimal | int | str | None = None
) -> Ask[Thread]:
    """A thread for `agent` (an agent's token: itself when None), capped at `max_cost`
    USD; checked as the server checks it before it is sent."""
    made = ThreadCreate.model_validate({"agent": agent, "prompt": prompt, "max_cost": max_cost})
    return Ask("POST", "/v1/threads", reader(Thread), _json(made))


def thread(thread_id: str) -> Ask[Thread]:
    return Ask("GET", f"/v1/threads/{_id(thread_id)}", reader(Thread))


def update_thread(thread_id: str, status: ThreadStatus) -> Ask[Thread]:
    return Ask("PATCH", f"/v1/threads/{_id(thread_id)}", reader(Thread),
               _json(ThreadUpdate(status=status)))  # fmt: skip


def thread_wait(thread_id: str, wait: int) -> Ask[Thread]:
    """`POST /v1/threads/{id}/wait`: the thread once it is not `running`, or as it is
    after `wait` seconds (0 to MAX_WAIT)."""
    return Ask("POST", f"/v1/threads/{_id(thread_id)}/wait", reader(Thread),
               _json(ThreadWait(timeout=wait)), waits=float(wait))  # fmt: skip


def wait_for_thread(
    thread_id: str, timeout: float, clock: Callable[[], float] = time.monotonic
) -> Plan[Thread]:
    """The thread once its status is other than `running`, or as it is after `timeout`
    seconds: long polls of at most MAX_WAIT seconds each, one after the other."""
    return _long_polls(
        partial(thread_wait, thread_id), lambda found: found.status != "running", timeout, clock
    )


def thread_events(
    thread_id: str, cursor: str | None = None, limit: int | None = None
) -> Ask[ThreadEventPage]:
    """A page of the thread's events, oldest first, after `cursor` (a page's
    `next_cursor`, or its `tail_cursor` to read only what came since)."""
    query = tuple((key, str(value)) for key, value in (("cursor", cursor), ("limit", limit))
                  if value is not None)  # fmt: skip
    return Ask("GET", f"/v1/threads/{_id(thread_id)}/events", reader(ThreadEventPage),
               query=query)  # fmt: skip


def _request_id(request_id: str | None) -> tuple[tuple[str, str], ...]:
    return (("X-Request-ID", request_id),) if request_id is not None else ()


def evaluation(
    request: Evaluation | Mapping[str, Any], request_id: str | None = None
) -> Ask[Decision]:
    """AuthZEN: one access request (`subject.id` the agent, `resource.type` the toolset,
    `action.name` the tool, `context.args` the call's arguments)."""
    checked = Evaluation.model_validate(request)
    return Ask("POST", "/access/v1/evaluation", reader(Decision), _json(checked),
               headers=_request_id(request_id))  # fmt: skip


def evaluations(
    request: Evaluations | Mapping[str, Any], request_id: str | None = None
) -> Ask[Decisions]:
    """AuthZEN: several access requests (`evaluations`, with the top level's members as
    their defaults, and `options.evaluations_semantic`)."""
    checked = Evaluations.model_validate(request)
    return Ask("POST", "/access/v1/evaluations", reader(Decisions), _json(checked),
               headers=_request_id(request_id))  # fmt: skip
