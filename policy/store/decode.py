"""A stored row checked and decoded: what every store does with a row it reads.

A row's `sum` must be the checksum of its columns (policy/store/rowsum.py) and its body
must decode (CBOR, a map for a document or a revision); otherwise StoreDamaged names it,
and its data is never served. Bodies are encoded here too, so both stores write alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import cbor2

from policy.store import Doc, StoreDamaged
from policy.store.rowsum import row_digest


def encoded(body: Mapping[str, Any]) -> bytes:
    return bytes(cbor2.dumps(dict(body)))


DocumentRow = tuple[str, str, str | None, bytes, bytes]  # kind, id, tag, body, sum


def document_rows(
    kind: str, docs: Sequence[tuple[str, Mapping[str, Any], str | None]]
) -> list[DocumentRow]:
    """The `documents` rows of `docs` of `kind`, each (id, body, tag): encoded, with
    their checksums (`Store.insert_many`)."""
    rows = []
    for id, body, tag in docs:
        blob = encoded(body)
        rows.append((kind, id, tag, blob, row_digest("documents", (kind, id, tag, blob))))
    return rows


def decoded(blob: bytes, what: str) -> Doc:
    """A stored body, decoded; StoreDamaged (naming `what`) if it does not decode."""
    try:
        value = cbor2.loads(blob)
    except Exception as exc:  # (cbor2 raises several kinds, and more on garbled bytes)
        raise StoreDamaged(what, f"it does not decode ({type(exc).__name__})") from None
    if not isinstance(value, dict):
        raise StoreDamaged(what, "it does not decode to a map")
    return value


def revision(n: Any, blob: bytes, stored: Any) -> Doc:
    what = f"revision {n}"
    summed("revisions", what, stored, n, blob)
    return decoded(blob, what)


def document(kind: str, id: str, tag: Any, blob: bytes, stored: Any) -> Doc:
    what = f"document {kind}/{id}"
    summed("documents", what, stored, kind, id, tag, blob)
    return decoded(blob, what)


def meta(key: str, blob: bytes, stored: Any) -> Any:
    what = f"the stored value `{key}`"
    summed("meta", what, stored, key, blob)
    try:
        return cbor2.loads(blob)
    except Exception as exc:
        raise StoreDamaged(what, f"it does not decode ({type(exc).__name__})") from None


def summed(table: str, what: str, stored: Any, *columns: Any) -> None:
    """StoreDamaged unless `stored` is the checksum of the row's `columns`."""
    if stored != row_digest(table, columns):
        raise StoreDamaged(what, "it does not match its checksum")
