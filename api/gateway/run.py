"""Starting the gateway: the decider, the upstream servers, then the downstream transport."""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.stdio import stdio_server

from api.gateway.config import GatewayConfig, Upstream
from api.gateway.decider import Decider
from api.gateway.proxy import Connected, Gateway


async def connect(stack: AsyncExitStack, up: Upstream) -> Connected:
    """An upstream server, started (`command`) and initialized; its tools listed."""
    from api.gateway.proxy import list_all

    params = StdioServerParameters(
        command=up.command[0], args=list(up.command[1:]), env=dict(up.env or {}) or None,
        cwd=up.cwd,
    )  # fmt: skip
    read, write = await stack.enter_async_context(stdio_client(params, errlog=sys.stderr))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return Connected(up, session, await list_all(session))


async def serve_stdio(config: GatewayConfig, decider: Decider) -> None:
    async with AsyncExitStack() as stack:
        upstreams = [await connect(stack, up) for up in config.upstreams]
        gateway = Gateway(config, decider, upstreams)
        async with anyio.create_task_group() as tasks, stdio_server() as (read, write):
            tasks.start_soon(gateway.watch)
            await gateway.server.run(read, write, gateway.options())
            tasks.cancel_scope.cancel()


def local_decider(db: str | Path) -> Decider:
    from api.gateway.local import LocalDecider
    from api.http.app import open_service

    return LocalDecider(open_service(db))
