"""`charter import mcp` end to end: a real MCP server (server.py, written with the SDK)
listed live over stdio and over Streamable HTTP, and from a saved `tools/list` answer;
the toolset it writes checks, is what `charter fmt` prints, and decides calls by the
names and the types the server gave."""

from __future__ import annotations

import io
import json
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from api.cli import main
from api.mcpimport.toolset import declaration
from engine.check import load
from engine.compile import compile_workspace
from engine.decision import Request
from engine.testing import run_tests
from grammar.fmt import format_file
from grammar.parser import parse
from tests.mcpimport import server

ROOT = Path(__file__).resolve().parents[2]
SERVER = Path(server.__file__)
COMMAND = shlex.join([sys.executable, str(SERVER)])

EXPECTED = """\
toolset issue-tracker {
  # Read one issue.
  tool getIssue(repoName: str, owner: { login: str, id?: int | null }, state: enum["open", "closed"] = "open", labels: list[{ name: str, color?: str }] = [], note: str | null = null, pageSize: int = 20)
  # `extra` is `map`: `anyOf` of several types (integer, string)
  tool searchIssues(query: str, extra?: map, tags: list[str] | null = null)
  # Hand-written.
  # `payload` is `map`: `oneOf` of several types (string, integer)
  tool x-request-id(requestId: str, payload?: map, "meta.trace"?: str | null)
}
"""
WARNINGS = [
    "warning: tool `searchIssues`: `extra` is declared `map`: `anyOf` of several types "
    "(integer, string)",
    "warning: tool `x-request-id`: `payload` is declared `map`: `oneOf` of several types "
    "(string, integer)",
]

POLICY = """\
role triage {
  allow issue-tracker.getIssue where args.repoName == "charter" and args.state == "open"
  allow issue-tracker.x-request-id where not has(args."meta.trace") or args."meta.trace" == null
}

profile dev {
  roles triage
}

test "imported tools" {
  profile dev
  expect allow issue-tracker.getIssue { repoName: "charter", owner: { login: "ann" } }
  expect deny issue-tracker.getIssue { repoName: "charter", owner: { login: "ann" }, state: "closed" }
  expect deny issue-tracker.getIssue { repoName: "other", owner: { login: "ann" } }
  expect invalid issue-tracker.getIssue { reponame: "charter", owner: { login: "ann" } }
  expect invalid issue-tracker.getIssue { repoName: "charter", owner: { login: "ann" }, state: "merged" }
  expect allow issue-tracker.x-request-id { requestId: "r1" }
  expect deny issue-tracker.x-request-id { requestId: "r1", "meta.trace": "t" }
}
"""


class Run(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def _charter(*args: str) -> Run:
    """`charter ARGS` in this process (the server it lists is a process of its own)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return Run(code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Run]:
    """The workspace the live import over stdio wrote its toolset into, and the run."""
    workspace = tmp_path_factory.mktemp("ws")
    done = _charter("import", "mcp", "--command", COMMAND, "-o", str(workspace / "tracker.charter"))
    (workspace / "policy.charter").write_text(POLICY, encoding="utf-8")
    return workspace, done


def test_a_live_server_over_stdio_becomes_a_toolset(
    live: tuple[Path, Run],
) -> None:
    workspace, done = live
    assert done.returncode == 0, done.stderr
    text = (workspace / "tracker.charter").read_text(encoding="utf-8")
    assert text == EXPECTED
    assert format_file(parse(text, "tracker.charter")) == text  # what `charter fmt` prints
    assert done.stderr.splitlines() == [
        *WARNINGS,
        f"wrote toolset `issue-tracker` (3 tools) to {workspace / 'tracker.charter'}",
    ]
    checked = _charter("check", str(workspace / "tracker.charter"))
    assert checked.returncode == 0 and checked.stdout.startswith("ok: 1 file, 1 toolset")
    assert _charter("fmt", "--check", str(workspace / "tracker.charter")).returncode == 0


def test_the_imported_tools_decide_by_their_names_and_types(
    live: tuple[Path, Run],
) -> None:
    workspace, done = live
    assert done.returncode == 0, done.stderr
    snapshot = compile_workspace(load([str(workspace)]))
    results = run_tests(snapshot)
    assert [r.failure for r in results if not r.passed] == []
    assert len(results) == 7

    def decide(args: Any, tool: str = "issue-tracker.getIssue") -> tuple[str, str]:
        decision = snapshot.decide(Request("dev", tool, args, None))
        return decision.effect, " ".join(r.message for r in decision.reasons)

    owner = {"login": "ann", "id": None}
    labels = [{"name": "bug"}, {"name": "ui", "color": "blue"}]
    call = {"repoName": "charter", "owner": owner, "labels": labels, "note": None}
    assert decide(call)[0] == "allow"
    assert decide({**call, "repoName": "Charter"})[0] == "deny"  # (case is kept: no match)
    effect, why = decide({**call, "owner": {"login": "ann", "admin": True}})
    assert effect == "deny" and "argument `owner`" in why
    effect, why = decide({**call, "labels": [{"name": "bug", "colour": "red"}]})
    assert effect == "deny" and "argument `labels`" in why
    effect, why = decide({**call, "owner": {"id": 3}})  # (a required field missing)
    assert effect == "deny" and "argument `owner`" in why
    effect, why = decide({**call, "state": "merged"})
    assert effect == "deny" and 'enum["open", "closed"]' in why
    effect, why = decide({**call, "pageSize": None})  # (`null` only where the type says)
    assert effect == "deny" and "argument `pageSize`" in why
    assert decide({"requestId": "r", "meta.trace": None}, "issue-tracker.x-request-id")[0] == (
        "allow"
    )
    assert decide({"requestId": "r", "payload": "a"}, "issue-tracker.x-request-id")[0] == "deny"


def test_a_saved_tool_list_imports_as_the_live_one(tmp_path: Path) -> None:
    listed = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in server.TOOLS]
    for document in (
        {"tools": listed},
        {"jsonrpc": "2.0", "id": 1, "result": {"tools": listed}},
        listed,
    ):
        saved = tmp_path / "tools.json"
        saved.write_text(json.dumps(document), encoding="utf-8")
        done = _charter("import", "mcp", "--file", str(saved), "--name", "issue-tracker")
        assert done.returncode == 0, done.stderr
        assert done.stdout == EXPECTED
        assert done.stderr.splitlines() == WARNINGS
    assert declaration("issue-tracker", listed).text == EXPECTED


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def http_server() -> Iterator[str]:
    port = _free_port()
    started = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port)], cwd=ROOT)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        started.terminate()
        started.wait(timeout=10)


def test_a_live_server_over_streamable_http_becomes_a_toolset(http_server: str) -> None:
    done = _charter("import", "mcp", "--url", http_server)
    assert done.returncode == 0, done.stderr
    url_line = f'  url "{http_server}"\n'
    head, rest = EXPECTED.split("\n", 1)
    assert done.stdout == f"{head}\n{url_line}{rest}"
    assert done.stderr.splitlines() == WARNINGS
