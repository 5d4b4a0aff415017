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

from policy.store import SPENT_OVERFLOW

_MAX = (1 << 63) - 1
_MIN = -(1 << 63)

# A subject's last row in (at, rowid) order; the same before a time. Both from the index.
_LAST = "SELECT at, cum FROM ledger WHERE subject = ? ORDER BY at DESC, rowid DESC LIMIT 1"
_SPENT = (
    "SELECT (SELECT cum FROM ledger WHERE subject = ?1 ORDER BY at DESC, rowid DESC LIMIT 1), "
    "(SELECT cum FROM ledger WHERE subject = ?1 AND at < ?2 ORDER BY at DESC, rowid DESC "
    "LIMIT 1)"
)
_INSERT = "INSERT INTO ledger (subject, at, micros, cum) VALUES (?, ?, ?, ?)"


def _stored(total: int) -> int | str:
    return total if _MIN <= total <= _MAX else str(total)


def spent(cursor: sqlite3.Cursor, subject: str, since_ms: int) -> int:
    """`Store.spent`, on a cursor of the store's connection (under the store's lock)."""
    last, before = cursor.execute(_SPENT, (subject, since_ms)).fetchone()
    if last is None:
        return 0
    total = int(last) - (0 if before is None else int(before))
    # SQLite's sum() failed past 64 bits, and the store said SPENT_OVERFLOW: still so.
    return total if _MIN <= total <= _MAX else SPENT_OVERFLOW


def charge(cursor: sqlite3.Cursor, subjects: Sequence[str], micros: int, at_ms: int) -> None:
    """`Store.charge`, inside the store's write transaction (which keeps another process
    from adding a row between the look-up of a subject's last row and the new one)."""
    for subject in subjects:
        last = cursor.execute(_LAST, (subject,)).fetchone()
        if last is None:
            cursor.execute(_INSERT, (subject, at_ms, micros, _stored(micros)))
        else:
            # At the last row's time if that is later (see above: only ever later).
            at = max(at_ms, int(last[0]))
            cursor.execute(_INSERT, (subject, at, micros, _stored(int(last[1]) + micros)))


def add_running_totals(db: sqlite3.Connection) -> None:
    """A ledger written before rows kept `cum`: add the column and fill it in, in one
    transaction (another process opening the file at once finds the column there once it
    has the write lock, and does nothing). The totals go through a temporary table, read
    from one scan of the index and then written in one UPDATE, not written into the
    ledger while it is being scanned. (The column added may hold NULL, where a new
    database's may not: SQLite adds a NOT NULL column only with a default, and no default
    is a right total.)"""
    if _has_cum(db):
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        if not _has_cum(db):
            db.execute("ALTER TABLE ledger ADD COLUMN cum")
            db.execute("CREATE TEMP TABLE ledger_cum (id INTEGER PRIMARY KEY, cum)")
            rows = db.execute(
                "SELECT rowid, subject, micros FROM ledger ORDER BY subject, at, rowid"
            )
            db.executemany("INSERT INTO temp.ledger_cum (id, cum) VALUES (?, ?)", _totals(rows))
            db.execute(
                "UPDATE ledger SET cum = totals.cum FROM temp.ledger_cum AS totals "
                "WHERE ledger.rowid = totals.id"
            )
            db.execute("DROP TABLE temp.ledger_cum")
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


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
