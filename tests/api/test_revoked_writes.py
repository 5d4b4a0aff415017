"""A token revoked while its request is in flight writes nothing, whatever the token and
whatever the write: each write transaction reads the request's token again as it begins
(api.service.tokens.check_writes). An agent's management request did; an admin's (and a
`decide` token's turn) went on to write under a token another worker had revoked."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.requests import Request

from api.http import auth
from api.http.app import create_app
from api.service import tokens
from api.service.core import Service
from api.service.tokens import Principal
from tests.api.conftest import POLICY, Harness, code_of

# A request: (method, path, keyword arguments of the client's `request`).
Sent = tuple[str, str, dict[str, Any]]
ROLE = "role extra {\n  allow mail.send\n}\n"
REFUND = {"agent": "a1", "tool": "billing.refund", "args": {"amount": 80}}  # (paused)


def _identity(client: Any, harness: Harness) -> str:
    made = client.post("/v1/identities", json={"label": "spare"}, headers=harness.auth())
    return str(made.json()["id"])


def _etag(client: Any, harness: Harness, path: str) -> dict[str, str]:
    return {"If-Match": client.get(path, headers=harness.auth()).headers["etag"]}


def _role(client: Any, harness: Harness) -> dict[str, str]:
    made = client.post("/v1/roles", json={"name": "extra", "source": ROLE}, headers=harness.auth())
    assert made.status_code == 201, made.text
    return {"If-Match": made.headers["etag"]}


def _pending(client: Any, harness: Harness) -> str:
    paused = client.post("/v1/decisions", json=REFUND, headers=harness.auth())
    assert paused.json()["effect"] == "pause", paused.text
    return str(paused.json()["approval_id"])


# Each write an admin token (or, for a turn, a `decide` token) makes over HTTP, as made
# after its set-up: through `manage` (`guarded` with and without `If-Match`, a role's
# own `views.CONDITIONAL`, an approval), a policy upload, a token's issue and revocation.
WRITES: dict[str, tuple[str, Callable[[Any, Harness], Sent]]] = {
    "identities.create": ("admin", lambda c, h: ("POST", "/v1/identities", {"json": {}})),
    "identities.import": ("admin", lambda c, h: (
        "POST", "/v1/identities/import", {"json": {"seed": "33" * 32}})),
    "identities.update": ("admin", lambda c, h: (
        "PATCH", f"/v1/identities/{_identity(c, h)}", {"json": {"label": "renamed"}})),
    "identities.delete": ("admin", lambda c, h: (
        "DELETE", f"/v1/identities/{_identity(c, h)}", {})),
    "agents.create": ("admin", lambda c, h: (
        "POST", "/v1/agents",
        {"json": {"name": "kid", "profile": "narrow", "identity": h.identity}})),
    "agents.update": ("admin", lambda c, h: (
        "PATCH", "/v1/agents/a1", {"json": {"name": "renamed"}})),
    "agents.update If-Match": ("admin", lambda c, h: (
        "PATCH", "/v1/agents/a1",
        {"json": {"name": "renamed"}, "headers": _etag(c, h, "/v1/agents/a1")})),
    "agents.delete": ("admin", lambda c, h: (
        "DELETE", f"/v1/agents/{h.add_agent('gone', 'narrow')}", {})),
    "threads.create": ("admin", lambda c, h: ("POST", "/v1/threads", {"json": {"agent": "a1"}})),
    "connections.create": ("admin", lambda c, h: (
        "POST", "/v1/connections",
        {"json": {"name": "vault", "toolset": "vault", "credential": "s3cret"}})),
    "roles.create": ("admin", lambda c, h: (
        "POST", "/v1/roles", {"json": {"name": "extra", "source": ROLE}})),
    "roles.update If-Match": ("admin", lambda c, h: (
        "PATCH", "/v1/roles/extra",
        {"json": {"source": ROLE.replace("mail.send", "billing.refund")},
         "headers": _role(c, h)})),
    "roles.delete If-Match": ("admin", lambda c, h: (
        "DELETE", "/v1/roles/extra", {"headers": _role(c, h)})),
    "PUT /v1/policy": ("admin", lambda c, h: ("PUT", "/v1/policy", {"content": POLICY + ROLE})),
    "PUT /v1/policy If-Match": ("admin", lambda c, h: (
        "PUT", "/v1/policy", {"content": POLICY + ROLE, "headers": _etag(c, h, "/v1/policy")})),
    "approvals.approve": ("admin", lambda c, h: (
        "POST", f"/v1/approvals/{_pending(c, h)}/approve", {})),
    "approvals.reject": ("admin", lambda c, h: (
        "POST", f"/v1/approvals/{_pending(c, h)}/reject", {"json": {"reason": "no"}})),
    "POST /v1/tokens": ("admin", lambda c, h: ("POST", "/v1/tokens", {"json": {"scope": "decide"}})),
    "DELETE /v1/tokens": ("admin", lambda c, h: (
        "DELETE", f"/v1/tokens/{tokens.digest(h.decide)[:16]}", {})),
    "POST /v1/turns": ("decide", lambda c, h: ("POST", "/v1/turns", {"json": {"agent": "a1"}})),
}  # fmt: skip


def _stored(db: Path, token_id: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the database, read through a connection of its own:
    all but the revoked token's row and its revocation's note in the change feed."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as reader:
        tables = [name for (name,) in reader.execute("SELECT name FROM sqlite_master "
                                                     "WHERE type = 'table'")]  # fmt: skip
        found = {table: sorted(reader.execute(f"SELECT * FROM {table}"), key=repr)
                 for table in tables}  # fmt: skip
    found["documents"] = [row for row in found["documents"] if row[1:3] != ("tokens", token_id)]
    found["changes"] = [row for row in found["changes"] if row[1:3] != ("token", token_id)]
    return found


def revoked_once_authorized(monkeypatch: pytest.MonkeyPatch, other: Service, token_id: str) -> None:
    """The request whose token is `token_id` finds it revoked by another worker (`other`,
    on a connection of its own) as soon as it is authorized: the earliest moment of the
    window (its body read, its checks, its policy compiled) before its write transaction."""
    real = auth.principal

    def authorized_then_revoked(request: Request) -> Principal:
        actor = real(request)
        if actor.token_id == token_id:
            assert tokens.revoke(other, [token_id])
        return actor

    monkeypatch.setattr(auth, "principal", authorized_then_revoked)


@pytest.mark.parametrize("write", list(WRITES))
def test_a_token_revoked_during_its_write_request_writes_nothing(
    write: str, client: Any, harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 401 `unauthorized`, and the database as it was: not a row more or less (the log,
    the documents, the revisions), but for the revoked token itself. The same request
    under a token still there then writes."""
    scope, request = WRITES[write]
    method, path, sent = request(client, harness)
    doomed, doc = tokens.issue(harness.service.store, scope)
    before = _stored(harness.file, doc.id)
    revoked_once_authorized(monkeypatch, other, doc.id)
    headers = {**sent.get("headers", {}), **harness.auth(doomed)}
    refused = client.request(method, path, **{**sent, "headers": headers})
    assert code_of(refused) == (401, "unauthorized"), refused.text
    assert _stored(harness.file, doc.id) == before
    live = harness.auth(harness.admin if scope == "admin" else harness.decide)
    written = client.request(method, path, **{**sent, "headers": {**sent.get("headers", {}),
                                                                  **live}})  # fmt: skip
    assert written.status_code in (200, 201, 204), written.text
    assert _stored(harness.file, doc.id) != before


def test_a_write_request_reads_its_token_once(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check costs a write request one read of the store, by the token's key, an
    agent's too (its decision and the operation it allows share a transaction); a read
    is not checked at all."""
    from starlette.testclient import TestClient

    store = harness.service.store
    real = store.get
    reads: list[str] = []

    def counted(kind: str, id: str) -> Any:
        if kind == "tokens":
            reads.append(id)
        return real(kind, id)

    admin, agent = harness.auth(), harness.auth(harness.agent_token)
    with TestClient(create_app(harness.service), raise_server_exceptions=False) as client:
        approval = _pending(client, harness)
        for token in (admin, agent):  # (each token cached by a read first)
            assert client.get("/v1/agents/a1", headers=token).status_code == 200
        monkeypatch.setattr(store, "get", counted)
        assert client.get("/v1/agents/a1", headers=admin).status_code == 200
        assert reads == []
        kid = {"name": "kid", "profile": "narrow", "identity": harness.identity}
        made = client.post("/v1/agents", json=kid, headers=admin)
        assert made.status_code == 201 and len(reads) == 1
        approved = client.post(f"/v1/approvals/{approval}/approve", headers=admin)
        assert approved.status_code == 200 and len(reads) == 2
        mine = client.post("/v1/agents", json={"name": "kid", "profile": "support"}, headers=agent)
        assert mine.status_code == 201 and len(reads) == 3


def test_a_request_acts_for_no_token_it_did_not_send(harness: Harness, other: Service) -> None:
    """A server may run a request in the context of the one before it on its connection
    (uvicorn starts a pipelined request's task inside the last one's; httpx's in-process
    transport runs each in the caller's task): a decision request after an admin's read,
    whose admin token is revoked in between, is decided, not refused for that token."""
    doomed, doc = tokens.issue(harness.service.store, "admin")
    body = {"agent": "a1", "tool": "mail.send",
            "args": {"to": "bob@example.com", "subject": "hi", "body": "hello"}}  # fmt: skip

    async def one_after_another() -> tuple[int, int]:
        transport = httpx.ASGITransport(app=create_app(harness.service))
        async with httpx.AsyncClient(transport=transport, base_url="http://charter") as client:
            read = await client.get("/v1/agents", headers=harness.auth(doomed))
            assert tokens.revoke(other, [doc.id])
            decided = await client.post("/v1/decisions", json=body, headers=harness.auth(
                harness.decide))  # fmt: skip
            return read.status_code, decided.status_code

    assert asyncio.run(one_after_another()) == (200, 200)
    assert harness.service.store.last_seq() == 1
