"""`AsyncClient`: the client of a Charter server's HTTP API on an asyncio event loop
(httpx), the same operations as charter.client.sync's `Client`, awaited.

Each method sends the request its operation makes (charter.client.operations) and reads
the answer as that operation says (charter.client.ask): this module adds the sending
alone."""

from __future__ import annotations

import ssl
from collections.abc import AsyncGenerator, Mapping, Sequence
from decimal import Decimal
from types import TracebackType
from typing import Any, TypeVar

import httpx

import charter.client.operations as op
from api.http.answers import (
    Approved,
    CostCharged,
    NotReady,
    Ready,
    Rejected,
    ThreadEventPage,
    ToolListing,
)
from api.http.authzenmodel import Decision, Decisions, Evaluation, Evaluations
from api.http.models import DecisionRequest
from api.records import Approval, DecisionResponse, Thread, ThreadStatus, Turn
from charter.client.ask import Ask, Plan
from charter.client.errors import NoAnswer
from charter.client.events import ApprovalEvent, EventReader
from charter.client.settings import TIMEOUT, headers_for, options, shown, timeout_for

T = TypeVar("T")


class AsyncClient:
    """A Charter server at `base_url`, asked with `token` (admin, decide or an agent's).
    A refusal raises ProblemError (its `code`), no answer NoAnswer (charter.client.errors).
    Use it in an `async with` block, or `await close()` it: it keeps its connections open."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = TIMEOUT,
        verify: ssl.SSLContext | str | bool = True,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._http = httpx.AsyncClient(
            **options(base_url, token, timeout), verify=verify, transport=transport
        )

    def __repr__(self) -> str:
        return shown("AsyncClient", self.base_url)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    # ---- sending ------------------------------------------------------------------------

    async def _send(self, ask: Ask[T]) -> T:
        try:
            answer = await self._http.request(
                ask.method, ask.path, content=ask.body, params=ask.query,
                headers=headers_for(ask), timeout=timeout_for(self.timeout, ask),
            )  # fmt: skip
        except httpx.HTTPError as exc:
            raise NoAnswer(
                f"{ask.method} {ask.path}: no answer from {self.base_url}: {exc}"
            ) from exc
        return ask.answer(answer.status_code, answer.content)

    async def _run(self, plan: Plan[T]) -> T:
        try:
            ask = next(plan)
            while True:
                ask = plan.send(await self._send(ask))
        except StopIteration as done:
            result: T = done.value
            return result

    # ---- decisions ----------------------------------------------------------------------

    async def decide(
        self,
        agent: str,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        thread: str | None = None,
        turn: str | None = None,
        context: Mapping[str, Any] | None = None,
        expected_cost: Decimal | int | str | None = None,
        connection: str | None = None,
        receipt: bool = False,
    ) -> DecisionResponse:
        """`POST /v1/decisions`: may `agent` call `tool` with `args`?"""
        call = op.call(agent, tool, args, thread=thread, turn=turn, context=context,
                       expected_cost=expected_cost, connection=connection)  # fmt: skip
        return await self._send(op.decide(call, receipt=receipt))

    async def decide_batch(
        self, calls: Sequence[DecisionRequest], *, receipt: bool = False
    ) -> list[DecisionResponse]:
        """`POST /v1/decisions/batch`: up to 1,000 calls (`charter.client.call(...)`
        each), decided together; the decisions in their order."""
        return await self._send(op.decide_batch(calls, receipt=receipt))

    async def list_tools(self, agent: str) -> ToolListing:
        """`GET /v1/agents/{id}/tools`: the tools `agent` may call, on the latest revision."""
        return await self._send(op.list_tools(agent))

    async def admit_turn(self, agent: str, thread: str | None = None) -> Turn:
        """`POST /v1/turns`: a turn, pinned to the latest revision and the agent's profile."""
        return await self._send(op.admit_turn(agent, thread))

    async def report_cost(
        self, decision: str, seq: int, amount: Decimal | int | str
    ) -> CostCharged:
        """`POST /v1/decisions/{id}/cost`: an allowed call's cost once it ran (decision
        `decision` at `seq`), charged once to its agent's, ancestors' and thread's budgets."""
        return await self._send(op.report_cost(decision, seq, amount))

    async def readiness(self) -> Ready | NotReady:
        """`GET /readyz`: ready to decide (the latest revision), or why not."""
        return await self._send(op.readiness())

    # ---- threads ------------------------------------------------------------------------

    async def create_thread(
        self,
        agent: str | None = None,
        prompt: str = "",
        max_cost: Decimal | int | str | None = None,
    ) -> Thread:
        """`POST /v1/threads`: a thread for `agent` (an agent's token: itself), capped at
        `max_cost` USD."""
        return await self._send(op.create_thread(agent, prompt, max_cost))

    async def thread(self, thread_id: str) -> Thread:
        """`GET /v1/threads/{id}`: the thread as it is."""
        return await self._send(op.thread(thread_id))

    async def update_thread(self, thread_id: str, status: ThreadStatus) -> Thread:
        """`PATCH /v1/threads/{id}`: its status (`running` while its agent works)."""
        return await self._send(op.update_thread(thread_id, status))

    async def wait_for_thread(self, thread_id: str, timeout: float = 60.0) -> Thread:
        """The thread once its status is other than `running`, or as it is after `timeout`
        seconds: long polls (`POST /v1/threads/{id}/wait`) one after another."""
        return await self._run(op.wait_for_thread(thread_id, timeout))

    async def thread_events(
        self, thread_id: str, cursor: str | None = None, limit: int | None = None
    ) -> ThreadEventPage:
        """`GET /v1/threads/{id}/events`: a page of its events, oldest first, after
        `cursor` (a page's `next_cursor`; its `tail_cursor` to read what came since)."""
        return await self._send(op.thread_events(thread_id, cursor, limit))

    # ---- approvals ----------------------------------------------------------------------

    async def approval(self, approval_id: str) -> Approval:
        """`GET /v1/approvals/{id}`: the approval as it is."""
        return await self._send(op.approval(approval_id))

    async def wait_for_approval(self, approval_id: str, timeout: float = 60.0) -> Approval:
        """The approval once it is approved or rejected, or as it is (`pending`) after
        `timeout` seconds: long polls (`GET /v1/approvals/{id}?wait=`) one after another."""
        return await self._run(op.wait_for_approval(approval_id, timeout))

    async def approve(self, approval_id: str) -> Approved:
        """`POST /v1/approvals/{id}/approve`: the call decided again, and its decision."""
        return await self._send(op.approve(approval_id))

    async def reject(self, approval_id: str, reason: str | None = None) -> Rejected:
        """`POST /v1/approvals/{id}/reject`."""
        return await self._send(op.reject(approval_id, reason))

    async def approval_events(
        self, last_event_id: int | None = None
    ) -> AsyncGenerator[ApprovalEvent, None]:
        """`GET /v1/approvals/events`: each approval opened and decided, as it happens,
        until the server ends the stream (then reconnect with the last event's `id`).
        `await aclose()` the generator to close its connection before it ends."""
        ask = op.approval_events(last_event_id)
        try:
            async with self._http.stream(
                ask.method, ask.path, headers=headers_for(ask),
                timeout=timeout_for(self.timeout, ask),
            ) as answer:  # fmt: skip
                if answer.status_code != 200:
                    ask.answer(answer.status_code, await answer.aread())
                    raise NoAnswer(f"{ask.path} answered {answer.status_code}, not a stream")
                reader = EventReader()
                async for line in answer.aiter_lines():
                    event = reader.feed(line)
                    if event is not None:
                        yield event
        except httpx.HTTPError as exc:
            raise NoAnswer(
                f"{ask.method} {ask.path}: the stream from {self.base_url} ended: {exc}"
            ) from exc

    # ---- AuthZEN ------------------------------------------------------------------------

    async def evaluate(
        self, request: Evaluation | Mapping[str, Any], *, request_id: str | None = None
    ) -> Decision:
        """`POST /access/v1/evaluation`: AuthZEN's access evaluation (the request as the
        specification's JSON, or its model)."""
        return await self._send(op.evaluation(request, request_id))

    async def evaluate_all(
        self, request: Evaluations | Mapping[str, Any], *, request_id: str | None = None
    ) -> Decisions:
        """`POST /access/v1/evaluations`: AuthZEN's evaluations, in one request."""
        return await self._send(op.evaluations(request, request_id))
