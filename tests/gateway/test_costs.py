"""An upstream result that reports what its call cost (`_meta` `charter/cost_usd`) is
charged to the agent's budget: in-process and against a live Charter server, the
upstream and the gateway's server reached by the SDK's in-memory transport."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client._memory import InMemoryTransport
from mcp.client.session import ClientSession

from api.gateway.config import parse
from api.gateway.decider import Decider
from api.gateway.local import LocalDecider
from api.gateway.proxy import COST_KEY, Connected, Gateway, list_all, reported_cost
from api.gateway.remote import RemoteDecider
from tests.gateway import upstream
from tests.gateway.test_gateway import POLICY, World, error_text, said, served
from tests.gateway.test_gateway import world as world  # (the fixture)

# `priced` declared and allowed; the profile's budget 1 USD per 24h.
PRICED = (
    POLICY.replace("  tool wipe(path: str)\n", "  tool wipe(path: str)\n  tool priced(cost: str)\n")
    .replace("allow demo.echo,", "allow demo.priced, demo.echo,")
    .replace("  hooks clamp, approve-big\n", "  hooks clamp, approve-big\n  budget 1 usd per 24h\n")
)


@contextmanager
def deciders(world: World, kind: str) -> Iterator[tuple[Decider, dict[str, Any]]]:
    if kind == "local":
        yield LocalDecider(world.service), {}
        return
    with served(world) as url:
        yield RemoteDecider(url, world.admin), {"server": url, "server_token": world.admin}


@pytest.mark.parametrize("kind", ["local", "server"])
def test_a_reported_cost_is_charged_and_the_cap_then_denies(
    world: World, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with world.service.store.atomic():
        world.service.upload([("policy.charter", PRICED)], "test")
    answers: list[types.CallToolResult] = []

    async def session(decider: Decider, extra: dict[str, Any]) -> None:
        config = parse(
            {"agent": "bot", "upstream": [{"toolset": "demo", "command": ["x"]}], **extra}
        )
        async with (
            InMemoryTransport(upstream.SERVER) as (up_read, up_write),
            ClientSession(up_read, up_write) as up,
        ):
            await up.initialize()
            gateway = Gateway(
                config, decider, [Connected(config.upstreams[0], up, await list_all(up))]
            )
            async with (
                InMemoryTransport(gateway.server) as (read, write),
                ClientSession(read, write) as client,
            ):
                await client.initialize()
                for cost in ("a lot", "0.75", "0.5", "0.01"):
                    answers.append(await client.call_tool("priced", {"cost": cost}))
        await decider.close() if kind == "server" else None

    with deciders(world, kind) as (decider, extra):
        anyio.run(session, decider, extra)
    # not an amount: forwarded, said on stderr, nothing charged
    assert said(answers[0])["args"] == {"cost": "a lot"}
    assert f"`demo.priced` ran; its cost was not charged: `{COST_KEY}` must be" in (
        capsys.readouterr().err
    )
    # 0.75, then 0.5 (allowed: within the cap when decided), charged past the cap
    assert said(answers[1])["args"] == {"cost": "0.75"}
    assert said(answers[2])["args"] == {"cost": "0.5"}
    assert world.service.store.spent("agent:bot", 0) == 1_250_000
    assert error_text(answers[3]) == (
        "charter denied `demo.priced`: expected cost 0 USD is over the profile `helper` "
        "budget 1 USD per 24h"
    )
    costs = [row.body for row in world.service.store.scan("cost")]
    assert sorted(c["amount"] for c in costs) == ["0.5", "0.75"]


@pytest.mark.parametrize(
    ("meta", "found"),
    [
        (None, None),
        ({"other": 1}, None),
        ({COST_KEY: "0.12"}, Decimal("0.12")),
        ({COST_KEY: 3}, Decimal(3)),
        ({COST_KEY: 0.5}, Decimal("0.5")),
        ({COST_KEY: "0"}, Decimal(0)),
    ],
)
def test_the_costs_a_result_reports(meta: Any, found: Decimal | None) -> None:
    result = types.CallToolResult(content=[], _meta=meta)
    assert reported_cost(result) == found


@pytest.mark.parametrize("value", ["-1", "1e10", " 5", "+5", "NaN", True, [1], {"usd": 1}])
def test_a_cost_that_is_not_an_amount(value: Any) -> None:
    with pytest.raises(ValueError, match="must be a number or its text"):
        reported_cost(types.CallToolResult(content=[], _meta={COST_KEY: value}))
