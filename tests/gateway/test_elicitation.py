"""A paused call whose wait ran out asks the client's user, by MCP elicitation, whether to
wait on: a real gateway process over stdio with a client that takes elicitation, and the
gateway's server in-process (the SDK's in-memory transport) for a decline and for a
client that declared no elicitation."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import mcp_types as types
from mcp.client._memory import InMemoryTransport
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.stdio import stdio_client

from api.gateway.config import parse
from api.gateway.local import LocalDecider
from api.gateway.proxy import KEEP_WAITING, Connected, Gateway, list_all
from tests.gateway import upstream
from tests.gateway.test_gateway import World, decide_when_asked, error_text, said, served
from tests.gateway.test_gateway import world as world  # (the fixture)


def test_a_client_that_says_keep_waiting_gets_the_approved_call(world: World) -> None:
    world.write_config(token=world.agent_token, pause_wait=0.3, ask_rounds=20)
    asked: list[types.ElicitRequestFormParams] = []

    async def session(url: str) -> None:
        async with anyio.create_task_group() as tasks:

            async def elicit(
                context: ClientRequestContext, params: types.ElicitRequestParams
            ) -> types.ElicitResult:
                assert isinstance(params, types.ElicitRequestFormParams)
                asked.append(params)
                if len(asked) == 2:  # (approved over HTTP once the user said wait, twice)
                    tasks.start_soon(decide_when_asked, world, url, "approve", {})
                return types.ElicitResult(action="accept", content={"keep_waiting": True})

            async with (
                stdio_client(world.gateway()) as (read, write),
                ClientSession(read, write, elicitation_callback=elicit) as client,
            ):
                await client.initialize()
                ran = said(await client.call_tool("refund", {"amount": 77}))
        assert ran == {"tool": "refund", "args": {"amount": 77}}

    with served(world) as url:
        anyio.run(session, url)
    assert len(asked) >= 2
    rows = world.service.store.read_decisions(0, 10)
    approval_id = json.loads(rows[0][1])["approval"]  # type: ignore[arg-type]
    message = asked[0].message
    assert message.startswith(
        f"`demo.refund` awaits a person's approval (approval `{approval_id}`)"
    )
    # (the arguments are never in it: the approval's id, random hex, may hold "77" itself)
    assert "a person approves refunds over 50" in message
    assert "77" not in message.replace(approval_id, "")
    assert asked[0].requested_schema == KEEP_WAITING


def paused_call(world: World, elicit: Any, rounds: int = 3) -> tuple[types.CallToolResult, float]:
    """A paused call through the gateway in-process (pause_wait 0.2 s) by a client with
    `elicit` as its elicitation callback (None: it declares no elicitation); the answer
    and the seconds it took."""
    config = parse(
        {"agent": "bot", "pause_wait": 0.2, "ask_rounds": rounds,
         "upstream": [{"toolset": "demo", "command": ["x"]}]}
    )  # fmt: skip
    found: list[tuple[types.CallToolResult, float]] = []

    async def session() -> None:
        async with (
            InMemoryTransport(upstream.SERVER) as (up_read, up_write),
            ClientSession(up_read, up_write) as up,
        ):
            await up.initialize()
            connected = Connected(config.upstreams[0], up, await list_all(up))
            gateway = Gateway(config, LocalDecider(world.service), [connected])
            async with (
                InMemoryTransport(gateway.server) as (read, write),
                ClientSession(read, write, elicitation_callback=elicit) as client,
            ):
                await client.initialize()
                started = time.monotonic()
                answer = await client.call_tool("refund", {"amount": 80})
                found.append((answer, time.monotonic() - started))

    anyio.run(session)
    return found[0]


def test_a_declined_question_answers_that_the_call_awaits_approval(world: World) -> None:
    asked: list[str] = []

    async def decline(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="decline")

    answer, took = paused_call(world, decline)
    assert len(asked) == 1 and took < 5
    assert "awaits a person's approval" in error_text(answer)
    assert "did not run" in error_text(answer)


def test_keep_waiting_false_or_cancel_is_no_and_the_rounds_are_bounded(world: World) -> None:
    answers = [
        types.ElicitResult(action="accept", content={"keep_waiting": True}),
        types.ElicitResult(action="accept", content={"keep_waiting": False}),
    ]
    asked: list[str] = []

    async def elicit(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params.message)
        return answers[len(asked) - 1] if len(asked) <= len(answers) else answers[0]

    answer, took = paused_call(world, elicit)
    assert len(asked) == 2 and took >= 0.4  # (waited one more pause_wait, then stopped)
    assert "awaits a person's approval" in error_text(answer)

    asked.clear()
    answers[1] = answers[0]  # (always yes: asked `ask_rounds` times, then the answer)
    answer, _ = paused_call(world, elicit, rounds=2)
    assert len(asked) == 2 and "awaits a person's approval" in error_text(answer)

    async def cancel(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="cancel")

    asked.clear()
    answer, _ = paused_call(world, cancel)
    assert len(asked) == 1 and "awaits a person's approval" in error_text(answer)


def test_a_client_without_elicitation_is_answered_at_pause_wait(world: World) -> None:
    answer, took = paused_call(world, None)
    assert 0.2 <= took < 5
    assert "awaits a person's approval" in error_text(answer)
