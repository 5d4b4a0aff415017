"""Entity tags of stored resources (identities, agents, threads, connections; and of a role
made through the API, its own file: api.service.views), and the `If-Match` of a write kept
against them (docs/http.md, "Lost updates").

A tag is a digest of the whole stored document, not of its `updated_at`: two changes in
one millisecond are two states with the same stamp, and a connection's credential is
stored sealed, out of every answer, so a change of it alone changes no field an answer
shows. Two different documents never share a tag (short of a SHA-256 collision in its
first 128 bits); the same document always has the same one, in every process.
"""

from __future__ import annotations

import hashlib

import cbor2

from api.service.errors import ServiceError
from policy.store import Doc


def etag(doc: Doc) -> str:
    """The strong entity tag of a stored document. Canonical CBOR (keys sorted, each
    value in its one shortest form): the document as written and as read back from the
    store (CBOR too) give the same bytes, whatever the order its keys were set in."""
    return f'"{hashlib.sha256(cbor2.dumps(doc, canonical=True)).hexdigest()[:32]}"'


def require(doc: Doc, if_match: str, what: str) -> None:
    """`resource-moved` when `doc` (as stored now: inside the write's transaction,
    so no other writer can change it before the write) is not the one `if_match`
    names; `*` names any (the operation's own not-found refused one that is gone)."""
    if if_match == "*" or if_match == etag(doc):
        return
    raise ServiceError(
        "resource-moved", f"{what} has changed since the `ETag` given as `If-Match`",
        help="read it again, make your change on what it is now, and send that with its "
        "new `ETag` as `If-Match`",
    )  # fmt: skip
