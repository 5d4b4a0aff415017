"""An MCP server for the importer's tests, written with the SDK's low-level server. Most
tools' schemas are pydantic's, as the SDK's `MCPServer` derives them from a signature
(camelCase names, enums from `Literal`, nested models as `$ref`s into `$defs`, `X | None`,
lists of models, a union of two types); one is hand-written (a hyphenated tool name, a
dotted argument name, a `oneOf`, `"type": [..., "null"]`). A call answers with the tool's
name and arguments. Run as a program: over stdio, or `--http PORT` over Streamable HTTP."""

from __future__ import annotations

import json
import sys
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from pydantic import BaseModel


class Owner(BaseModel):
    login: str
    id: int | None = None


class Label(BaseModel):
    name: str
    color: str = "red"


class GetIssue(BaseModel):
    repoName: str
    owner: Owner
    state: Literal["open", "closed"] = "open"
    labels: list[Label] = []
    note: str | None = None
    pageSize: int = 20


class SearchIssues(BaseModel):
    query: str
    extra: int | str = 1
    tags: list[str] | None = None


HAND_WRITTEN = {
    "type": "object",
    "properties": {
        "requestId": {"type": "string"},
        "payload": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        "meta.trace": {"type": ["string", "null"]},
    },
    "required": ["requestId"],
}

TOOLS = [
    types.Tool(
        name="getIssue",
        description="Read one issue.\nThe second line is not imported.",
        input_schema=GetIssue.model_json_schema(),
    ),
    types.Tool(name="searchIssues", input_schema=SearchIssues.model_json_schema()),
    types.Tool(name="x-request-id", description="Hand-written.", input_schema=HAND_WRITTEN),
]


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    said = json.dumps({"tool": params.name, "args": params.arguments or {}}, sort_keys=True)
    return types.CallToolResult(content=[types.TextContent(text=said)])


SERVER: Server[Any] = Server("Issue Tracker", on_list_tools=list_tools, on_call_tool=call_tool)


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
