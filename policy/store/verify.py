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
_MOST = (1 << 63) - 1  # SQLite's largest integer


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
    if table == "changes":
        return f"change {row[0]}"
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
    columns = ", ".join(schema.COVERED[table]) + ", sum"
    last: Any = None
    while True:
        batch = schema.after_key(db, table, key, columns, last, _AT_ONCE)
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


def _log_runs(db: sqlite3.Connection, after: int | None, limit: int) -> list[tuple[Any, ...]]:
    return schema.after_key(db, "decisions", "seq", "count, body, sum", after, limit)


@dataclass(frozen=True, slots=True)
class _Unreadable:
    """Runs after `after` (None: from the start) that do not read, up to `resume` (the
    first that reads again; None: none does)."""

    after: int | None
    resume: int | None
    message: str


def _runs(db: sqlite3.Connection) -> Iterator[tuple[Any, ...] | _Unreadable]:
    """Every run of the log in seq order, a thousand at a time; where pages do not read,
    a run at a time up to them, then an `_Unreadable` for what is skipped."""
    last: int | None = None
    while True:
        try:
            batch = _log_runs(db, last, _AT_ONCE)
        except sqlite3.DatabaseError:
            batch = None
        if batch is not None:
            yield from batch
            if len(batch) < _AT_ONCE:
                return
            last = int(batch[-1][0])
            continue
        for _ in range(_AT_ONCE):  # (up to the damage, a run at a time)
            try:
                rows = _log_runs(db, last, 1)
            except sqlite3.DatabaseError as exc:
                resume = _resume(db, 0 if last is None else last)
                yield _Unreadable(last, resume, str(exc).lower())
                if resume is None:
                    return
                last = resume - 1
                break
            if not rows:
                return
            yield rows[0]
            last = int(rows[0][0])


def _readable_after(db: sqlite3.Connection, bound: int) -> int | bool | None:
    """The first run after `bound` if it reads (None: there is none), False if not."""
    try:
        rows = _log_runs(db, bound, 1)
    except sqlite3.DatabaseError:
        return False
    return int(rows[0][0]) if rows else None


def _resume(db: sqlite3.Connection, last: int) -> int | None:
    """The first run past the damage after seq `last` that reads: bounds `last + 1`,
    `last + 2`, `last + 4` ... until one reads, then halved back to the nearest."""
    failed, step = last, 1
    while True:
        found = _readable_after(db, last + step)
        if found is not False:
            break
        failed = last + step
        if last + 2 * step > _MOST:  # (nothing past the damage reads, to the last seq there can be)
            return None
        step *= 2
    lo, hi = failed, last + step  # (after `lo` does not read; after `hi` does)
    while hi - lo > 1:
        middle = (lo + hi) // 2
        there = _readable_after(db, middle)
        if there is False:
            lo = middle
        else:
            hi, found = middle, there
    return None if found is None or found is False else int(found)


def _log(db: sqlite3.Connection, decode_row: Callable[[bytes], object]) -> Iterator[Finding]:
    chain = Chain()
    before: tuple[Any, ...] | _Unreadable | None = None  # (the run read, waiting for the next)
    after_unreadable = False
    for item in _runs(db):
        if before is not None:
            yield from _one(chain, before, item, decode_row, after_unreadable)
            after_unreadable = isinstance(before, _Unreadable)
        before = item
    if before is not None:
        yield from _one(chain, before, None, decode_row, after_unreadable)


def _one(
    chain: Chain, item: tuple[Any, ...] | _Unreadable,
    following: tuple[Any, ...] | _Unreadable | None, decode_row: Callable[[bytes], object],
    after_unreadable: bool,
) -> Iterator[Finding]:  # fmt: skip
    """The findings of one run (or stretch that does not read), `following` the next."""
    if isinstance(item, _Unreadable):
        first = (0 if item.after is None else item.after) + 1
        detail = f"its pages do not read ({item.message})"
        if item.resume is None:
            yield Finding(f"decisions from {first} on", "unreadable", detail)
            return
        yield _finding(first, item.resume - 1, "unreadable", detail)
        chain.end, chain.chained_to = first, b""  # (the next run's link cannot be checked)
        return
    seq, count, body, stored = item
    next_seq = following[0] if isinstance(following, tuple) else None
    if isinstance(following, _Unreadable):
        next_seq = None if following.after is None else following.after + 1
    last = extent(seq, count, next_seq)
    gap = None if after_unreadable else chain.missing(seq)
    if gap is not None:
        yield _finding(gap.seq, gap.last_seq, gap.why, gap.detail)
    whole = isinstance(body, bytes) and isinstance(count, int)
    digest = log_digest(chain.chained_to, seq, count, body) if whole else None
    damaged = chain.check(seq, last, stored, digest, whole and packed(count, body))
    if damaged is not None:
        yield _finding(damaged.seq, damaged.last_seq, damaged.why, damaged.detail)
        return
    yield from _undecodable(seq, count, body, decode_row)


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
