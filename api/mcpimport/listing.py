"""An MCP server's tool list, read live (a command started over stdio, or a Streamable
HTTP URL) with the MCP SDK, as the gateway reads its upstreams' (api/gateway/run.py)."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any, TextIO

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from api.gateway.proxy import list_all
from api.gateway.run import _why

TIMEOUT = 60.0  # seconds to start, initialize and list


class ListingError(Exception):
    """The server could not be started, reached or listed: `message` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


async def _list(command: list[str] | None, url: str | None) -> tuple[str, list[dict[str, Any]]]:
    async with AsyncExitStack() as stack:
        if url is not None:
            transport = streamable_http_client(url)
        else:
            assert command is not None
            params = StdioServerParameters(
                command=command[0], args=command[1:], env=dict(os.environ), cwd=os.getcwd()
            )
            transport = stdio_client(params, errlog=_errlog(stack))
        read, write = await stack.enter_async_context(transport)
        session = ClientSession(read, write)
        await stack.enter_async_context(session)
        initialized = await session.initialize()
        tools = await list_all(session)
        server = initialized.server_info.name if initialized.server_info else ""
        return server, [_plain(tool) for tool in tools.values()]


def _errlog(stack: AsyncExitStack) -> TextIO:
    """Where the server's own messages go: this process's stderr, or nowhere when that
    is no file (`charter` run inside another program that took it)."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return stack.enter_context(open(os.devnull, "w", encoding="utf-8"))
    return sys.stderr


def _plain(tool: types.Tool) -> dict[str, Any]:
    """A listed tool as its `tools/list` JSON (`name`, `description`, `inputSchema`)."""
    dumped: Mapping[str, Any] = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dict(dumped)


def list_tools(
    command: str | None = None, url: str | None = None, timeout: float = TIMEOUT
) -> tuple[str, list[dict[str, Any]]]:
    """(the server's name, its tools as `tools/list` JSON), from the server that `command`
    starts (split as a shell splits it, run without one) or that `url` serves."""
    argv = shlex.split(command) if command is not None else None
    if argv is not None and not argv:
        raise ListingError("`--command` is empty")

    async def run() -> tuple[str, list[dict[str, Any]]]:
        with anyio.fail_after(timeout):
            return await _list(argv, url)

    try:
        return anyio.run(run)
    except TimeoutError:
        raise ListingError(f"no tool list within {timeout:g} s") from None
    except Exception as exc:
        raise ListingError(_why(exc)) from None
