"""A real service on a real store, served in-process and by uvicorn on loopback.

The store is a real SQLite file; a module that sets `STORES = BOTH` runs each of its
tests that use the harness on a real PostgreSQL database too (tests/pgserver.py), and
`CHARTER_TEST_STORES=all` (`make test-postgres`) runs every harness test on both."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import uvicorn
from starlette.testclient import TestClient

from api import commands as c
from api.cli_serve import GUARDED_HTTP
from api.http.app import create_app, open_service
from api.http.codes import CODES, AnyCode
from api.service import tokens
from api.service.core import Service
from api.service.resources import create_agent
from api.service.tokens import Principal
from policy import identities
from policy.store import Store
from policy.store.postgres import PostgresStore
from policy.store.sqlite import SqliteStore

POLICY = """
toolset mail {
  tool send(to: str, subject: str, body: str)
}
toolset billing {
  tool refund(amount: int, reason: str = "")
}
toolset vault {
  connection required
  tool read(key: str)
}
role mailer {
  allow mail.send where args.to endswith "@example.com"
}
role refunder {
  allow billing.refund
}
role vault-reader {
  allow vault.read
}
role manager {
  allow agents.*, roles.*, threads.*, identities.*, approvals.*, connections.*
  deny agents.delete
}
hook approve-big on billing.refund where args.amount > 50 {
  pause "a human approves refunds over 50"
}
profile support {
  roles mailer, refunder, manager, vault-reader
  hooks approve-big
  budget 10 usd per 24h
}
profile support-child {
  roles mailer, manager
  hooks approve-big
  budget 5 usd per 24h
}
profile careful {
  roles mailer, manager
  hooks default
}
profile narrow {
  roles mailer
  hooks none
}
profile wide {
  roles mailer, refunder
  hooks none
}
"""
# A profile whose agents' own `agents.update` pauses for a human (a 202 to their token).
REVIEWED = """
hook review-updates on agents.update {
  pause "a human reviews agent changes"
}
profile reviewed {
  roles manager
  hooks review-updates
}
"""


@dataclass
class Harness:
    service: Service
    admin: str
    decide: str
    agent_token: str
    identity: str
    db: Path | str  # the SQLite file, or the PostgreSQL database's URL
    key_file: Path | None = None  # (None: beside the SQLite file)

    @property
    def sqlite(self) -> SqliteStore:
        """The SQLite store; a test of its internals is skipped on PostgreSQL."""
        store = self.service.store
        if not isinstance(store, SqliteStore):
            pytest.skip("a test of the SQLite store's internals")
        return store

    @property
    def file(self) -> Path:
        """The SQLite file; a test of it is skipped on PostgreSQL, which has none."""
        if not isinstance(self.db, Path):
            pytest.skip("a test of the SQLite file")
        return self.db

    def auth(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.admin}"}

    def add_agent(self, agent_id: str, profile: str, **extra: Any) -> str:
        made = c.CreateAgent.model_validate(
            {"name": agent_id, "profile": profile, "identity": self.identity, **extra}
        )
        create_agent(self.service, Principal("t", "admin"), made, agent_id)
        return agent_id

    def token_for(self, agent_id: str) -> str:
        return tokens.issue(self.service.store, "agent", agent_id)[0]


STORES_ENV = "CHARTER_TEST_STORES"
BOTH = ("sqlite", "postgres")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`store_kind` (what the harness is made on): the module's STORES, else SQLite alone;
    for every module, both under CHARTER_TEST_STORES=all and one under `sqlite` or
    `postgres`."""
    if "store_kind" in metafunc.fixturenames:
        metafunc.parametrize(
            "store_kind", store_kinds(getattr(metafunc.module, "STORES", ("sqlite",)))
        )


def store_kinds(kinds: tuple[str, ...]) -> tuple[str, ...]:
    """The stores a module that asks for `kinds` runs on, as CHARTER_TEST_STORES says."""
    chosen = os.environ.get(STORES_ENV)
    if chosen == "all":
        return BOTH
    return (chosen,) if chosen in BOTH else kinds


def make_harness(tmp_path: Path, db: str | None = None) -> Harness:
    """On the SQLite file `tmp_path/charter.db`, or on the PostgreSQL database `db`."""
    key_file = None if db is None else tmp_path / "charter.key"
    where: Path | str = tmp_path / "charter.db" if db is None else db
    service = open_service(where, key_file=key_file)
    with service.store.atomic():
        service.upload([("policy.charter", POLICY)], "test")
    view, _ = identities.create(service.store, service.sealer, "test identity")
    harness = Harness(
        service,
        tokens.issue(service.store, "admin")[0],
        tokens.issue(service.store, "decide")[0],
        "",
        view["id"],
        where,
        key_file,
    )
    harness.add_agent("a1", "support")
    harness.agent_token = harness.token_for("a1")
    return harness


@pytest.fixture
def harness(tmp_path: Path, request: pytest.FixtureRequest, store_kind: str) -> Iterator[Harness]:
    db = request.getfixturevalue("pg_server").database() if store_kind == "postgres" else None
    made = make_harness(tmp_path, db)
    yield made
    made.service.store.close()  # stops its checkpoint thread


@pytest.fixture(scope="module", params=store_kinds(("sqlite",)))
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Harness, httpx.Client]]:
    """One harness and its live server for a whole module, for tests that change nothing
    (refusals, look-ups of what is not there): each starts none of its own."""
    postgres = request.param == "postgres"
    db = request.getfixturevalue("pg_server").database() if postgres else None
    made = make_harness(tmp_path_factory.mktemp("served"), db)
    with (
        LiveServer(create_app(made.service)) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        yield made, client
    made.service.store.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class LiveServer:
    """uvicorn on a free loopback port, in a thread of this process, with the HTTP
    protocol `charter serve` runs (api/http/connection.py) at its default limits."""

    def __init__(self, app: Any, http: Any = GUARDED_HTTP) -> None:
        self.port = free_port()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off",
            ws="none", access_log=False, http=http,
        )  # fmt: skip
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def live(harness: Harness) -> Iterator[httpx.Client]:
    with (
        LiveServer(create_app(harness.service)) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        yield client


@pytest.fixture(params=["uvicorn", "in-process"])
def client(request: pytest.FixtureRequest, harness: Harness) -> Iterator[Any]:
    """Both ways in: the same assertions against a real server and the in-process client."""
    app = create_app(harness.service)
    if request.param == "in-process":
        with TestClient(app, raise_server_exceptions=False) as test_client:
            yield test_client
    else:
        with LiveServer(app) as url, httpx.Client(base_url=url, timeout=30) as http:
            yield http


@contextmanager
def opened_again(db: Path | str, key_file: Path | None = None) -> Iterator[Service]:
    """A second service on the same database file, as another of `charter serve --workers
    2` (or a newer charter) opens it; its store is closed on leaving (its checkpoint
    thread stops)."""
    service = open_service(db, key_file=key_file)
    try:
        yield service
    finally:
        service.store.close()


def seen_elsewhere(service: Service, within: float = 2.0) -> Service:
    """`service`, once its store tells of another process's commit of what it caches (a
    revision, a noted change): SQLite's data version moves with that commit, PostgreSQL's
    change feed within a bound (policy/store/pgfeed.py), waited for here. Then its next
    `sync()` finds the change, on either store."""
    deadline = time.monotonic() + within
    while service.store.data_version() == service.read._version and time.monotonic() < deadline:
        time.sleep(0.002)
    return service


@pytest.fixture
def other(harness: Harness) -> Iterator[Service]:
    """Another process's service on the harness's file."""
    with opened_again(harness.db, harness.key_file) as service:
        yield service


# ---- what a test reads off a response ---------------------------------------------------

PROBLEM = "application/problem+json"
# the lists read in cursor pages (the decision log is read by `after_seq` instead)
LISTS = [
    "/v1/agents", "/v1/identities", "/v1/threads", "/v1/connections", "/v1/approvals",
    "/v1/revisions", "/v1/roles", "/v1/profiles", "/v1/hooks", "/v1/toolsets",
]  # fmt: skip


def paused_self_patch(
    client: Any, harness: Harness, policy: str, body: dict[str, Any]
) -> tuple[str, Any]:
    """Agent `rev` on profile `reviewed` (its own updates paused for a human) under
    `policy`: its `PATCH` of itself with `body`, sent with the `If-Match` of the agent as
    it was, which its policy paused (202). (That `ETag`, the 202.)"""
    admin = harness.auth()
    assert client.put("/v1/policy", content=policy, headers=admin).status_code == 201
    harness.add_agent("rev", "reviewed")
    rev = harness.auth(harness.token_for("rev"))
    etag = str(client.get("/v1/agents/rev", headers=admin).headers["etag"])
    paused = client.patch("/v1/agents/rev", json=body, headers={**rev, "if-match": etag})
    assert paused.status_code == 202, paused.text
    return etag, paused


class _Unlisted(logging.Handler):
    """Every problem code this process's writer found no status for in the live table
    (api.http.errors.status_of logs each one), as the log says it."""

    def __init__(self, seen: list[str]) -> None:
        super().__init__(logging.ERROR)
        self.seen = seen

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("problem code "):
            self.seen.append(record.getMessage())


UNLISTED_SEEN: list[str] = []
logging.getLogger("charter.http").addHandler(_Unlisted(UNLISTED_SEEN))


@pytest.fixture(autouse=True)
def every_code_maps_through_the_table() -> Iterator[None]:
    """Every problem answered in a test, by the in-process servers and uvicorn's thread,
    had its code in the live table (api/http/codes.py)."""
    before = len(UNLISTED_SEEN)
    yield
    assert UNLISTED_SEEN[before:] == [], "add these codes to api/http/codes.py"


def code_of(response: Any) -> tuple[int, str]:
    """The status and the problem's `code` ("" when there is no body, as for a 204)."""
    return response.status_code, response.json().get("code", "") if response.content else ""


def expect(response: Any, status: int, code: str) -> None:
    """A problem+json answer with this status and code, the status the live table gives
    the code (`http-error` carries starlette's own)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    assert response.json()["code"] == code
    entry = CODES.get(cast(AnyCode, code))
    assert entry is not None and entry.status in (status, None), (code, entry)


N = "<number>"


def with_number(doc: Any, number: str) -> bytes:
    """`doc` as JSON with its string `N` written as the JSON number `number`, as given (a
    number json.dumps would not write, or would write otherwise)."""
    return json.dumps(doc).replace(json.dumps(N), number).encode()


# ---- spies on the store ------------------------------------------------------------------


@contextmanager
def counting_transactions(harness: Harness) -> Iterator[list[int]]:
    """`[n]`: how many outermost transactions the harness's store opened meanwhile."""
    store = harness.service.store
    real = store.atomic
    count = [0]
    depth = [0]

    @contextmanager
    def atomic() -> Iterator[None]:  # counts outermost transactions only
        count[0] += depth[0] == 0
        depth[0] += 1
        try:
            with real():
                yield
        finally:
            depth[0] -= 1

    store.atomic = atomic  # type: ignore[method-assign]
    try:
        yield count
    finally:
        store.atomic = real  # type: ignore[method-assign]


def depth_spy(
    store: Store,
    real: Callable[..., Any],
    depths: list[Any],
    key: Callable[..., Any] | None = None,
) -> Callable[..., Any]:
    """`real`, appending the store's transaction depth at each call to `depths` (0:
    outside any transaction), or `(key(*args), depth)` when `key` is given."""
    assert isinstance(store, SqliteStore | PostgresStore)  # (each keeps its `_depth`)

    def call(*args: Any, **kwargs: Any) -> Any:
        depth = store._depth
        depths.append(depth if key is None else (key(*args, **kwargs), depth))
        return real(*args, **kwargs)

    return call


def slow_compiles(monkeypatch: pytest.MonkeyPatch, seconds: float) -> list[bool]:
    """Every compile of a stored revision takes `seconds` more; for each compile, whether
    it ran on an event loop's thread (holding up every request of its process)."""
    import asyncio

    import api.service.snapshots as snapshots

    real = snapshots.compile_workspace  # type: ignore[attr-defined]
    on_a_loop: list[bool] = []

    def slow(*args: Any, **kwargs: Any) -> Any:
        try:
            asyncio.get_running_loop()
            on_a_loop.append(True)
        except RuntimeError:
            on_a_loop.append(False)
        time.sleep(seconds)
        return real(*args, **kwargs)

    monkeypatch.setattr(snapshots, "compile_workspace", slow)
    return on_a_loop


def asgi(
    app: Any, harness: Harness, path: str, body: bytes = b"", *, root_path: str = "",
    method: str = "POST", messages: list[dict[str, Any]] | None = None,
    more: tuple[tuple[bytes, bytes], ...] = (),
) -> list[dict[str, Any]]:  # fmt: skip
    """One request straight through the app's ASGI interface, as the admin, its body
    `body` or the ASGI `messages` (`more`: more headers): the messages it sent."""
    headers = [(b"authorization", f"Bearer {harness.admin}".encode()),
               (b"content-type", b"application/json"), *more]  # fmt: skip
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": method, "scheme": "http", "path": root_path + path,
             "raw_path": (root_path + path).encode(), "root_path": root_path,
             "query_string": b"", "headers": headers, "client": ("127.0.0.1", 1),
             "server": ("127.0.0.1", 80)}  # fmt: skip
    pending = messages or [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent


# ---- a served process --------------------------------------------------------------------


def wait_ready(
    url: str,
    process: subprocess.Popen[Any],
    seconds: float,
    in_a_row: int = 1,
    path: str = "/readyz",
) -> None:
    """Until `path` answers 200 `in_a_row` times running (the server must not exit)."""
    deadline = time.monotonic() + seconds
    ready = 0
    while ready < in_a_row:
        try:
            ready = ready + 1 if httpx.get(f"{url}{path}").status_code == 200 else 0
        except httpx.TransportError:
            ready = 0
        assert process.poll() is None, "charter serve exited"
        assert time.monotonic() < deadline
        if ready < in_a_row:
            time.sleep(0.1)
