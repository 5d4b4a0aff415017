"""Connections: a credential for a toolset, owned by the workspace (no owner) or by one
identity. The credential is sealed at rest and never appears in any response or log."""

from __future__ import annotations

from typing import Any

from api import commands as c
from api.records import Connection
from api.service.accounts import check_identity, require_own_identity
from api.service.core import Service, new_id, now_ms
from api.service.errors import ServiceError
from api.service.etags import etag
from api.service.ops import Operation, Outcome, Result
from api.service.pages import page
from api.service.tokens import Principal
from policy.store import Doc


def create_connection(
    service: Service, command: c.CreateConnection, owner: str | None
) -> Connection:
    """The connection `command` makes, owned by `owner` (None: the workspace), an identity
    the caller checked."""
    toolset = command.toolset
    spec = service.current().served.toolsets.get(toolset)
    if spec is None:
        raise ServiceError("unknown-toolset", f"toolset `{toolset}` is not in the policy")
    credential = command.credential
    if not credential:
        raise ServiceError("credential-required", "a connection needs a credential")
    now = now_ms()
    connection = Connection(
        id=new_id(), name=command.name, toolset=toolset, owner=owner,
        sealed_credential=service.sealer.seal(credential.encode()), created_at=now,
        updated_at=now,
    )  # fmt: skip
    with service.store.atomic():  # the connection and its note in the change feed commit together
        if owner is not None:
            # Its owner looked up again in this transaction: deleted meanwhile (by another
            # process too), it made a connection owned by an identity no longer there,
            # which that delete's count (accounts.identities_delete) never saw.
            check_identity(service, owner)
        service.store.insert(Connection.KIND, connection.id, connection.stored(), tag=toolset)
        service.read.forget_connections(toolset)
    return connection


def _creator_owner(service: Service, actor: Principal, owner: Any) -> Any:
    """The owner of a connection `actor` makes: an agent's is its own identity
    (`not-own-identity` for another)."""
    return require_own_identity(
        service, actor, owner,
        lambda own: ServiceError("not-own-identity", "an agent owns connections as itself"),
        none_is_own=True,
    )  # fmt: skip


def check_create(service: Service, actor: Principal, command: c.CreateConnection) -> None:
    """Before an agent's `connections.create` is decided: never for another identity (so
    such a request neither logs nor pauses a call a human could only see fail)."""
    _creator_owner(service, actor, command.owner)


def connections_create(service: Service, actor: Principal, command: c.CreateConnection) -> Result:
    owner = _creator_owner(service, actor, command.owner)
    if owner is not None:
        owner = check_identity(service, owner)
    connection = create_connection(service, command, owner)
    return Result(Outcome.CREATED, connection, etag(connection.stored()))


def connections_list(service: Service, actor: Principal, command: c.ListConnections) -> Result:
    return page(service, Connection.KIND, command)


def connections_get(service: Service, actor: Principal, command: c.GetConnection) -> Result:
    connection = service.record(Connection, "connection", command.id)
    return Result(Outcome.DONE, connection, etag(connection.stored()))


def _own(service: Service, actor: Principal, connection_id: str) -> Connection:
    """The connection; with an agent's token, only one owned by the agent's identity (as
    `connections_create` makes them): a workspace-owned or another identity's connection
    is refused, so an agent can never replace or remove a credential it does not own."""
    connection = service.record(Connection, "connection", connection_id)
    require_own_identity(
        service, actor, connection.owner,
        lambda own: ServiceError(
            "not-own-identity",
            f"connection `{connection_id}` is not owned by this agent's identity",
        ),
    )  # fmt: skip
    return connection


def check_own(service: Service, actor: Principal, command: c.ById) -> None:
    """Before an agent's `connections.update`/`.delete` is decided (see `_own`)."""
    _own(service, actor, command.id)


def stored(service: Service, actor: Principal, command: c.ById) -> Doc:
    """The connection `command.id` as stored (its sealed credential too: a change of it
    alone changes its `ETag`), if the caller may change it (`_own`): what a `PATCH` or
    `DELETE` acts on, and its `If-Match` names (api.service.manage)."""
    return _own(service, actor, command.id).stored()


def connections_update(service: Service, actor: Principal, command: c.UpdateConnection) -> Result:
    # Read and written in one transaction: another process's change meanwhile (its name,
    # its credential) was written over, and one deleted meanwhile answered 200.
    with service.store.atomic():
        connection = _own(service, actor, command.id)
        changes: dict[str, Any] = {"updated_at": now_ms()}
        if command.name is not None:
            changes["name"] = command.name
        if command.credential is not None:
            changes["sealed_credential"] = service.sealer.seal(command.credential.encode())
        connection = connection.changed(**changes)
        service.store.update(
            Connection.KIND, connection.id, connection.stored(), tag=connection.toolset
        )
    return Result(Outcome.DONE, connection, etag(connection.stored()))


def connections_delete(service: Service, actor: Principal, command: c.DeleteConnection) -> Result:
    with service.store.atomic():  # the removal and its note in the change feed commit together
        removed = _own(service, actor, command.id)
        service.store.delete("connections", command.id)
        service.read.forget_connections(removed.toolset)
    return Result(Outcome.REMOVED, None)


OPERATIONS: dict[str, Operation] = {
    "connections.list": connections_list,
    "connections.get": connections_get,
    "connections.create": connections_create,
    "connections.update": connections_update,
    "connections.delete": connections_delete,
}
