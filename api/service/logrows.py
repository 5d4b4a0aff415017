"""Reading the decision log back: a row as `api.service.decisionlog` wrote it (compact
JSON, its reasons by ref, what repeats left out), expanded to every field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cbor2

from api.service.core import Service
from api.service.encoding import loads

_ENTRY_DEFAULTS: dict[str, Any] = {
    "errors": [], "near_misses": [], "thread": None, "turn": None, "expected_cost": None,
    "approval": None,
}  # fmt: skip


def decode_row(row: bytes) -> dict[str, Any]:
    """A log row as written: a JSON object, or (rows of databases written before rows
    were JSON) a CBOR map; a JSON object starts with `{`, which no CBOR map does."""
    value = loads(row) if row[:1] == b"{" else cbor2.loads(row)
    assert isinstance(value, dict)
    return value


def expand(row: bytes, resolve: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """A log row with every field: decoded, its reasons looked up by ref with `resolve`
    (None without one), what a compact row leaves out filled back in."""
    entry = decode_row(row)
    full = {**_ENTRY_DEFAULTS, **entry}
    ref = full.pop("reasons_ref", None)
    if ref is not None:
        full["reasons"] = resolve(ref) if resolve is not None else None
    added = full.pop("final_added", None)
    if added is not None:
        full["final_args"] = {**entry["args"], **added}
    elif "final_args" not in entry:
        full["final_args"] = None if entry["effect"] == "deny" else entry["args"]
    return full


def reasons_resolver(service: Service) -> Callable[[str], Any]:
    """Looks a row's reasons up by ref (one read per distinct ref)."""
    found: dict[str, Any] = {}

    def resolve(ref: str) -> Any:
        if ref not in found:
            doc = service.store.get("reasons", ref)
            found[ref] = None if doc is None else doc["reasons"]
        return found[ref]

    return resolve


def log_view(seq: int, row: bytes, resolve: Callable[[str], Any] | None = None) -> dict[str, Any]:
    return {"seq": seq, **expand(row, resolve)}
