"""Starting the gateway: the decider, the upstream servers, then the downstream transport."""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.stdio import stdio_server

from api.gateway.config import ConfigError, GatewayConfig, Upstream
from api.gateway.decider import Decider
from api.gateway.proxy import Connected, Gateway, ShadowReport, changes_of, list_all


async def connect(stack: AsyncExitStack, up: Upstream) -> Connected:
    """An upstream server, started (`command`) or reached (`url`), and initialized; its
    tools listed. ConfigError when it cannot be: the gateway does not start without it."""
    if up.url is not None:
        transport = streamable_http_client(up.url)
    else:
        params = StdioServerParameters(
            command=up.command[0], args=list(up.command[1:]), env=dict(up.env or {}) or None,
            cwd=up.cwd,
        )  # fmt: skip
        transport = stdio_client(params, errlog=sys.stderr)
    try:
        read, write = await stack.enter_async_context(transport)
        holder: list[Connected] = []
        session = ClientSession(read, write, message_handler=changes_of(holder))
        await stack.enter_async_context(session)
        await session.initialize()
        holder.append(Connected(up, session, await list_all(session)))
        return holder[0]
    except Exception as exc:
        raise cannot_start(up, exc) from None


def cannot_start(up: Upstream, exc: BaseException) -> ConfigError:
    where = f"`{up.url}`" if up.url is not None else f"`{' '.join(up.command)}`"
    return ConfigError(
        f"cannot start the upstream of toolset `{up.toolset}` ({where}): {_why(exc)}",
        "check the upstream's `command` or `url`; its own messages are on stderr above",
    )


def _why(exc: BaseException) -> str:
    """What stopped an upstream, in a few words: the first cause inside exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    text = str(exc).strip()[:200]
    return text[:1].lower() + text[1:] if text else type(exc).__name__


async def serve(
    config: GatewayConfig, decider: Decider, host: str | None = None, port: int | None = None
) -> None:
    """Serve over stdio, or over Streamable HTTP at `http://host:port/mcp` (`port` given)."""
    connecting: list[Upstream] = []  # the upstream being connected, while one is
    try:
        await _serve(config, decider, host, port, connecting)
    except BaseExceptionGroup as group:  # (an upstream's task groups wrap what stopped it)
        refused = group.subgroup(ConfigError)
        while isinstance(refused, BaseExceptionGroup) and refused.exceptions:
            refused = refused.exceptions[0]  # type: ignore[assignment]
        if isinstance(refused, ConfigError):
            raise refused from None
        if connecting:  # (its transport's own task group failed: a URL that refuses, say)
            raise cannot_start(connecting[0], group) from None
        raise
    finally:
        await decider.close()


async def _serve(
    config: GatewayConfig,
    decider: Decider,
    host: str | None,
    port: int | None,
    connecting: list[Upstream],
) -> None:
    async with AsyncExitStack() as stack:
        upstreams = []
        for up in config.upstreams:
            connecting[:] = [up]
            upstreams.append(await connect(stack, up))
        connecting.clear()
        out = sys.stderr
        if config.report is not None:
            try:
                out = stack.enter_context(open(config.report, "a", encoding="utf-8"))  # noqa: SIM115
            except OSError as exc:
                why = (exc.strerror or type(exc).__name__).lower()
                raise ConfigError(f"cannot write the report `{config.report}`: {why}") from None
        gateway = Gateway(config, decider, upstreams, ShadowReport(out))
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(gateway.watch)
            if port is None:
                async with stdio_server() as (read, write):
                    await gateway.server.run(read, write, gateway.options())
            else:
                await _serve_http(gateway, host or "127.0.0.1", port)
            tasks.cancel_scope.cancel()


async def _serve_http(gateway: Gateway, host: str, port: int) -> None:
    import uvicorn

    app = gateway.server.streamable_http_app(host=host)
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", access_log=False, lifespan="on"
    )
    server = uvicorn.Server(config)
    sys.stderr.write(f"charter gateway: serving MCP on http://{host}:{port}/mcp\n")
    await server.serve()


def decider_for(
    config: GatewayConfig, db: str | Path, key_file: str | Path | None = None
) -> Decider:
    """Against the Charter server the configuration names, else in-process on `db`."""
    if config.server is not None and config.server_token is not None:
        from api.gateway.remote import RemoteDecider

        return RemoteDecider(config.server, config.server_token)
    from api.gateway.local import LocalDecider
    from api.http.app import open_service

    return LocalDecider(open_service(db, key_file=key_file))
