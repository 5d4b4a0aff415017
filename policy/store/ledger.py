"""The SQLite store's budget ledger: a running total per subject, so a sum is two look-ups.

Every row keeps `cum`, its subject's total charged up to and including it, in the order
(at, rowid) that the index `ledger_subject (subject, at)` keeps (SQLite appends the rowid
to every index entry). What a subject was charged at or after `since` is then its last
row's `cum` minus the `cum` of its last row before `since`: two searches of the index,
however many rows the subject has, where summing the window read every row of it (a
`total` budget, or a busy 7-day window, made each charged decision slower than the last).

A running total needs each subject's rows in time order, so a charge is never recorded
before its subject's last row: one whose time is earlier (another process's clock, or a
clock stepped back) is recorded at the last row's time. Later, never earlier: the charge
stays in every window at least as long as at its own time, so it can only deny more
calls, never allow more.

`cum` has no declared type (no affinity): an integer while it fits in 64 bits, and past
that its decimal digits as text, where a column of INTEGER affinity would have turned such
digits into an inexact REAL. So a sum past 64 bits is read exactly, and says
SPENT_OVERFLOW as SQLite's sum() failing on it did; a charge never fails for it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from policy.store import SPENT_OVERFLOW, StoreDamaged
from policy.store.rowsum import row_digest

_MAX = (1 << 63) - 1
_MIN = -(1 << 63)

# A subject's last row in (at, rowid) order; the same before a time. Both from the index,
# each with the columns its checksum covers (policy/store/rowsum.py), checked when read.
_ROW = "SELECT at, micros, cum, sum FROM ledger WHERE subject = ?1"
_LAST = f"{_ROW} ORDER BY at DESC, rowid DESC LIMIT 1"
_SPENT = (
    f"SELECT 0, * FROM ({_ROW} ORDER BY at DESC, rowid DESC LIMIT 1) UNION ALL "
    f"SELECT 1, * FROM ({_ROW} AND at < ?2 ORDER BY at DESC, rowid DESC LIMIT 1)"
)
_INSERT = "INSERT INTO ledger (subject, at, micros, cum, sum) VALUES (?, ?, ?, ?, ?)"


def _stored(total: int) -> int | str:
    return total if _MIN <= total <= _MAX else str(total)


def _checked(subject: str, row: tuple[Any, ...]) -> tuple[int, int]:
    """A row's (at, cum), once its checksum matches (StoreDamaged if it does not)."""
    at, micros, cum, stored = row
    if stored != row_digest("ledger", (subject, at, micros, cum)):
        raise StoreDamaged(f"a ledger row of `{subject}`", "it does not match its checksum")
    try:
        return int(at), int(cum)
    except (TypeError, ValueError):
        raise StoreDamaged(f"a ledger row of `{subject}`", "its total is not a number") from None


def _insert(cursor: sqlite3.Cursor, subject: str, at: int, micros: int, total: int) -> None:
    cum = _stored(total)
    cursor.execute(
        _INSERT, (subject, at, micros, cum, row_digest("ledger", (subject, at, micros, cum)))
    )


def spent(cursor: sqlite3.Cursor, subject: str, since_ms: int) -> int:
    """`Store.spent`, on a cursor of the store's connection (under the store's lock)."""
    found = {which: row for which, *row in cursor.execute(_SPENT, (subject, since_ms))}
    if 0 not in found:
        return 0
    _, last = _checked(subject, tuple(found[0]))
    total = last - (_checked(subject, tuple(found[1]))[1] if 1 in found else 0)
    # SQLite's sum() failed past 64 bits, and the store said SPENT_OVERFLOW: still so.
    return total if _MIN <= total <= _MAX else SPENT_OVERFLOW


def charge(cursor: sqlite3.Cursor, subjects: Sequence[str], micros: int, at_ms: int) -> None:
    """`Store.charge`, inside the store's write transaction (which keeps another process
    from adding a row between the look-up of a subject's last row and the new one)."""
    for subject in subjects:
        last = cursor.execute(_LAST, (subject,)).fetchone()
        if last is None:
            _insert(cursor, subject, at_ms, micros, micros)
        else:
            at, cum = _checked(subject, last)
            # At the last row's time if that is later (see above: only ever later).
            _insert(cursor, subject, max(at_ms, at), micros, cum + micros)


def fill_running_totals(db: sqlite3.Connection) -> None:
    """A ledger written before rows kept `cum`: add the column and fill it in, inside the
    caller's write transaction (policy/store/schema.py's first migration). The totals go
    through a temporary table, read from one scan of the index and then written in one
    UPDATE, not written into the ledger while it is being scanned. (The column added may
    hold NULL, where a new database's may not: SQLite adds a NOT NULL column only with a
    default, and no default is a right total.)"""
    if _has_cum(db):
        return
    db.execute("ALTER TABLE ledger ADD COLUMN cum")
    db.execute("CREATE TEMP TABLE ledger_cum (id INTEGER PRIMARY KEY, cum)")
    rows = db.execute("SELECT rowid, subject, micros FROM ledger ORDER BY subject, at, rowid")
    db.executemany("INSERT INTO temp.ledger_cum (id, cum) VALUES (?, ?)", _totals(rows))
    db.execute(
        "UPDATE ledger SET cum = totals.cum FROM temp.ledger_cum AS totals "
        "WHERE ledger.rowid = totals.id"
    )
    db.execute("DROP TABLE temp.ledger_cum")


def _has_cum(db: sqlite3.Connection) -> bool:
    return any(column[1] == "cum" for column in db.execute("PRAGMA table_info(ledger)"))


def _totals(rows: Iterator[tuple[int, str, int]]) -> Iterator[tuple[int, int | str]]:
    """(rowid, running total) of rows in (subject, at, rowid) order."""
    subject: str | None = None
    total = 0
    for rowid, row_subject, micros in rows:
        if row_subject != subject:
            subject, total = row_subject, 0
        total += micros
        yield rowid, _stored(total)
