"""The budget ledger: a running total per subject, so a sum is two look-ups.

Every row keeps `cum`, its subject's total charged up to and including it, in the order
(at, row key) that the index on (subject, at) keeps (SQLite appends the rowid to every
index entry; PostgreSQL's index is on (subject, at, id)). What a subject was charged at
or after `since` is then its last row's `cum` minus the `cum` of its last row before
`since`: two searches of the index, however many rows the subject has, where summing the
window read every row of it (a `total` budget, or a busy 7-day window, made each charged
decision slower than the last).

A running total needs each subject's rows in time order, so a charge is never recorded
before its subject's last row: one whose time is earlier (another process's clock, or a
clock stepped back) is recorded at the last row's time. Later, never earlier: the charge
stays in every window at least as long as at its own time, so it can only deny more
calls, never allow more.

The logic is the same for both stores; each passes its `Statements` (its SQL, with named
parameters `subject`, `since`, `at`, `micros`, `cum`, `sum`) and a function that runs one
and returns its rows. In SQLite `cum` has no declared type (no affinity): an integer while
it fits in 64 bits, and past that its decimal digits as text, where a column of INTEGER
affinity would have turned such digits into an inexact REAL. In PostgreSQL it is a
`numeric`. Either way a sum past 64 bits is read exactly, and says SPENT_OVERFLOW (more
than any cap); a charge never fails for it. A row's checksum covers `cum` as SQLite keeps
it (an integer, or its digits as text past 64 bits), in both stores.

Isolation is the ledger's own, not borrowed from "one writer at a time": every read of a
subject's rows inside a transaction first holds the subject (`Hold`) until the
transaction ends, so no other transaction charges it between a check and a charge, and a
sum read once stays exact to the COMMIT (what lets the service read each sum once per
batch). SQLite's write transaction holds the whole file; PostgreSQL takes a
transaction-scoped advisory lock per subject (policy/store/postgres.py), apart from the
writer lock that keeps the decision log gap-free. `charge_within` is the atomic
check-and-charge built on it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from policy.store import SPENT_OVERFLOW, Limit, StoreDamaged
from policy.store.rowsum import row_digest

_MAX = (1 << 63) - 1
_MIN = -(1 << 63)

# Runs one statement with its named parameters and returns its rows.
Query = Callable[[str, dict[str, Any]], list[tuple[Any, ...]]]
# Holds a subject's rows for the rest of the current transaction (no other transaction
# charges it until then), before they are read; outside a transaction, does nothing.
Hold = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Statements:
    """A store's SQL for the ledger. `last`: a subject's last row in (at, key) order, as
    (at, micros, cum, sum); `spent`: that row as (0, at, micros, cum, sum) and the last
    before `since` as (1, ...), both from the index; `insert`: a row. `cum`: the value
    a running total is written as."""

    last: str
    spent: str
    insert: str
    cum: Callable[[int], Any]


def _stored(total: int) -> int | str:
    return total if _MIN <= total <= _MAX else str(total)


_SQLITE_ROW = "SELECT at, micros, cum, sum FROM ledger WHERE subject = :subject"
_SQLITE_ORDER = "ORDER BY at DESC, rowid DESC LIMIT 1"
SQLITE = Statements(
    last=f"{_SQLITE_ROW} {_SQLITE_ORDER}",
    spent=(
        f"SELECT 0, * FROM ({_SQLITE_ROW} {_SQLITE_ORDER}) UNION ALL "
        f"SELECT 1, * FROM ({_SQLITE_ROW} AND at < :since {_SQLITE_ORDER})"
    ),
    insert=(
        "INSERT INTO ledger (subject, at, micros, cum, sum) "
        "VALUES (:subject, :at, :micros, :cum, :sum)"
    ),
    cum=_stored,
)
_PG_ROW = "SELECT at, micros, cum, sum FROM ledger WHERE subject = %(subject)s"
_PG_ORDER = "ORDER BY at DESC, id DESC LIMIT 1"
POSTGRES = Statements(
    last=f"{_PG_ROW} {_PG_ORDER}",
    spent=(
        f"(SELECT 0, at, micros, cum, sum FROM ({_PG_ROW} {_PG_ORDER}) AS last) UNION ALL "
        f"(SELECT 1, at, micros, cum, sum FROM ({_PG_ROW} AND at < %(since)s {_PG_ORDER}) "
        "AS before)"
    ),
    insert=(
        "INSERT INTO ledger (subject, at, micros, cum, sum) "
        "VALUES (%(subject)s, %(at)s, %(micros)s, %(cum)s, %(sum)s)"
    ),
    cum=int,
)


def _summed_cum(cum: Any) -> Any:
    """`cum` as its checksum covers it: an integer, or its digits past 64 bits (a
    `numeric` read back as a Decimal is that integer; one with a fraction is left as it
    is, and matches no checksum)."""
    if isinstance(cum, Decimal) and cum.is_finite() and cum == cum.to_integral_value():
        return _stored(int(cum))
    return cum


def _checked(subject: str, row: tuple[Any, ...]) -> tuple[int, int]:
    """A row's (at, cum), once its checksum matches (StoreDamaged if it does not)."""
    at, micros, cum, stored = row
    cum = _summed_cum(cum)
    if isinstance(stored, memoryview):
        stored = bytes(stored)
    if stored != row_digest("ledger", (subject, at, micros, cum)):
        raise StoreDamaged(f"a ledger row of `{subject}`", "it does not match its checksum")
    try:
        return int(at), int(cum)
    except (TypeError, ValueError):
        raise StoreDamaged(f"a ledger row of `{subject}`", "its total is not a number") from None


def _insert(run: Query, sql: Statements, subject: str, at: int, micros: int, total: int) -> None:
    summed = _stored(total)
    run(
        sql.insert,
        {
            "subject": subject, "at": at, "micros": micros, "cum": sql.cum(total),
            "sum": row_digest("ledger", (subject, at, micros, summed)),
        },
    )  # fmt: skip


def spent(run: Query, sql: Statements, subject: str, since_ms: int, hold: Hold) -> int:
    """`Store.spent`, through the store's connection (under the store's lock)."""
    hold(subject)
    rows = run(sql.spent, {"subject": subject, "since": since_ms})
    found = {which: row for which, *row in rows}
    if 0 not in found:
        return 0
    _, last = _checked(subject, tuple(found[0]))
    total = last - (_checked(subject, tuple(found[1]))[1] if 1 in found else 0)
    # SQLite's sum() failed past 64 bits, and the store said SPENT_OVERFLOW: still so.
    return total if _MIN <= total <= _MAX else SPENT_OVERFLOW


def charge(
    run: Query, sql: Statements, subjects: Sequence[str], micros: int, at_ms: int, hold: Hold
) -> None:
    """`Store.charge`, inside a transaction: each subject held (`hold`) before its last
    row is read, so no other transaction adds a row between that look-up and the new one."""
    for subject in subjects:
        hold(subject)
        rows = run(sql.last, {"subject": subject})
        if not rows:
            _insert(run, sql, subject, at_ms, micros, micros)
        else:
            at, cum = _checked(subject, rows[0])
            # At the last row's time if that is later (see above: only ever later).
            _insert(run, sql, subject, max(at_ms, at), micros, cum + micros)


def charge_within(
    run: Query,
    sql: Statements,
    limits: Sequence[Limit],
    subjects: Sequence[str],
    micros: int,
    at_ms: int,
    hold: Hold,
) -> int | None:
    """`Store.charge_within`, inside a transaction: the index of the first limit `micros`
    more would pass (nothing charged), or None once every subject is charged. Each
    limit's subject is held from its sum's read on, so the check still holds at the
    charge."""
    for index, limit in enumerate(limits):
        if spent(run, sql, limit.subject, limit.since_ms, hold) + micros > limit.micros:
            return index
    charge(run, sql, subjects, micros, at_ms, hold)
    return None


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
