"""`charter gateway` end to end: a real MCP server written with the SDK (tests/gateway/
upstream.py) behind a real `charter gateway` process, driven by the SDK's client session
over stdio; decisions in-process against a real SQLite store, an approval made over HTTP
by a real server on the same database while the call waits, and a new revision uploaded
while the session runs."""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp.client._memory import InMemoryTransport
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared._httpx_utils import create_mcp_http_client

from api import commands as c
from api.cli import main
from api.gateway.config import ConfigError, load, parse
from api.gateway.local import LocalDecider
from api.gateway.proxy import Connected, Gateway, ShadowReport, changes_of, list_all, refusal
from api.gateway.remote import RemoteDecider
from api.http.app import create_app, open_service
from api.service import tokens
from api.service.core import Service
from api.service.resources import create_agent
from api.service.tokens import Principal
from policy import identities
from tests.api.conftest import LiveServer, free_port
from tests.gateway import upstream

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = Path(__file__).with_name("upstream.py")

POLICY = """
toolset demo {
  tool echo(text: str)
  tool search(query: str, limit: int = 20)
  tool send(to: str, body: str = "")
  tool refund(amount: int)
  tool wipe(path: str)
}
role worker {
  allow demo.echo, demo.search, demo.refund
  allow demo.send where args.to endswith "@example.com"
}
hook clamp on demo.search where args.limit > 20 {
  rewrite args.limit = 20
}
hook approve-big on demo.refund where args.amount > 50 {
  pause "a person approves refunds over 50"
}
profile helper {
  roles worker
  hooks clamp, approve-big
}
"""
# The next revision lets the agent wipe, too: its listing changes.
WIDER = POLICY.replace("allow demo.echo,", "allow demo.wipe, demo.echo,")


class World:
    def __init__(self, tmp: Path) -> None:
        self.db = tmp / "charter.db"
        self.service: Service = open_service(self.db)
        with self.service.store.atomic():
            self.service.upload([("policy.charter", POLICY)], "test")
        view, _ = identities.create(self.service.store, self.service.sealer, "gateway test")
        made = c.CreateAgent.model_validate(
            {"name": "bot", "profile": "helper", "identity": view["id"]}
        )
        create_agent(self.service, Principal("t", "admin"), made, "bot")
        self.admin = tokens.issue(self.service.store, "admin")[0]
        self.agent_token = tokens.issue(self.service.store, "agent", "bot")[0]
        self.config = tmp / "gateway.toml"

    def write_config(self, **extra: Any) -> Path:
        lines = [f"{k} = {json.dumps(v)}" for k, v in extra.items()]
        lines += [
            "",
            "[[upstream]]",
            'toolset = "demo"',
            f"command = {json.dumps([sys.executable, str(UPSTREAM)])}",
        ]
        self.config.write_text("\n".join(lines) + "\n")
        return self.config

    def gateway(self) -> StdioServerParameters:
        return StdioServerParameters(
            command=sys.executable,
            args=["-m", "charter", "gateway", "--config", str(self.config), "--db", str(self.db)],
            env={"PYTHONPATH": str(ROOT)},
            cwd=str(ROOT),
        )


@contextmanager
def served(world: World) -> Iterator[str]:
    """A live Charter server on the world's database (another service of its own, as
    `charter serve` would be); its URL."""
    service = open_service(world.db)
    try:
        with LiveServer(create_app(service)) as url:
            yield url
    finally:
        service.store.close()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    made = World(tmp_path)
    yield made
    made.service.store.close()


def said(result: types.CallToolResult) -> Any:
    """What the upstream answered (the call and the arguments it was given)."""
    assert not result.is_error, result
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return json.loads(block.text)


def error_text(result: types.CallToolResult) -> str:
    assert result.is_error
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def decide_when_asked(world: World, url: str, verb: str, body: dict[str, Any]) -> None:
    """Approve or reject (`verb`) the first pending approval, over HTTP, once there is one."""
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        auth = {"Authorization": f"Bearer {world.admin}"}
        while True:
            found = (await http.get("/v1/approvals?status=pending", headers=auth)).json()
            if found["items"]:
                approval = found["items"][0]["id"]
                path = f"/v1/approvals/{approval}/{verb}"
                answer = await http.post(path, headers=auth, json=body)
                assert answer.status_code == 200, answer.text
                return
            await anyio.sleep(0.05)


def test_a_session_through_the_gateway(world: World) -> None:
    world.write_config(token=world.agent_token, pause_wait=20, watch=0.2)
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async def session(url: str) -> None:
        async with (
            stdio_client(world.gateway()) as (read, write),
            ClientSession(read, write, message_handler=on_message) as client,
        ):
            await client.initialize()
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            # denied (`wipe`) and undeclared tools are not shown; a narrowed tool says why
            assert sorted(listed) == ["echo", "refund", "search", "send"]
            assert listed["echo"].description == "Say the text back."
            send = listed["send"].description or ""
            assert send.startswith("Send a mail.\n\nCharter: Allowed only when: to endswith")
            assert "wait for a person's approval" in (listed["refund"].description or "")

            # allowed: forwarded with the decided arguments (a default, a rewrite)
            assert said(await client.call_tool("search", {"query": "q"})) == {
                "tool": "search", "args": {"query": "q", "limit": 20},
            }  # fmt: skip
            assert said(await client.call_tool("search", {"query": "q", "limit": 90}))["args"] == {
                "query": "q",
                "limit": 20,
            }
            # denied: a tool error with the reasons, not forwarded
            refused = error_text(await client.call_tool("send", {"to": "x@evil.test"}))
            assert refused.startswith("charter denied `demo.send`")
            assert "charter denied `demo.wipe`" in error_text(
                await client.call_tool("wipe", {"path": "/"})
            )
            # paused: waits while a person approves over HTTP, then runs
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(decide_when_asked, world, url, "approve", {})
                ran = said(await client.call_tool("refund", {"amount": 80}))
            assert ran == {"tool": "refund", "args": {"amount": 80}}
            # rejected while it waits: a tool error with the person's reason
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(decide_when_asked, world, url, "reject", {"reason": "too much"})
                refused = error_text(await client.call_tool("refund", {"amount": 90}))
            assert refused == "charter denied `demo.refund`: rejected: too much"

            # a new revision that changes the listing: list_changed, then the new listing
            with world.service.store.atomic():
                world.service.upload([("policy.charter", WIDER)], "test")
            with anyio.fail_after(10):
                await changed.wait()
            assert "wipe" in {tool.name for tool in (await client.list_tools()).tools}
            assert said(await client.call_tool("wipe", {"path": "/tmp"}))["tool"] == "wipe"

    with served(world) as url:
        anyio.run(session, url)
    # every call was decided and logged, the denied ones too
    rows = world.service.store.read_decisions(0, 100, 1 << 20)
    log = [json.loads(row) for _, row in rows if isinstance(row, bytes)]
    assert [(row["tool"], row["effect"]) for row in log] == [
        ("demo.search", "allow"), ("demo.search", "allow"), ("demo.send", "deny"),
        ("demo.wipe", "deny"), ("demo.refund", "pause"),
        ("demo.refund", "allow"),  # (the approval's re-check)
        ("demo.refund", "pause"), ("demo.wipe", "allow"),
    ]  # fmt: skip
    assert {row["agent"] for row in log} == {"bot"}


def test_a_paused_call_not_approved_in_time_says_it_awaits_approval(world: World) -> None:
    config = parse(
        {"agent": "bot", "pause_wait": 0.2, "upstream": [{"toolset": "demo", "command": ["x"]}]}
    )
    decider = LocalDecider(world.service)
    gateway = Gateway(config, decider, [])

    async def call() -> None:
        turn = await decider.admit("bot")
        paused = await decider.decide(turn, "demo.refund", {"amount": 80})
        assert paused.effect == "pause" and paused.approval is not None
        started = time.monotonic()
        still = await gateway.await_approval(paused, {"amount": 80})
        assert still == paused and time.monotonic() - started >= 0.2
        assert refusal("demo.refund", still) == (
            f"`demo.refund` awaits a person's approval (approval `{paused.approval}`) and did "
            "not run: hook `approve-big`: a person approves refunds over 50"
        )

    anyio.run(call)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"agent": "a", "token": "t", "upstream": []}, "gives both `agent` and `token`"),
        ({"agent": "a"}, "has no upstream"),
        ({"agent": "a", "upstream": [{"toolset": "Demo", "command": ["x"]}]}, "name a toolset"),
        ({"agent": "a", "upstream": [{"toolset": "demo"}]}, "give `command` or `url`"),
        ({"agent": "a", "upstream": [{"toolset": "d", "command": "x"}]}, "a list of non-empty"),
        ({"agent": "a", "upstream": [{"toolset": "d", "url": "ftp://x"}]}, "an http:// or"),
        ({"agent": "a", "agnet": "b", "upstream": []}, "unknown setting `agnet`"),
        ({"agent": "a", "pause_wait": -1, "upstream": []}, "`pause_wait` must be seconds"),
        ({"token": 5, "upstream": []}, "`token` must be a non-empty string"),
    ],
)
def test_a_configuration_that_is_not_one_is_refused(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(doc)
    assert message in caught.value.message
    assert "5" not in caught.value.message or "token" not in message  # (a secret's value)


def test_the_configuration_files(tmp_path: Path) -> None:
    toml = tmp_path / "g.toml"
    toml.write_text('agent = "bot"\n[[upstream]]\ntoolset = "demo"\nurl = "http://h/mcp"\n')
    assert load(toml).upstreams[0].url == "http://h/mcp"
    js = tmp_path / "g.json"
    js.write_text(json.dumps({"token": "s3cret", "upstream": [{"toolset": "d", "command": ["x"]}]}))
    loaded = load(js)
    assert loaded.token == "s3cret" and "s3cret" not in repr(loaded)
    js.write_text("{")
    with pytest.raises(ConfigError, match="is not JSON"):
        load(js)


def wait_listening(port: int, within: float = 15.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listens on port {port}")


@contextmanager
def process(*args: str) -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env)
    try:
        yield started
    finally:
        started.terminate()
        try:
            started.wait(10)
        except subprocess.TimeoutExpired:
            started.kill()
            started.wait()


def test_over_http_as_the_bearer_tokens_agent(world: World) -> None:
    """Streamable HTTP at both ends: the upstream at a URL, the client at the gateway's
    port with an agent's bearer token, which the session acts for (the configuration
    names no agent)."""
    upstream_port, gateway_port = free_port(), free_port()
    bearer = {"Authorization": f"Bearer {world.agent_token}"}
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async def session(url: str) -> None:
        async with (
            create_mcp_http_client(headers=bearer) as http,
            streamable_http_client(f"http://127.0.0.1:{gateway_port}/mcp", http_client=http) as (
                read,
                write,
            ),
            ClientSession(read, write, message_handler=on_message) as client,
        ):
            await client.initialize()
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert sorted(listed) == ["echo", "refund", "search", "send"]
            assert said(await client.call_tool("search", {"query": "q", "limit": 90}))["args"] == {
                "query": "q",
                "limit": 20,
            }
            refused = error_text(await client.call_tool("send", {"to": "x@evil.test"}))
            assert refused.startswith("charter denied `demo.send`")
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(decide_when_asked, world, url, "approve", {})
                ran = said(await client.call_tool("refund", {"amount": 80}))
            assert ran == {"tool": "refund", "args": {"amount": 80}}
            with world.service.store.atomic():
                world.service.upload([("policy.charter", WIDER)], "test")
            with anyio.fail_after(10):
                await changed.wait()
            assert "wipe" in {tool.name for tool in (await client.list_tools()).tools}

    with served(world) as url:
        world.config.write_text(
            'pause_wait = 20\nwatch = 0.2\n[[upstream]]\ntoolset = "demo"\n'
            f'url = "http://127.0.0.1:{upstream_port}/mcp"\n'
        )
        with process(str(UPSTREAM), "--http", str(upstream_port)):
            wait_listening(upstream_port)
            gateway = ("-m", "charter", "gateway", "--config", str(world.config))
            with process(*gateway, "--db", str(world.db), "--port", str(gateway_port)):
                wait_listening(gateway_port)
                anyio.run(session, url)


def test_shadow_mode_forwards_every_call_and_reports_the_refused(world: World) -> None:
    """In one process: the upstream and the gateway's server each reached by the SDK's
    in-memory transport (the decisions, on the real store)."""
    config = parse(
        {"agent": "bot", "shadow": True, "upstream": [{"toolset": "demo", "command": ["x"]}]}
    )
    out = io.StringIO()

    async def session() -> None:
        async with (
            InMemoryTransport(upstream.SERVER) as (up_read, up_write),
            ClientSession(up_read, up_write) as up,
        ):
            await up.initialize()
            connected = Connected(config.upstreams[0], up, await list_all(up))
            gateway = Gateway(config, LocalDecider(world.service), [connected], ShadowReport(out))
            async with (
                InMemoryTransport(gateway.server) as (read, write),
                ClientSession(read, write) as client,
            ):
                await client.initialize()
                # what the policy denies and pauses runs, as sent
                assert said(await client.call_tool("wipe", {"path": "/"}))["args"] == {"path": "/"}
                ran = said(await client.call_tool("refund", {"amount": 80}))
                assert ran["args"] == {"amount": 80}
                assert said(await client.call_tool("echo", {"text": "hi"}))["tool"] == "echo"

    anyio.run(session)
    report = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["shadow"], line["tool"]) for line in report] == [
        ("deny", "demo.wipe"), ("pause", "demo.refund"),
    ]  # fmt: skip
    assert report[1]["reasons"] == ["hook `approve-big`: a person approves refunds over 50"]
    rows = world.service.store.read_decisions(0, 100, 1 << 20)
    logged = [json.loads(row) for _, row in rows if isinstance(row, bytes)]
    assert [row["id"] for row in logged][:2] == [line["decision"] for line in report]
    assert [row["effect"] for row in logged] == ["deny", "pause", "allow"]


def test_deciding_against_a_charter_servers_url(world: World) -> None:
    """The gateway asking a live Charter server (`server` in the configuration) for each
    decision; the upstream and the gateway's server reached in-process by the SDK's
    in-memory transport, the gateway following the revisions as it does when serving."""
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async def session(url: str) -> None:
        config = parse(
            {"agent": "bot", "pause_wait": 20, "watch": 0.1, "server": url,
             "server_token": world.admin, "upstream": [{"toolset": "demo", "command": ["x"]}]}
        )  # fmt: skip
        decider = RemoteDecider(url, world.admin)
        async with (
            InMemoryTransport(upstream.SERVER) as (up_read, up_write),
            ClientSession(up_read, up_write) as up,
        ):
            await up.initialize()
            gateway = Gateway(
                config, decider, [Connected(config.upstreams[0], up, await list_all(up))]
            )
            async with (
                anyio.create_task_group() as tasks,
                InMemoryTransport(gateway.server) as (read, write),
                ClientSession(read, write, message_handler=on_message) as client,
            ):
                tasks.start_soon(gateway.watch)
                await client.initialize()
                listed = {tool.name: tool for tool in (await client.list_tools()).tools}
                assert sorted(listed) == ["echo", "refund", "search", "send"]
                assert said(await client.call_tool("search", {"query": "q", "limit": 90}))[
                    "args"
                ] == {"query": "q", "limit": 20}
                refused = error_text(await client.call_tool("send", {"to": "x@evil.test"}))
                assert refused.startswith("charter denied `demo.send`")
                async with anyio.create_task_group() as approving:
                    approving.start_soon(decide_when_asked, world, url, "approve", {})
                    ran = said(await client.call_tool("refund", {"amount": 80}))
                assert ran == {"tool": "refund", "args": {"amount": 80}}
                with world.service.store.atomic():
                    world.service.upload([("policy.charter", WIDER)], "test")
                with anyio.fail_after(10):
                    await changed.wait()
                assert "wipe" in {tool.name for tool in (await client.list_tools()).tools}
                tasks.cancel_scope.cancel()
        await decider.close()

    with served(world) as url:
        anyio.run(session, url)


def test_the_command_refuses_what_cannot_serve(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each refused before anything starts: exit 2 and a line that says why."""
    upstream_table = '[[upstream]]\ntoolset = "demo"\ncommand = ["x"]\n'
    cases = [
        ("", [], "names no agent"),
        ('agent = "bot"\n', ["--db", str(tmp_path / "none.db")], "no database at"),
        (
            f'agent = "bot"\nserver = "http://127.0.0.1:1"\nserver_token = "{world.admin}"\n',
            ["--db", str(world.db)],
            "give `--db` or a `server`",
        ),
        ('agent = "bot"\nshadow = "yes"\n', [], "`shadow` must be true or false"),
        ('agent = "bot"\n', ["--db", "postgresql://u@127.0.0.1:1/x"], "needs `--key-file PATH`"),
    ]
    missing = '[[upstream]]\ntoolset = "demo"\ncommand = ["/nonexistent/upstream"]\n'
    cases.append(('agent = "bot"\n', ["--db", str(world.db)], "cannot start the upstream"))
    for text, extra, message in cases:
        table = missing if message.startswith("cannot start") else upstream_table
        world.config.write_text(text + table)
        capsys.readouterr()
        assert main(["gateway", "--config", str(world.config), *extra]) == 2
        printed = capsys.readouterr()
        assert message in printed.err
        assert world.admin not in printed.err + printed.out


def test_a_turn_that_ended_is_replaced_and_the_call_decided_on_the_new_one(
    world: World,
) -> None:
    """A session's turn runs for the store's turn lifetime; a call after it ends is
    decided on a new turn (on the latest revision), not refused."""
    config = parse({"agent": "bot", "upstream": [{"toolset": "demo", "command": ["x"]}]})
    world.service.turn_lifetime_ms = 300

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
                ClientSession(read, write) as client,
            ):
                await client.initialize()
                assert said(await client.call_tool("echo", {"text": "a"}))["tool"] == "echo"
                first = gateway.sessions["stdio"].turn
                await anyio.sleep(0.35)
                assert said(await client.call_tool("echo", {"text": "b"}))["tool"] == "echo"
                assert gateway.sessions["stdio"].turn.id != first.id

    anyio.run(session)
    rows = world.service.store.read_decisions(0, 100, 1 << 20)
    logged = [json.loads(row) for _, row in rows if isinstance(row, bytes)]
    assert [row["effect"] for row in logged] == ["allow", "allow"]
    assert len({row["turn"] for row in logged}) == 2


def test_an_upstream_whose_tools_change_is_listed_again(world: World) -> None:
    """An upstream that says its tools changed (here: once `grow` is called, it serves
    `search` too) is listed again, and a session whose listing that changes is told."""
    tools = [
        types.Tool(name="echo", input_schema={"type": "object"}),
        types.Tool(name="grow", input_schema={"type": "object"}),
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(tools))

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tools.append(types.Tool(name="search", input_schema={"type": "object"}))
        await ctx.session.send_tool_list_changed()
        return types.CallToolResult(content=[types.TextContent(text="grown")])

    growing: Server[Any] = Server("growing", on_list_tools=list_tools, on_call_tool=call_tool)
    config = parse(
        {"agent": "bot", "watch": 0.1, "upstream": [{"toolset": "demo", "command": ["x"]}]}
    )
    told = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            told.set()

    async def session() -> None:
        holder: list[Connected] = []
        async with (
            InMemoryTransport(growing) as (up_read, up_write),
            ClientSession(up_read, up_write, message_handler=changes_of(holder)) as up,
        ):
            await up.initialize()
            holder.append(Connected(config.upstreams[0], up, await list_all(up)))
            gateway = Gateway(config, LocalDecider(world.service), holder)
            async with (
                anyio.create_task_group() as tasks,
                InMemoryTransport(gateway.server) as (read, write),
                ClientSession(read, write, message_handler=on_message) as client,
            ):
                tasks.start_soon(gateway.watch)
                await client.initialize()
                assert [tool.name for tool in (await client.list_tools()).tools] == ["echo"]
                await up.call_tool("grow", {})  # (the upstream's own client: not decided)
                with anyio.fail_after(10):
                    await told.wait()
                listed = [tool.name for tool in (await client.list_tools()).tools]
                assert listed == ["echo", "search"]
                tasks.cancel_scope.cancel()

    anyio.run(session)


def test_the_documented_configuration_is_one() -> None:
    """docs/operations.md's example configuration reads as printed, and every setting it
    shows in a comment is one the gateway takes."""
    doc = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    section = doc[doc.index("## The MCP gateway") :]
    block = section[
        section.index("```toml\n") + 8 : section.index("```", section.index("```toml") + 7)
    ]
    assert parse(tomllib.loads(block)).agent == "support-bot"
    every = tomllib.loads(re.sub(r"^# (\w+ = )", r"\1", block, flags=re.MULTILINE))
    with pytest.raises(ConfigError, match="both `agent` and `token`"):
        parse(every)  # (every key is known: parse would refuse an unknown one first)
    every.pop("token")
    with pytest.raises(ConfigError, match="give `command` or `url`"):
        parse(every)
