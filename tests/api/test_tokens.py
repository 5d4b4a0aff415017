"""Issuing tokens: `charter token` and `POST /v1/tokens` rely on `tokens.issue`'s one
check of the token's agent (an agent token names an agent that exists, no other token
names one), each saying it its own way: exit 2 and a line on stderr, or problem+json.
Anything refused issues nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from api.cli import main
from api.http.errors import status_of
from api.service import tokens
from api.service.errors import ServiceError
from tests.api.conftest import Harness, depth_spy


def _tokens(harness: Harness) -> list[dict[str, object]]:
    return [dict(row.body) for row in harness.service.store.scan("tokens")]


# (scope, agent) -> (status, code, what the detail and the CLI's message say)
REFUSED = [
    ("admin", "no-such-agent", 400, "agent-not-allowed", "not one of scope `admin`"),
    ("admin", "a1", 400, "agent-not-allowed", "not one of scope `admin`"),
    ("decide", "a1", 400, "agent-not-allowed", "not one of scope `decide`"),
    ("decide", "", 400, "agent-not-allowed", "not one of scope `decide`"),
    ("agent", "no-such-agent", 404, "agent-not-found", "agent `no-such-agent` not found"),
    ("agent", None, 400, "agent-required", "needs the id of an existing agent"),
    ("agent", "", 400, "agent-required", "needs the id of an existing agent"),
]


def _argv(scope: str, agent: str | None) -> list[str]:
    return ["--scope", scope, *(["--agent", agent] if agent is not None else [])]


@pytest.mark.parametrize(("scope", "agent", "status", "code", "says"), REFUSED)
def test_a_wrong_agent_is_refused_alike_by_the_cli_and_http(
    client: Any, harness: Harness, capsys: pytest.CaptureFixture[str],
    scope: str, agent: str | None, status: int, code: str, says: str,
) -> None:  # fmt: skip
    before = _tokens(harness)
    body: dict[str, Any] = {"scope": scope, **({"agent": agent} if agent is not None else {})}
    refused = client.post("/v1/tokens", json=body, headers=harness.auth())
    assert refused.headers["content-type"] == "application/problem+json"
    problem = refused.json()
    assert (refused.status_code, problem["code"]) == (status, code)
    assert says in problem["detail"]
    assert main(["token", "--db", str(harness.db), *_argv(scope, agent)]) == 2
    captured = capsys.readouterr()
    # the CLI says what the service said, and that nothing was issued
    assert captured.err == f"charter: {problem['detail']}; no token was issued\n"
    assert captured.out == ""
    assert _tokens(harness) == before


def test_each_scope_gets_a_token_of_that_scope(
    client: Any, harness: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    for scope, agent in (("admin", None), ("decide", None), ("agent", "a1")):
        assert main(["token", "--db", str(harness.db), *_argv(scope, agent)]) == 0
        made_by_cli = capsys.readouterr().out.strip()
        body = {"scope": scope, **({"agent": agent} if agent else {})}
        made = client.post("/v1/tokens", json=body, headers=harness.auth())
        assert made.status_code == 201, made.text
        assert (made.json()["scope"], made.json()["agent"]) == (scope, agent)
        for token in (made_by_cli, made.json()["token"]):
            doc = harness.service.store.get("tokens", tokens.digest(token)[:16])
            assert doc is not None and (doc["scope"], doc["agent"]) == (scope, agent)


def test_issue_is_the_one_check(harness: Harness) -> None:
    store = harness.service.store
    before = _tokens(harness)
    for scope, agent, status, code, _ in REFUSED:
        with pytest.raises(ServiceError) as refused:
            tokens.issue(store, scope, agent)
        assert (status_of(refused.value.code), refused.value.code) == (status, code)
    with pytest.raises(ValueError, match="`root` is not a token scope"):
        tokens.issue(store, "root")
    # an agent deleted since it was created gets no token
    harness.add_agent("gone", "narrow")
    store.delete("agents", "gone")
    with pytest.raises(ServiceError, match="agent `gone` not found"):
        tokens.issue(store, "agent", "gone")
    assert _tokens(harness) == before


def test_the_agent_is_checked_in_the_transaction_that_writes_its_token(
    harness: Harness,
) -> None:
    """Looked up inside the write transaction: another writer cannot delete the agent
    between the check and the token (the store's lock is held from one to the other)."""
    store = harness.service.store
    seen: list[int] = []  # the store's transaction depth at each `get`
    store.get = depth_spy(store, store.get, seen)  # type: ignore[method-assign]
    try:
        tokens.issue(store, "agent", "a1")
    finally:
        del store.get
    assert seen == [1]


def test_a_file_that_is_not_a_charter_database_gets_no_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A text file was `internal error (DatabaseError)`; an empty file became a new
    database holding a token nobody serves. Each is exit 2 and left as it was."""
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n" * 20)
    empty = tmp_path / "empty.db"
    empty.touch()
    bare = tmp_path / "bare.db"  # an SQLite file with no tables
    with sqlite3.connect(bare) as made:
        made.execute("CREATE TABLE gone (x)")
        made.execute("DROP TABLE gone")
    made.close()
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as made:
        made.execute("CREATE TABLE songs (title TEXT)")
    made.close()
    makes = "help: `charter serve --db {}` makes one on its first start\n"
    served = "help: `--db` is the file `charter serve --db` serves\n"
    expected = {
        notes: f"charter: `{notes}` is not a charter database: it is not an SQLite file\n" + served,
        empty: f"charter: `{empty}` is not a charter database: it is empty\n" + makes.format(empty),
        other: f"charter: `{other}` is not a charter database: it is another program's "
        "SQLite database (its tables: songs)\n" + served,
        tmp_path: f"charter: cannot open database `{tmp_path}`: is a directory\n",
    }
    before = {path: path.read_bytes() for path in (notes, empty, bare, other)}
    for path, says in expected.items():
        assert main(["token", "--db", str(path), "--scope", "admin"]) == 2
        captured = capsys.readouterr()
        assert (captured.out, captured.err) == ("", says)
    assert main(["token", "--db", str(bare), "--scope", "admin"]) == 2
    assert "is not a charter database: it is empty" in capsys.readouterr().err
    assert {path: path.read_bytes() for path in before} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "bare.db", "empty.db", "notes.txt", "other.db",
    ]  # fmt: skip


@pytest.mark.parametrize(("db", "says"), [("", "the path is empty"), (":memory:", "in memory")])
def test_an_empty_or_in_memory_path_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], db: str, says: str
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["token", "--db", db, "--scope", "admin"])
    assert info.value.code == 2 and says in capsys.readouterr().err


def test_a_database_it_cannot_write_to_issues_nothing(
    harness: Harness, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's refusal to write (a file the user may read but not write; not made here,
    as the tests may run as root, whom a file's mode does not stop) is said as such."""

    def read_only(*args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr("api.service.tokens.issue", read_only)
    before = _tokens(harness)
    assert main(["token", "--db", str(harness.db), "--scope", "admin"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"charter: cannot write to database `{harness.db}`: attempt to write a readonly "
        "database; no token was issued\n"
    )
    assert _tokens(harness) == before


# What `POST /v1/tokens` refuses in its body, given to `charter token`:
# (argv, the HTTP body as sent, its status and code, what the CLI says on stderr)
NOT_TAKEN = [
    (["--scope", "admin", "--name", "n" * 257], '{"scope": "admin", "name": "' + "n" * 257 + '"}',
     422, "invalid-body", "charter: --name is 257 characters long, more than 256; no token was "
     "issued\n"),
    (["--scope", "admin", "--name", "build \udcff"], '{"scope": "admin", "name": "build \\udcff"}',
     400, "malformed-json", "charter: --name is not UTF-8: byte `0xff` at column 7; no token was "
     "issued\nhelp: give it as UTF-8 text\n"),
    (["--scope", "agent", "--agent", "a\ud8001"], '{"scope": "agent", "agent": "a\\ud8001"}',
     400, "malformed-json", "charter: --agent is not UTF-8: lone surrogate `U+D800` at column 2; "
     "no token was issued\nhelp: give it as UTF-8 text\n"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "body", "status", "code", "says"), NOT_TAKEN)
def test_a_name_or_agent_the_service_refuses_gets_no_token_from_the_cli(
    client: Any, harness: Harness, capsys: pytest.CaptureFixture[str],
    argv: list[str], body: str, status: int, code: str, says: str,
) -> None:  # fmt: skip
    """A name longer than `POST /v1/tokens` takes was stored; a name or an agent that is
    not UTF-8 (a byte of the command line that is not, which Python gives as a lone
    surrogate) was an internal error. Each is exit 2 now, and nothing is issued."""
    before = _tokens(harness)
    headers = {**harness.auth(), "content-type": "application/json"}
    refused = client.post("/v1/tokens", content=body.encode(), headers=headers)
    assert (refused.status_code, refused.json()["code"]) == (status, code)
    assert main(["token", "--db", str(harness.db), *argv]) == 2
    assert capsys.readouterr() == ("", says)
    assert _tokens(harness) == before


def test_a_name_of_the_longest_length_is_taken(
    client: Any, harness: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "n" * tokens.MAX_NAME
    assert main(["token", "--db", str(harness.db), "--scope", "admin", "--name", name]) == 0
    made = tokens.digest(capsys.readouterr().out.strip())[:16]
    assert harness.service.store.get("tokens", made)["name"] == name  # type: ignore[index]
    response = client.post(
        "/v1/tokens", json={"scope": "admin", "name": name}, headers=harness.auth()
    )
    assert response.status_code == 201, response.text
