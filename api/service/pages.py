"""Opaque cursors: base64url of a small JSON object naming the list and the last key seen.

Lists page by insertion position, so a page boundary never moves when rows are added: new
rows appear at the end of the list. The policy read views (roles, profiles, hooks,
toolsets) are views of one revision: their cursor pins the revision the first page was
read on, and later pages read that same revision, so the list is one consistent snapshot.

A list filtered by the caller (`/v1/threads?agent=`, `/v1/approvals?status=`) is a list
of its own: its cursors carry a digest of the filter, so another filter's cursor (read as
a position, it skipped every row of this list before it) is another list's.

A cursor is checked strictly before anything reads it: at most MAX_CURSOR characters of
the base64url alphabet, decoding to a JSON object with exactly the keys this list's
cursors have, each a non-negative integer that fits in SQLite's signed 64 bits (the
filter's digest: the very one). Anything else, forged or from another list, is
`bad-cursor`, never a server error.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from typing import TYPE_CHECKING, Any

from api.commands import Listing
from api.records import DOCUMENTS, Identity, Record
from api.service.errors import ServiceError
from api.service.ops import Outcome, Result
from policy.store import Doc

if TYPE_CHECKING:
    from api.service.core import Service

MAX_LIMIT = 200
DEFAULT_LIMIT = 50
MAX_CURSOR = 256  # characters; the longest cursor encode() makes is about 100
MAX_POSITION = (1 << 63) - 1  # positions and revisions are SQLite integers
_ALPHABET = re.compile(r"[A-Za-z0-9_-]*")


def _digest(listed: str) -> str:
    """A filter's value in a cursor: 48 bits of its SHA-256 (a value may be long)."""
    return hashlib.sha256(listed.encode()).hexdigest()[:12]


def encode(kind: str, after: int, revision: int | None = None, listed: str | None = None) -> str:
    """`listed`: the filter the list was read with, if the caller chose one."""
    fields: dict[str, Any] = {"k": kind, "a": after}
    if revision is not None:
        fields["r"] = revision
    if listed is not None:
        fields["f"] = _digest(listed)
    raw = json.dumps(fields, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _bad() -> ServiceError:
    return ServiceError("bad-cursor", "the cursor is not one this list returned")


def _fields(
    kind: str, cursor: Any, keys: frozenset[str], listed: str | None = None
) -> dict[str, int]:
    """The cursor's integer fields, or `bad-cursor`. Bounded before it is decoded:
    a short string decodes to a short JSON text, which cannot nest deep enough to matter."""
    if (
        type(cursor) is not str
        or len(cursor) > MAX_CURSOR
        or not _ALPHABET.fullmatch(cursor)
        or len(cursor) % 4 == 1
    ):
        raise _bad()
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise _bad() from None
    if listed is not None:
        keys |= {"f"}
    if type(value) is not dict or value.keys() != keys or value["k"] != kind:
        raise _bad()
    if listed is not None and value["f"] != _digest(listed):
        raise _bad()
    fields = {key: value[key] for key in keys - {"k", "f"}}
    for number in fields.values():
        if type(number) is not int or not 0 <= number <= MAX_POSITION:
            raise _bad()
    return fields


_PLAIN = frozenset({"k", "a"})
_PINNED = frozenset({"k", "a", "r"})


def decode(kind: str, cursor: str | None, listed: str | None = None) -> int:
    """The last position a page of list `kind` (filtered by `listed`) showed (0: from
    the start)."""
    if cursor is None or cursor == "":
        return 0
    return _fields(kind, cursor, _PLAIN, listed)["a"]


def decode_pinned(kind: str, cursor: str | None) -> tuple[int, int] | None:
    """(the revision, how many items earlier pages showed) for a view of one revision, or
    None for the first page. The caller checks that the revision exists (else bad_cursor())."""
    if cursor is None or cursor == "":
        return None
    fields = _fields(kind, cursor, _PINNED)
    if fields["r"] < 1:
        raise _bad()
    return fields["r"], fields["a"]


def bad_cursor() -> ServiceError:
    return _bad()


def limit_of(value: Any) -> int:
    if value is None:
        return DEFAULT_LIMIT
    if type(value) is not int or not 1 <= value <= MAX_LIMIT:
        raise ServiceError(
            "bad-limit", f"limit must be an integer from 1 to {MAX_LIMIT}", limit=value
        )
    return value


def page(
    service: Service, kind: str, listing: Listing, tag: str | None = None,
    listed: str | None = None,
) -> Result:  # fmt: skip
    """The page of `kind` (with `tag`) that `listing` asks for; `listed`: the caller's
    filter, which the cursors name (another filter's cursor is another list's:
    `bad-cursor`)."""
    after = decode(kind, listing.cursor, listed)
    limit = limit_of(listing.limit)
    rows = service.store.page(kind, after, limit + 1, tag)
    more = len(rows) > limit
    rows = rows[:limit]
    items = [view(kind, row.body) for row in rows]
    cursor = encode(kind, rows[-1].pos, listed=listed) if more and rows else None
    return Result(Outcome.DONE, {"items": items, "next_cursor": cursor})


def view(kind: str, doc: Doc) -> Record:
    """A stored row as a list shows it: its record (api.records: what it hides, such as a
    connection's sealed credential or an approval's sealed call, is never shown); an
    identity's, from its Seed secret, without the sealed seed."""
    if kind == "secrets":
        return Identity.of_secret(doc)
    return DOCUMENTS[kind].read(doc)
