"""Deleting an identity removes its secret only (docs/design.md section 7): the agents that act
as it keep their rows. One that owns connections is refused (409 `identity-has-connections`,
nothing written): the delete left them owned by an identity no longer there, which no
connection's create may name. Counted inside the delete's transaction, and a create looks
its owner up inside its own, so a delete and a create for one identity (two workers too)
never leave such a connection between them."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from api import commands as c
from api.http.app import create_app
from api.service import accounts, connections, manage
from api.service.core import Service
from api.service.ops import Outcome
from api.service.tokens import Principal
from policy import identities
from tests.api.conftest import POLICY, Harness, code_of, depth_spy, expect
from tests.api.test_agent_owners import HELD

ADMIN = Principal("t", "admin")
MAIL = {"agent": "a1", "tool": "mail.send",
        "args": {"to": "bob@example.com", "subject": "s", "body": "b"}}  # fmt: skip


def _connection(client: Any, harness: Harness, owner: str | None, token: str | None = None) -> str:
    body = {"name": "c", "toolset": "vault", "credential": "secret", "owner": owner}
    made = client.post("/v1/connections", json=body, headers=harness.auth(token))
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def _state(harness: Harness) -> tuple[Any, ...]:
    """What a refused delete must leave as it was: the identity's stored secret, every
    connection, the log, the approvals."""
    store = harness.service.store
    return (
        store.get(identities.SECRETS, identities.secret_name(harness.identity)),
        [(row.id, row.body) for row in store.scan("connections")],
        store.last_seq(),
        [(row.id, row.body) for row in store.scan("approvals")],
    )


def test_an_identity_that_owns_connections_is_not_deleted(client: Any, harness: Harness) -> None:
    admin = harness.auth()
    path = f"/v1/identities/{harness.identity}"
    stranger = client.post("/v1/identities", json={}, headers=admin).json()["id"]
    first = _connection(client, harness, harness.identity)
    second = _connection(client, harness, harness.identity)
    _connection(client, harness, None)  # the workspace's, and another identity's: not its own
    _connection(client, harness, stranger)
    before = _state(harness)
    tag = client.get(path, headers=admin).headers["etag"]
    for refused in (
        client.delete(path, headers=admin),
        client.delete(path, headers={**admin, "if-match": tag}),
        client.delete(path, headers={**admin, "if-match": "*"}),
    ):
        expect(refused, 409, "identity-has-connections")
        assert refused.json()["detail"] == f"identity `{harness.identity}` owns 2 connections"
        assert "DELETE /v1/connections/{id}" in refused.json()["help"]
    assert _state(harness) == before
    assert client.delete(f"/v1/connections/{first}", headers=admin).status_code == 204
    refused = client.delete(path, headers=admin)
    assert refused.json()["detail"] == f"identity `{harness.identity}` owns 1 connection"
    assert client.delete(f"/v1/connections/{second}", headers=admin).status_code == 204
    assert client.delete(path, headers=admin).status_code == 204
    expect(client.get(path, headers=admin), 404, "identity-not-found")
    # a gone one is a 404 as before, not a count of anything
    expect(client.delete(path, headers=admin), 404, "identity-not-found")
    # its agent stays, and decides as before; no connection may name the identity now
    assert client.get("/v1/agents/a1", headers=admin).json()["identity"] == harness.identity
    decided = client.post("/v1/decisions", json=MAIL, headers=harness.auth(harness.decide))
    assert decided.json()["effect"] == "allow", decided.text
    body = {"name": "c", "toolset": "vault", "credential": "x", "owner": harness.identity}
    expect(client.post("/v1/connections", json=body, headers=admin), 400, "unknown-identity")


def test_an_agents_token_gets_the_same_409(client: Any, harness: Harness) -> None:
    """`identities.delete` as a built-in tool call: refused before it is decided (nothing
    logged), and once its connection is gone, decided and run."""
    agent = harness.auth(harness.agent_token)
    path = f"/v1/identities/{harness.identity}"
    owned = _connection(client, harness, None, harness.agent_token)  # (its own identity's)
    before = _state(harness)
    refused = client.delete(path, headers=agent)
    expect(refused, 409, "identity-has-connections")
    assert "owns 1 connection" in refused.json()["detail"]
    assert _state(harness) == before
    assert client.delete(f"/v1/connections/{owned}", headers=agent).status_code == 204
    logged = harness.service.store.last_seq()
    assert client.delete(path, headers=agent).status_code == 204
    assert harness.service.store.last_seq() == logged + 1
    assert client.get("/v1/identities", headers=agent).json()["items"] == []
    assert harness.service.store.get("agents", "a1") is not None  # it acts as it still


def test_a_paused_delete_is_refused_once_the_identity_owns_a_connection(
    client: Any, harness: Harness
) -> None:
    """Approved after a connection was made for it, the agent's paused delete is the 409,
    writes nothing and stays pending; approved once that is gone, it runs."""
    admin = harness.auth()
    assert client.put("/v1/policy", content=POLICY + HELD, headers=admin).status_code == 201
    own = client.post("/v1/identities", json={}, headers=admin).json()["id"]
    harness.add_agent("held", "held", identity=own)
    held = harness.auth(harness.token_for("held"))
    paused = client.delete(f"/v1/identities/{own}", headers=held)
    assert paused.status_code == 202, paused.text
    approval = f"/v1/approvals/{paused.json()['approval_id']}"
    made = _connection(client, harness, own)
    store = harness.service.store
    secret = store.get(identities.SECRETS, identities.secret_name(own))
    logged = store.last_seq()
    expect(client.post(f"{approval}/approve", headers=admin), 409, "identity-has-connections")
    assert (store.get(identities.SECRETS, identities.secret_name(own)), store.last_seq()) == (
        secret, logged)  # fmt: skip
    assert client.get(approval, headers=admin).json()["status"] == "pending"
    assert client.delete(f"/v1/connections/{made}", headers=admin).status_code == 204
    approved = client.post(f"{approval}/approve", headers=admin)
    assert approved.status_code == 200, approved.text
    expect(client.get(f"/v1/identities/{own}", headers=admin), 404, "identity-not-found")


def test_a_connection_made_meanwhile_by_another_worker_is_counted(
    harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another worker makes a connection for the identity between the agent's precheck
    and the delete's transaction: the count inside it sees that one, so the delete is
    the 409 and nothing is logged, where it went ahead past a check made before."""
    real = manage.PRECHECKS["identities.delete"]

    def overtaken(service: Service, actor: Principal, command: c.DeleteIdentity) -> None:
        real(service, actor, command)
        late = c.CreateConnection(
            name="late", toolset="vault", credential="late", owner=harness.identity
        )
        connections.connections_create(other, ADMIN, late)

    monkeypatch.setitem(manage.PRECHECKS, "identities.delete", overtaken)
    logged = harness.service.store.last_seq()
    with TestClient(create_app(harness.service), raise_server_exceptions=False) as client:
        refused = client.delete(f"/v1/identities/{harness.identity}",
                                headers=harness.auth(harness.agent_token))  # fmt: skip
        expect(refused, 409, "identity-has-connections")
    assert harness.service.store.last_seq() == logged
    assert identities.get(harness.service.store, harness.identity)["id"] == harness.identity


def test_a_connection_whose_owner_goes_meanwhile_is_not_made(
    harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another worker deletes the owner between the create's first look and its
    transaction: the look inside it finds the owner gone (400 `unknown-identity`), where
    the connection was made owned by an identity the delete's count had not seen."""
    real = accounts.check_identity  # (as connections imports it)
    looks: list[int] = []

    def overtaken(service: Service, account: Any) -> str:
        found = real(service, account)
        if not looks:  # the first look, before the transaction: then the delete
            assert (
                accounts.identities_delete(other, ADMIN, c.DeleteIdentity(id=account)).outcome
                is Outcome.REMOVED
            )
        looks.append(1)
        return found

    monkeypatch.setattr(connections, "check_identity", overtaken)
    with TestClient(create_app(harness.service), raise_server_exceptions=False) as client:
        body = {"name": "c", "toolset": "vault", "credential": "x", "owner": harness.identity}
        made = client.post("/v1/connections", json=body, headers=harness.auth())
        assert code_of(made) == (400, "unknown-identity"), made.text
    assert list(harness.service.store.scan("connections")) == []


def test_the_admins_count_is_made_inside_the_delete(harness: Harness) -> None:
    store = harness.service.store
    depths: list[Any] = []
    store.scan = depth_spy(store, store.scan, depths, key=lambda kind: kind)  # type: ignore[method-assign]
    with TestClient(create_app(harness.service), raise_server_exceptions=False) as client:
        gone = client.delete(f"/v1/identities/{harness.identity}", headers=harness.auth())
        assert gone.status_code == 204, gone.text
    counted = [depth for kind, depth in depths if kind == "connections"]
    assert counted and all(depth > 0 for depth in counted), depths
