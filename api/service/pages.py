"""Opaque cursors: base64url of a small JSON object naming the list and the last key seen.

Lists page by insertion position, so a page boundary never moves when rows are added: new
rows appear at the end of the list. The policy read views (roles, profiles, hooks,
toolsets) are views of one revision: their cursor pins the revision the first page was
read on, and later pages read that same revision, so the list is one consistent snapshot.

A cursor is checked strictly before anything reads it: at most MAX_CURSOR characters of
the base64url alphabet, decoding to a JSON object with exactly the keys this list's
cursors have, each a non-negative integer that fits in SQLite's signed 64 bits. Anything
else, forged or from another list, is 400 `bad-cursor`, never a 500.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from api.service.errors import ServiceError

MAX_LIMIT = 200
DEFAULT_LIMIT = 50
MAX_CURSOR = 256  # characters; the longest cursor encode() makes is about 100
MAX_POSITION = (1 << 63) - 1  # positions and revisions are SQLite integers
_ALPHABET = re.compile(r"[A-Za-z0-9_-]*")


def encode(kind: str, after: int, revision: int | None = None) -> str:
    fields: dict[str, Any] = {"k": kind, "a": after}
    if revision is not None:
        fields["r"] = revision
    raw = json.dumps(fields, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _bad() -> ServiceError:
    return ServiceError(400, "bad-cursor", "the cursor is not one this list returned")


def _fields(kind: str, cursor: Any, keys: frozenset[str]) -> dict[str, int]:
    """The cursor's integer fields, or 400 `bad-cursor`. Bounded before it is decoded:
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
    if type(value) is not dict or value.keys() != keys or value["k"] != kind:
        raise _bad()
    fields = {key: value[key] for key in keys if key != "k"}
    for number in fields.values():
        if type(number) is not int or not 0 <= number <= MAX_POSITION:
            raise _bad()
    return fields


_PLAIN = frozenset({"k", "a"})
_PINNED = frozenset({"k", "a", "r"})


def decode(kind: str, cursor: str | None) -> int:
    """The last position a page of list `kind` showed (0: from the start)."""
    if cursor is None or cursor == "":
        return 0
    return _fields(kind, cursor, _PLAIN)["a"]


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
            400, "bad-limit", f"limit must be an integer from 1 to {MAX_LIMIT}", limit=value
        )
    return value
