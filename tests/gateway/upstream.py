"""An MCP server for the gateway's tests, written with the SDK's low-level server: each
tool answers with the arguments it was called with (JSON), so a test reads what the
gateway forwarded; `priced` also reports its argument `cost` as what the call cost
(`_meta`, `charter/cost_usd`). Run as a program: over stdio, or `--http PORT` over Streamable HTTP."""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def _schema(**props: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in props.items()},
    }


TOOLS = [
    types.Tool(name="echo", description="Say the text back.", input_schema=_schema(text="string")),
    types.Tool(
        name="search",
        description="Search the mail.",
        input_schema=_schema(query="string", limit="integer"),
    ),
    types.Tool(
        name="send", description="Send a mail.", input_schema=_schema(to="string", body="string")
    ),
    types.Tool(name="refund", description="Refund.", input_schema=_schema(amount="integer")),
    types.Tool(name="wipe", description="Wipe a disk.", input_schema=_schema(path="string")),
    types.Tool(
        name="priced", description="Costs what it is told.", input_schema=_schema(cost="string")
    ),
    types.Tool(name="undeclared", description="Not in the policy.", input_schema=_schema()),
]


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    args = params.arguments or {}
    said = json.dumps({"tool": params.name, "args": args}, sort_keys=True)
    meta = {"charter/cost_usd": args.get("cost")} if params.name == "priced" else None
    return types.CallToolResult(content=[types.TextContent(text=said)], _meta=meta)


SERVER: Server[Any] = Server("upstream", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await SERVER.run(read, write, SERVER.create_initialization_options())


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        import uvicorn

        app = SERVER.streamable_http_app()
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        anyio.run(main)
