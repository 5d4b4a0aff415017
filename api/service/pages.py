"""Opaque cursors: base64url of a small JSON object naming the list and the last key seen.

Lists page by insertion position (or by name for the policy read views), so a page
boundary never moves when rows are added: new rows appear at the end of the list.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from api.service.errors import ServiceError

MAX_LIMIT = 200
DEFAULT_LIMIT = 50


def encode(kind: str, after: int | str) -> str:
    raw = json.dumps({"k": kind, "a": after}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _bad() -> ServiceError:
    return ServiceError(400, "bad-cursor", "the cursor is not one this list returned")


def decode(kind: str, cursor: str | None, numeric: bool = True) -> Any:
    if cursor is None or cursor == "":
        return 0 if numeric else ""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise _bad() from None
    if not isinstance(value, dict) or value.get("k") != kind:
        raise _bad()
    after = value.get("a")
    if numeric and (type(after) is not int or after < 0):
        raise _bad()
    if not numeric and not isinstance(after, str):
        raise _bad()
    return after


def limit_of(value: Any) -> int:
    if value is None:
        return DEFAULT_LIMIT
    if type(value) is not int or not 1 <= value <= MAX_LIMIT:
        raise ServiceError(
            400, "bad-limit", f"limit must be an integer from 1 to {MAX_LIMIT}", limit=value
        )
    return value
