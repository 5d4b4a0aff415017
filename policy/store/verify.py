"""Every row of a stopped database checked: what `charter db check` reports, row by row.

Each table's rows are read in key order and checked as the store's reads check them
(policy/store/rowsum.py): the checksum, and that the body decodes. The decision log is
walked as one chain (policy/store/logcheck.py): each run's checksum and link, the seqs
missing between runs, and each of its rows decoded with `decode_log_row` (the service's
reader: the store keeps log rows as bytes it does not read). A table whose pages cannot
be read past some row is reported there, and the check goes on with the next table.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import cbor2

from policy.store import schema
from policy.store.logcheck import Chain, extent, packed
from policy.store.rowsum import log_digest, row_digest

_AT_ONCE = 1000


@dataclass(frozen=True, slots=True)
class Finding:
    """`where`: the row (`decisions 5`, `decisions 5 to 7`, `document agents/a1`,
    `revision 3`, `meta admin_token_issued`, `ledger row 12`, `text 3fa2...`) or a
    table; `why`: a stable word (`checksum-mismatch`, `chain-broken`, `missing`,
    `undecodable`, `unreadable`); `detail`: how."""

    where: str
    why: str
    detail: str


def _cbor_map(blob: Any) -> bool:
    try:
        return isinstance(cbor2.loads(blob), dict)
    except Exception:
        return False


def _cbor(blob: Any) -> bool:
    try:
        cbor2.loads(blob)
    except Exception:
        return False
    return True


def _name(table: str, row: tuple[Any, ...]) -> str:
    if table == "documents":
        return f"document {row[1]}/{row[2]}"
    if table == "revisions":
        return f"revision {row[0]}"
    if table == "meta":
        return f"meta {row[0]}"
    if table == "texts":
        return f"text {bytes(row[0]).hex()[:16] if isinstance(row[0], bytes) else row[0]}"
    return f"ledger row {row[0]}"


def _decodes(table: str, row: tuple[Any, ...]) -> bool:
    if table in ("documents", "revisions"):
        return _cbor_map(row[-1])
    if table == "meta":
        return _cbor(row[-1])
    if table == "texts":
        digest, body = row
        return isinstance(body, bytes) and hashlib.sha256(body).digest() == digest
    return True


def _rows(db: sqlite3.Connection, table: str) -> Iterator[tuple[Any, ...]]:
    """(key, *covered columns, sum) of every row of `table`, in key order, in batches."""
    (key,) = schema.KEYS[table]
    columns = ", ".join(schema.COVERED[table])
    statement = (
        f"SELECT {key}, {columns}, sum FROM {table} WHERE ?1 IS NULL OR {key} > ?1 "
        f"ORDER BY {key} LIMIT ?2"
    )
    last: Any = None
    while True:
        batch = db.execute(statement, (last, _AT_ONCE)).fetchall()
        yield from batch
        if len(batch) < _AT_ONCE:
            return
        last = batch[-1][0]


def _table(db: sqlite3.Connection, table: str) -> Iterator[Finding]:
    where = table
    try:
        for key, *covered, stored in _rows(db, table):
            shown = _name(table, (key, *covered))
            where = f"{table} after {shown}"
            if stored != row_digest(table, tuple(covered)):
                yield Finding(shown, "checksum-mismatch", "it does not match its checksum")
            elif not _decodes(table, tuple(covered)):
                yield Finding(shown, "undecodable", "it does not decode")
    except sqlite3.DatabaseError as exc:
        yield Finding(where, "unreadable", f"its pages do not read ({str(exc).lower()})")


def _log(db: sqlite3.Connection, decode_row: Callable[[bytes], object]) -> Iterator[Finding]:
    chain = Chain()
    statement = (
        "SELECT seq, count, body, sum FROM decisions WHERE ?1 IS NULL OR seq > ?1 "
        "ORDER BY seq LIMIT ?2"
    )
    last_seq: Any = None
    try:
        while True:
            batch = db.execute(statement, (last_seq, _AT_ONCE)).fetchall()
            for i, (seq, count, body, stored) in enumerate(batch):
                following = batch[i + 1][0] if i + 1 < len(batch) else _next_run(db, seq)
                last = extent(seq, count, following)
                gap = chain.missing(seq)
                if gap is not None:
                    yield _finding(gap.seq, gap.last_seq, gap.why, gap.detail)
                whole = isinstance(body, bytes) and isinstance(count, int)
                digest = log_digest(chain.chained_to, seq, count, body) if whole else None
                unpacks = whole and packed(count, body)
                damaged = chain.check(seq, last, stored, digest, unpacks)
                if damaged is not None:
                    yield _finding(damaged.seq, damaged.last_seq, damaged.why, damaged.detail)
                    continue
                yield from _undecodable(seq, count, body, decode_row)
            if len(batch) < _AT_ONCE:
                return
            last_seq = batch[-1][0]
    except sqlite3.DatabaseError as exc:
        after = "" if last_seq is None else f" after seq {chain.end - 1}"
        yield Finding(f"decisions{after}", "unreadable", f"its pages do not read ({exc})")


def _next_run(db: sqlite3.Connection, seq: int) -> int | None:
    found = db.execute("SELECT min(seq) FROM decisions WHERE seq > ?", (seq,)).fetchone()
    return None if found is None or found[0] is None else int(found[0])


def _undecodable(
    seq: int, count: int, body: bytes, decode_row: Callable[[bytes], object]
) -> Iterator[Finding]:
    if count == 1:
        rows = [body]
    else:
        sizes = [int.from_bytes(body[4 * i : 4 * i + 4], "little") for i in range(count)]
        at = 4 * count
        rows = []
        for size in sizes:
            rows.append(body[at : at + size])
            at += size
    for i, row in enumerate(rows):
        try:
            decode_row(row)
        except Exception as exc:
            yield _finding(
                seq + i, seq + i, "undecodable", f"it does not decode ({type(exc).__name__})"
            )


def _finding(seq: int, last: int, why: str, detail: str) -> Finding:
    where = f"decisions {seq}" if seq == last else f"decisions {seq} to {last}"
    return Finding(where, why, detail)


def every_damage(
    db: sqlite3.Connection, decode_log_row: Callable[[bytes], object]
) -> Iterator[Finding]:
    """What is damaged in the rows of a database at the current schema version."""
    for table in schema.KEYS:
        yield from _table(db, table)
    yield from _log(db, decode_log_row)
