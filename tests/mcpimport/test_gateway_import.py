"""An imported toolset in front of its server: `charter import mcp` lists the test server
(server.py) live, the toolset goes into a real SQLite store with a role on its camelCase
arguments, and a real `charter gateway` process forwards the calls the policy allows to
that server (tool and argument names as the server spells them) and refuses the others."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from api import commands as c
from api.cli import main
from api.http.app import open_service
from api.service import tokens
from api.service.resources import create_agent
from api.service.tokens import Principal
from policy import identities
from tests.mcpimport import server

ROOT = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, str(Path(server.__file__))]

POLICY = """\
role triage {
  allow issue-tracker.getIssue where args.repoName == "charter" and args.owner.login != "eve"
  allow issue-tracker.x-request-id
}

profile helper {
  roles triage
  hooks none
}
"""


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def test_the_gateway_decides_the_imported_tools_by_the_servers_names(tmp_path: Path) -> None:
    toolset = tmp_path / "tracker.charter"
    assert main(["import", "mcp", "--command", shlex.join(SERVER), "-o", str(toolset)]) == 0
    db = tmp_path / "charter.db"
    service = open_service(db)
    try:
        with service.store.atomic():
            service.upload(
                [("tracker.charter", toolset.read_text("utf-8")), ("policy.charter", POLICY)],
                "test",
            )
        view, _ = identities.create(service.store, service.sealer, "import test")
        made = c.CreateAgent.model_validate(
            {"name": "bot", "profile": "helper", "identity": view["id"]}
        )
        create_agent(service, Principal("t", "admin"), made, "bot")
        token = tokens.issue(service.store, "agent", "bot")[0]
    finally:
        service.store.close()
    config = tmp_path / "gateway.toml"
    config.write_text(
        f'token = {json.dumps(token)}\n\n[[upstream]]\ntoolset = "issue-tracker"\n'
        f"command = {json.dumps(SERVER)}\n",
        encoding="utf-8",
    )
    gateway = StdioServerParameters(
        command=sys.executable,
        args=["-m", "charter", "gateway", "--config", str(config), "--db", str(db)],
        env={"PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )
    owner = {"login": "ann"}

    async def session() -> dict[str, Any]:
        async with (
            stdio_client(gateway) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            listed = sorted(tool.name for tool in (await client.list_tools()).tools)
            allowed = await client.call_tool("getIssue", {"repoName": "charter", "owner": owner})
            other = await client.call_tool("getIssue", {"repoName": "other", "owner": owner})
            eve = await client.call_tool(
                "getIssue", {"repoName": "charter", "owner": {"login": "eve"}}
            )
            lowered = await client.call_tool("getIssue", {"reponame": "charter", "owner": owner})
            merged = await client.call_tool(
                "getIssue", {"repoName": "charter", "owner": owner, "state": "merged"}
            )
            hyphen = await client.call_tool("x-request-id", {"requestId": "r1", "meta.trace": None})
            return {
                "listed": listed,
                "allowed": allowed,
                "refused": [other, eve, lowered, merged],
                "hyphen": hyphen,
            }

    got = anyio.run(session)
    assert got["listed"] == ["getIssue", "x-request-id"]
    assert not got["allowed"].is_error
    forwarded = json.loads(_text(got["allowed"]))
    assert forwarded == {
        "tool": "getIssue",
        "args": {
            "repoName": "charter",
            "owner": owner,
            "state": "open",
            "labels": [],
            "note": None,
            "pageSize": 20,
        },
    }
    for refused in got["refused"]:
        assert refused.is_error and _text(refused).startswith(
            "charter denied `issue-tracker.getIssue`"
        )
    assert "missing required argument `repoName`" in _text(got["refused"][2])
    assert 'enum["open", "closed"]' in _text(got["refused"][3])
    assert json.loads(_text(got["hyphen"])) == {
        "tool": "x-request-id",
        "args": {"requestId": "r1", "meta.trace": None},
    }
