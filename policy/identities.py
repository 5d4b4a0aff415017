"""Ed25519 signing identities, stored as encrypted secrets (docs/design.md section 7).

The account id is the public key as a multibase string: `z` + base58btc of the multicodec
ed25519-pub prefix (0xed 0x01) followed by the 32 key bytes, so every id starts `z6Mk`
(the encoding Seed Hypermedia uses for accounts). The secret is named
`hm-account-<first 16 chars of the account id>`; its metadata is
`{kind: "hm-account-key", accountId, label, name, ...}`; the 32-byte seed is sealed.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Mapping
from typing import Any, Literal

import nacl.signing

from policy.metadata import MERGE_HELP, over_cap
from policy.secrets import Sealer
from policy.store import Doc, Store

KIND = "hm-account-key"
SECRETS = "secrets"  # the store's document kind for every secret
IDEMPOTENCY = "identity-requests"
AGENT_IDEMPOTENCY = "agent-identity-requests"  # an agent's request ids, kept apart
NOT_FOUND = "Signing identity not found"
_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_ED25519_PUB = b"\xed\x01"
RESERVED = ("kind", "accountId", "label", "name")  # metadata keys a merge never writes


# The codes an identity operation is refused with (each one of the service's own).
Refusal = Literal[
    "identity-not-found", "request-id-reused", "invalid-seed", "identity-exists",
    "metadata-too-large",
]  # fmt: skip


class IdentityError(Exception):
    """A refused identity operation: `code` is stable, the message is the contract."""

    def __init__(self, code: Refusal, message: str, help: str | None = None) -> None:
        super().__init__(message)
        self.code: Refusal = code
        self.message = message
        self.help = help  # a line on what to do, where one helps


def base58(data: bytes) -> str:
    number = int.from_bytes(data, "big")
    out = ""
    while number:
        number, rem = divmod(number, 58)
        out = _ALPHABET[rem] + out
    pad = len(data) - len(data.lstrip(b"\0"))
    return "1" * pad + out


def account_id(public_key: bytes) -> str:
    return "z" + base58(_ED25519_PUB + public_key)


def secret_name(account: str) -> str:
    return f"hm-account-{account[:16]}"


def _now() -> int:
    return int(time.time() * 1000)


def public_view(doc: Doc) -> Doc:
    """What a listing or a response shows: the metadata, never the sealed seed."""
    meta = dict(doc["metadata"])
    return {
        "id": meta["accountId"],
        "account_id": meta["accountId"],
        "secret_name": doc["name"],
        "name": meta.get("name"),
        "label": meta.get("label"),
        "metadata": {k: v for k, v in meta.items() if k not in ("accountId", "label", "name")},
        "created_at": doc["created_at"],
        "updated_at": doc["updated_at"],
    }


def _find(store: Store, account: str) -> Doc:
    doc = store.get(SECRETS, secret_name(account)) if account else None
    if doc is None or doc.get("metadata", {}).get("kind") != KIND:
        raise IdentityError("identity-not-found", NOT_FOUND)
    if doc["metadata"].get("accountId") != account:
        raise IdentityError("identity-not-found", NOT_FOUND)
    return doc


def _store_key(
    store: Store, sealer: Sealer, key: nacl.signing.SigningKey, label: str | None
) -> tuple[Doc, bool]:
    account = account_id(bytes(key.verify_key))
    name = secret_name(account)
    existing = store.get(SECRETS, name)
    if existing is not None:
        return existing, False
    now = _now()
    display = label or f"Agent account {account[:10]}"
    doc: Doc = {
        "name": name,
        "metadata": {"kind": KIND, "accountId": account, "label": label, "name": display},
        "sealed_seed": sealer.seal(bytes(key)),
        "created_at": now,
        "updated_at": now,
    }
    if not store.insert(SECRETS, name, doc, tag=KIND):
        return store.get(SECRETS, name) or doc, False
    return doc, True


def create(
    store: Store,
    sealer: Sealer,
    label: str | None = None,
    request_id: str | None = None,
    requester: str | None = None,
) -> tuple[Doc, bool]:
    """Generate a key pair. Idempotent: repeating a create with the same `request_id`
    and the same body returns the identity the first one made; the same `request_id`
    with another body (another `label`) is `request-id-reused`, and nothing is
    written. Returns (public view, created).

    `requester`: the agent whose request ids these are (None: an admin's). Each agent's
    are its own, apart from the admins' and each other's, so a request id never hands an
    agent an identity another caller made."""
    kind, key = IDEMPOTENCY, request_id
    if requester is not None and request_id:
        # the length first: `a:b` + `c` and `a` + `b:c` are different keys
        kind, key = AGENT_IDEMPOTENCY, f"{len(requester)}:{requester}:{request_id}"
    body = {"label": label}  # what the request asked for, kept with its request id
    with store.atomic():
        if key:
            earlier = store.get(kind, key)
            if earlier is not None:
                _same_request(earlier, body, str(request_id))
                return public_view(_find(store, str(earlier["account_id"]))), False
        doc, created = _store_key(store, sealer, nacl.signing.SigningKey.generate(), label)
        if key:
            store.insert(kind, key, {"account_id": doc["metadata"]["accountId"], "body": body})
    return public_view(doc), created


def _same_request(earlier: Doc, body: Doc, request_id: str) -> None:
    """A request id is one request (as Stripe's idempotency keys): replaying it with another
    body answered the first identity as if the second had been made, so a client that
    reused an id by mistake went on with a key whose label it never asked for. (A request
    id written before its body was kept has nothing to compare: it replays as before.)"""
    first = earlier.get("body")
    if first is None or first == body:
        return
    raise IdentityError(
        "request-id-reused",
        f"request id `{request_id}` was first used with {_label(first.get('label'))}; this "
        f"request gives {_label(body.get('label'))}",
        help="send the first request's body again to get its identity, or use a new request id",
    )


def _label(label: Any) -> str:
    return "no label" if label is None else f"label `{label}`"


def decode_seed(text: str) -> bytes:
    """A seed given as 64 hex digits or as base64; anything but 32 bytes is refused."""
    raw: bytes | None = None
    stripped = text.strip()
    if len(stripped) == 64:
        try:
            raw = bytes.fromhex(stripped)
        except ValueError:
            raw = None
    if raw is None:
        try:
            raw = base64.b64decode(stripped + "=" * (-len(stripped) % 4), validate=True)
        except (binascii.Error, ValueError):
            raw = None
    if raw is None or len(raw) != 32:
        raise IdentityError("invalid-seed", "The seed must be exactly 32 bytes")
    return raw


def import_seed(store: Store, sealer: Sealer, seed: str, label: str | None = None) -> Doc:
    """Store an existing key. Publishes nothing; an existing key is `identity-exists`."""
    key = nacl.signing.SigningKey(decode_seed(seed))
    account = account_id(bytes(key.verify_key))
    with store.atomic():
        if store.get(SECRETS, secret_name(account)) is not None:
            raise IdentityError(
                "identity-exists", f"This account key is already on the server ({account})"
            )
        doc, _ = _store_key(store, sealer, key, label)
    return public_view(doc)


def get(store: Store, account: str) -> Doc:
    return public_view(_find(store, account))


def stored(store: Store, account: str) -> Doc:
    """The identity's document as stored (its sealed seed too: never an answer, which is
    its `public_view`), for what is derived from the whole of it (an entity tag)."""
    return _find(store, account)


def update(
    store: Store,
    account: str,
    *,
    label: str | None = None,
    name: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Doc:
    """Rename / relabel and merge metadata; the kind and account id cannot change, and the
    label and name change through their own fields only (checked there: a string of at
    most 256 characters), never as metadata keys, which a view shows as those fields."""
    with store.atomic():
        doc = _find(store, account)
        meta = dict(doc["metadata"])
        for key, value in (metadata or {}).items():
            if key not in RESERVED:
                meta[key] = value
        if label is not None:
            meta["label"] = label
            if name is None:
                meta["name"] = label
        if name is not None:
            meta["name"] = name
        if metadata:  # (one stored before the cap keeps its name and label changeable)
            _check_size(meta)
        doc = {**doc, "metadata": meta, "updated_at": _now()}
        store.update(SECRETS, doc["name"], doc, tag=KIND)
    return public_view(doc)


def _check_size(meta: Mapping[str, Any]) -> None:
    """The merged metadata (the keys a caller gives, not the reserved ones) within the
    caps of policy.metadata, else `metadata-too-large` and nothing is written: it had no cap, so PATCH
    after PATCH grew one document (read whole by every listing and get) without end. The
    merge is what is measured: each request may be small."""
    own = {key: value for key, value in meta.items() if key not in RESERVED}
    message = over_cap(own, "the identity's metadata")
    if message is not None:
        raise IdentityError("metadata-too-large", message, help=MERGE_HELP)


def delete(store: Store, account: str) -> None:
    """Removes the secret only: agents that act as this identity keep their rows. (The
    service refuses it first while the identity owns connections, in the transaction this
    joins: api.service.resources.identities_delete.)"""
    with store.atomic():
        doc = _find(store, account)
        store.delete(SECRETS, doc["name"])


def signing_key(store: Store, sealer: Sealer, account: str) -> nacl.signing.SigningKey:
    doc = _find(store, account)
    return nacl.signing.SigningKey(sealer.open(doc["sealed_seed"]))
