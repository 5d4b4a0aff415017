"""Identities (the signing keys agents act as) through the API: list, get, create,
import, update, delete; and what the other resources check of an identity they name."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from api import commands as c
from api.records import Identity
from api.service import pages
from api.service.core import Service
from api.service.errors import ServiceError
from api.service.etags import etag
from api.service.ops import Operation, Outcome, Result
from api.service.pages import page
from api.service.tokens import Principal
from policy import identities
from policy.identities import IdentityError
from policy.store import Doc

P = ParamSpec("P")
T = TypeVar("T")


def identity_errors(fn: Callable[P, T]) -> Callable[P, T]:
    @functools.wraps(fn)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except IdentityError as exc:
            extra = {} if exc.help is None else {"help": exc.help}
            raise ServiceError(exc.code, exc.message, **extra) from None

    return wrapped


# ---- identities ---------------------------------------------------------------------------
# An agent acts as one identity (docs/design.md section 1), its own: with an agent's token these
# reach that one only. Creating or importing a key is decided by its policy as before; the
# key made is not the agent's own, so the response is all it ever sees of it.
def require_own_identity(
    service: Service,
    actor: Principal,
    given: Any,
    refusal: Callable[[Any], ServiceError],
    *,
    none_is_own: bool = False,
) -> Any:
    """With an agent's token, the identity the agent acts as, which `given` must be (or
    None, if `none_is_own`), else `refusal(own)` is raised; with an admin's, `given`."""
    if actor.agent is None:
        return given
    own = service.agent(actor.agent).identity
    if given != own and not (none_is_own and given is None):
        raise refusal(own)
    return own


def _own_identity(service: Service, actor: Principal, account: Any) -> None:
    """With an agent's token, `account` must be the identity the agent acts as, else
    `not-own-identity`, whether or not such an identity exists (so the answer says
    nothing of the identities that do)."""
    require_own_identity(
        service, actor, account,
        lambda own: ServiceError(
            "not-own-identity",
            f"identity `{account}` is not the one agent `{actor.agent}` acts as",
            help=f"an agent's token reaches only its own identity, `{own}`",
        ),
    )  # fmt: skip


def check_own_identity(service: Service, actor: Principal, command: c.ById) -> None:
    """Before an agent's `identities.get`/`.update`/`.delete` is decided (see `_own_identity`)."""
    _own_identity(service, actor, command.id)


def identities_list(service: Service, actor: Principal, command: c.ListIdentities) -> Result:
    if actor.agent is None:
        return page(service, "secrets", command, tag=identities.KIND)
    # Its own identity alone: a list of at most one, on the first page, found by its id
    # rather than by reading everyone's. A cursor (checked as any) starts past its end.
    after = pages.decode("secrets", command.cursor)
    pages.limit_of(command.limit)
    items = []
    if after == 0:
        own = service.agent(actor.agent).identity
        with contextlib.suppress(IdentityError):  # deleted: the agent acts as a key now gone
            items.append(Identity.of_secret(identities.stored(service.store, own)))
    return Result(Outcome.DONE, {"items": items, "next_cursor": None})


@identity_errors
def identity_stored(service: Service, actor: Principal, command: c.ById) -> Doc:
    """The identity `command.id` as stored, if the caller reaches it (`_own_identity`): what
    a `PATCH` or `DELETE` acts on, and its `If-Match` names (api.service.manage)."""
    _own_identity(service, actor, command.id)
    return identities.stored(service.store, command.id)


def _identity_answer(service: Service, outcome: Outcome, account: str) -> Result:
    """The identity with its `ETag`, read back from the store in the caller's transaction
    (policy.identities answers with its public view alone): the tag of what it shows."""
    doc = identities.stored(service.store, account)
    return Result(outcome, Identity.of_secret(doc), etag(doc))


@identity_errors
def identities_get(service: Service, actor: Principal, command: c.GetIdentity) -> Result:
    doc = identity_stored(service, actor, command)
    return Result(Outcome.DONE, Identity.of_secret(doc), etag(doc))


@identity_errors
def identities_create(service: Service, actor: Principal, command: c.CreateIdentity) -> Result:
    with service.store.atomic():
        # An agent's request ids are its own: it never replays another caller's create.
        view, created = identities.create(
            service.store, service.sealer, command.label, command.request_id, actor.agent
        )
        return _identity_answer(service, Outcome.CREATED if created else Outcome.DONE, view["id"])


@identity_errors
def identities_import(service: Service, actor: Principal, command: c.ImportIdentity) -> Result:
    with service.store.atomic():
        view = identities.import_seed(service.store, service.sealer, command.seed, command.label)
        return _identity_answer(service, Outcome.CREATED, view["id"])


@identity_errors
def identities_update(service: Service, actor: Principal, command: c.UpdateIdentity) -> Result:
    _own_identity(service, actor, command.id)
    with service.store.atomic():
        identities.update(
            service.store,
            command.id,
            label=command.label,
            name=command.name,
            metadata=command.metadata,
        )
        return _identity_answer(service, Outcome.DONE, command.id)


# Deleting an identity removes its secret only (docs/design.md section 7): the agents that act
# as it keep their rows and their account id (an agent's token may delete its own). Its
# connections are refused instead: each is a credential held for that identity, which a
# delete left owned by one no longer there (and no `connections.create` would make).
def _require_no_connections(service: Service, account: str) -> None:
    """`identity-has-connections` while identity `account` owns a connection (a
    scan: connections are found by their toolset, not their owner)."""
    owned = sum(1 for row in service.store.scan("connections") if row.body.get("owner") == account)
    if owned:
        raise ServiceError(
            "identity-has-connections",
            f"identity `{account}` owns {owned} connection{'s' * (owned != 1)}",
            help="delete the connections it owns first (`DELETE /v1/connections/{id}`; a "
            "connection's `owner` names its identity), then the identity",
        )  # fmt: skip


@identity_errors
def check_identity_delete(service: Service, actor: Principal, command: c.DeleteIdentity) -> None:
    """Before an agent's `identities.delete` is decided: its own (`_own_identity`), there
    (`identity-not-found`), and owning no connection (`_require_no_connections`)."""
    identity_stored(service, actor, command)
    _require_no_connections(service, command.id)


@identity_errors
def identities_delete(service: Service, actor: Principal, command: c.DeleteIdentity) -> Result:
    _own_identity(service, actor, command.id)
    with service.store.atomic():
        # Counted in the delete's transaction: a connection another process makes for it
        # commits before (and is counted) or finds it gone (connections.create_connection).
        identities.stored(service.store, command.id)  # (not found first, orphans or not)
        _require_no_connections(service, command.id)
        identities.delete(service.store, command.id)
    return Result(Outcome.REMOVED, None)


def check_identity(service: Service, account: Any) -> str:
    try:
        identities.get(service.store, str(account))
    except IdentityError:
        raise ServiceError("unknown-identity", "Signing key not found") from None
    return str(account)


OPERATIONS: dict[str, Operation] = {
    "identities.list": identities_list,
    "identities.get": identities_get,
    "identities.create": identities_create,
    "identities.import": identities_import,
    "identities.update": identities_update,
    "identities.delete": identities_delete,
}
