"""`AsyncClient` against a live server, on one event loop: the same operations as
`Client` (tests/client/test_sync.py), awaited, an approval waited on while another task
approves it, a thread waited on while another task ends it, and refusals raised with
their codes."""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal

import pytest

from charter.client import AsyncClient, NoAnswer, ProblemError, Ready, call
from tests.api.conftest import free_port
from tests.client.conftest import ALLOWED, DENIED, PAUSED, Served


def test_decisions_tools_and_authzen(served: Served) -> None:
    async def run() -> None:
        async with AsyncClient(served.url, served.harness.decide) as client:
            allowed, denied, paused = await asyncio.gather(
                client.decide("a1", *ALLOWED), client.decide("a1", *DENIED),
                client.decide("a1", *PAUSED),
            )  # fmt: skip
            batch = await client.decide_batch([call("a1", *ALLOWED), call("a1", *DENIED)])
            listing = await client.list_tools("a1")
            turn = await client.admit_turn("a1")
            charged = await client.report_cost(allowed.id, allowed.seq, Decimal("0.02"))
            evaluated = await client.evaluate(
                {"subject": {"type": "agent", "id": "a1"}, "action": {"name": "send"},
                 "resource": {"type": "mail"}, "context": {"args": ALLOWED[1]}}
            )  # fmt: skip
            several = await client.evaluate_all(
                {"subject": {"type": "agent", "id": "a1"}, "resource": {"type": "billing"},
                 "action": {"name": "refund"}, "options": {"evaluations_semantic":
                 "deny_on_first_deny"}, "evaluations": [{"context": {"args": {"amount": 5}}},
                 {"context": {"args": {"amount": 90}}}, {"context": {"args": {"amount": 1}}}]}
            )  # fmt: skip
            ready = await client.readiness()
        assert (allowed.effect, denied.effect, paused.effect) == ("allow", "deny", "pause")
        assert (charged.decision, charged.amount, charged.micros) == (allowed.id, "0.02", 20_000)
        assert [r.hook for r in paused.reasons if r.kind == "hook-pause"] == ["approve-big"]
        assert [d.effect for d in batch] == ["allow", "deny"]
        assert {t.tool: t.status for t in listing.tools}["billing.refund"] == "allow"
        assert turn.revision == listing.revision
        assert evaluated.decision is True and (evaluated.context or {})["effect"] == "allow"
        # (the pause is false, and the evaluation after it is not decided)
        assert several.evaluations is not None
        assert [e.decision for e in several.evaluations] == [True, False]
        assert isinstance(ready, Ready) and ready.revision == turn.revision

    asyncio.run(run())


def test_an_approval_is_waited_for_while_another_task_approves_it(served: Served) -> None:
    async def run() -> None:
        async with (
            AsyncClient(served.url, served.harness.admin) as waiter,
            AsyncClient(served.url, served.harness.admin) as approver,
        ):
            paused = await waiter.decide("a1", *PAUSED)
            assert paused.approval_id is not None

            async def approve() -> str:
                await asyncio.sleep(0.3)
                return (await approver.approve(str(paused.approval_id))).approval.status

            began = time.monotonic()
            found, approved = await asyncio.gather(
                waiter.wait_for_approval(paused.approval_id, timeout=20), approve()
            )
            took = time.monotonic() - began
        assert approved == "approved" and found.status == "approved"
        assert found.final is not None and found.final.effect == "allow"
        assert 0.3 <= took < 5, took

    asyncio.run(run())


def test_a_thread_is_waited_for_while_another_task_ends_it(served: Served) -> None:
    async def run() -> None:
        async with (
            AsyncClient(served.url, served.harness.admin) as waiter,
            AsyncClient(served.url, served.harness.admin) as ender,
        ):
            made = await waiter.create_thread("a1")
            await waiter.update_thread(made.id, "running")

            async def end() -> str:
                await asyncio.sleep(0.3)
                return (await ender.update_thread(made.id, "failed")).status

            began = time.monotonic()
            found, ended = await asyncio.gather(waiter.wait_for_thread(made.id, 20), end())
            took = time.monotonic() - began
            events = await waiter.thread_events(made.id, limit=2)
            rest = await waiter.thread_events(made.id, events.next_cursor)
            fetched = await waiter.thread(made.id)
        assert ended == "failed" and found.status == "failed" and fetched == found
        assert 0.3 <= took < 5, took
        assert [e.event for e in events.items + rest.items] == ["created", "status", "status"]
        assert rest.next_cursor is None and rest.tail_cursor is not None

    asyncio.run(run())


def test_the_stream_tells_an_approval_opened(served: Served) -> None:
    async def run() -> None:
        async with AsyncClient(served.url, served.harness.admin) as client:
            events = client.approval_events()
            ready = await anext(events)
            paused = await client.decide("a1", *PAUSED)
            opened = await anext(events)
            await events.aclose()
        assert ready.kind == "ready" and opened.kind == "approval.opened"
        assert opened.approval is not None and opened.approval.id == paused.approval_id

    asyncio.run(run())


def test_refusals_and_no_answer(served: Served) -> None:
    token = served.harness.admin

    async def run() -> None:
        async with AsyncClient(served.url, "chr_not-a-token") as stranger:
            with pytest.raises(ProblemError) as bad:
                await stranger.list_tools("a1")
        async with AsyncClient(served.url, served.harness.agent_token) as agent:
            with pytest.raises(ProblemError) as other:
                await agent.evaluate(
                    {"subject": {"type": "agent", "id": "a2"}, "action": {"name": "send"},
                     "resource": {"type": "mail"}}
                )  # fmt: skip
        async with AsyncClient(f"http://127.0.0.1:{free_port()}", token) as nowhere:
            with pytest.raises(NoAnswer):
                await nowhere.decide("a1", *ALLOWED)
            assert token not in repr(nowhere) and repr(nowhere).startswith("AsyncClient(")
        assert (bad.value.status, bad.value.code) == (401, "unauthorized")
        assert (other.value.status, other.value.code) == (403, "insufficient-scope")

    asyncio.run(run())
