"""The SQLite store's schema version and its migrations, applied in order at open.

The version is SQLite's `PRAGMA user_version` (0 in a file no charter numbered: a new one,
or one an older charter wrote). Opening a file applies, in one write transaction, every
migration past its version and sets the version to the last one applied; another process
opening the file at once finds the version moved once it has the write lock, and applies
nothing. A file whose version is past `VERSION` was written by a newer charter, whose rows
this one could misread: it is refused (`StoreTooNew`), never opened.

1. the tables (`SCHEMA` and `TEXTS`), the log's `count` column (a log written a row per
   decision is read as runs of one) and the ledger's running totals (policy/store/ledger.py);
2. a `sum` column in every table, filled in: each row's checksum, and the decision log's
   chain (policy/store/rowsum.py);
3. an index of the documents by kind and position (`LIST_INDEX`): a page of a list reads
   its own rows, where it sorted every document of its kind;
4. the change feed's `changes` table (`CHANGES`, policy/store/changes.py), and the
   `cache_epoch` named value it replaces removed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

from policy.store import StoreTooNew, ledger
from policy.store.rowsum import GENESIS, log_digest, row_digest

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS revisions (n INTEGER PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
  pos INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL, id TEXT NOT NULL, tag TEXT, body BLOB NOT NULL,
  UNIQUE (kind, id)
);
CREATE INDEX IF NOT EXISTS documents_tag ON documents (kind, tag, pos);
CREATE TABLE IF NOT EXISTS decisions (seq INTEGER PRIMARY KEY, body BLOB NOT NULL,
  count INTEGER NOT NULL DEFAULT 1);
CREATE TABLE IF NOT EXISTS ledger (subject TEXT NOT NULL, at INTEGER NOT NULL,
  micros INTEGER NOT NULL, cum NOT NULL);
CREATE INDEX IF NOT EXISTS ledger_subject ON ledger (subject, at);
"""
# The revisions' file texts, each once under its SHA-256 (policy/store/texts.py). Not in
# SCHEMA, whose tables are what makes a file a charter database (policy/store/probe.py):
# one an older charter made lacks it until this version opens it.
TEXTS = "CREATE TABLE IF NOT EXISTS texts (digest BLOB PRIMARY KEY, body BLOB NOT NULL);"

# A page of a list (`WHERE kind = ? AND pos > ? ORDER BY pos LIMIT ?`) is a seek in this
# index and a read of the page's rows. Without it SQLite took every document of the kind
# from `documents_tag` and sorted them for each page: 29 ms a page of agents at 200,000
# agents, 0.1 ms with it.
LIST_INDEX = "CREATE INDEX IF NOT EXISTS documents_list ON documents (kind, pos)"
# What each write transaction changed that other processes cache, numbered (`seq`) in
# commit order without gaps; `sum` covers the number too (policy/store/changes.py).
CHANGES = (
    "CREATE TABLE IF NOT EXISTS changes (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, "
    "key TEXT NOT NULL, sum BLOB)"
)
# The version from which every row carries its checksum.
CHECKSUMS = 2

# Each checksummed table: its key columns and the columns its `sum` covers, in order.
KEYS = {
    "meta": ("key",),
    "revisions": ("n",),
    "texts": ("digest",),
    "documents": ("pos",),
    "ledger": ("rowid",),
    "changes": ("seq",),
}
COVERED = {
    "meta": ("key", "body"),
    "revisions": ("n", "body"),
    "texts": ("digest", "body"),
    "documents": ("kind", "id", "tag", "body"),
    "ledger": ("subject", "at", "micros", "cum"),
    "changes": ("seq", "kind", "key"),
}
_AT_ONCE = 1000  # rows a migration reads before writing their sums


def version(db: sqlite3.Connection) -> int:
    (found,) = db.execute("PRAGMA user_version").fetchone()
    return int(found)


def _tables(db: sqlite3.Connection) -> None:
    for statement in (SCHEMA + TEXTS).split(";"):
        if statement.strip():
            db.execute(statement)
    columns = [c[1] for c in db.execute("PRAGMA table_info(decisions)")]
    if "count" not in columns:  # a log written a row per decision: runs of one
        db.execute("ALTER TABLE decisions ADD COLUMN count INTEGER NOT NULL DEFAULT 1")
    ledger.fill_running_totals(db)


def after_key(
    db: sqlite3.Connection, table: str, key: str, columns: str, after: Any, limit: int
) -> list[tuple[Any, ...]]:
    """`key` and `columns` of the rows of `table` after the key `after` (None: from the
    first), at most `limit`, in key order: a seek in the key's index for each batch, never
    a scan from the first row (which `?1 IS NULL OR key > ?1` is)."""
    where, params = ("", (limit,)) if after is None else (f" WHERE {key} > ?", (after, limit))
    statement = f"SELECT {key}, {columns} FROM {table}{where} ORDER BY {key} LIMIT ?"
    return db.execute(statement, params).fetchall()


def _rows(
    db: sqlite3.Connection, table: str, key: str, columns: str
) -> Iterator[list[tuple[Any, ...]]]:
    """A table's rows a thousand at a time, in key order, each batch read whole before
    the caller writes."""
    last: Any = None
    while True:
        rows = after_key(db, table, key, columns, last, _AT_ONCE)
        if not rows:
            return
        yield rows
        last = rows[-1][0]


def _add_sum(db: sqlite3.Connection, table: str) -> None:
    """The `sum` column, unless the table has it (rows an older charter wrote into a file
    a later one had made: their sums are computed all the same)."""
    if not any(column[1] == "sum" for column in db.execute(f"PRAGMA table_info({table})")):
        db.execute(f"ALTER TABLE {table} ADD COLUMN sum BLOB")


def _checksums(db: sqlite3.Connection) -> None:
    for table in ("meta", "revisions", "texts", "documents", "ledger"):  # (the tables of 2)
        (key,) = KEYS[table]
        _add_sum(db, table)
        for rows in _rows(db, table, key, ", ".join(COVERED[table])):
            db.executemany(
                f"UPDATE {table} SET sum = ? WHERE {key} = ?",
                [(row_digest(table, row[1:]), row[0]) for row in rows],
            )
    _add_sum(db, "decisions")
    chained_to = GENESIS
    for rows in _rows(db, "decisions", "seq", "count, body"):
        sums = []
        for seq, count, body in rows:
            chained_to = log_digest(chained_to, int(seq), int(count), bytes(body))
            sums.append((chained_to, seq))
        db.executemany("UPDATE decisions SET sum = ? WHERE seq = ?", sums)


def _list_index(db: sqlite3.Connection) -> None:
    db.execute(LIST_INDEX)


def _changes(db: sqlite3.Connection) -> None:
    db.execute(CHANGES)
    db.execute("DELETE FROM meta WHERE key = 'cache_epoch'")


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    _tables,
    _checksums,
    _list_index,
    _changes,
)
VERSION = len(MIGRATIONS)


def refusal(db: sqlite3.Connection) -> StoreTooNew | None:
    """A file written by a newer charter, or None."""
    found = version(db)
    return StoreTooNew(found, VERSION) if found > VERSION else None


def migrate(db: sqlite3.Connection) -> None:
    """Bring the open file up to `VERSION` (StoreTooNew past it), in one transaction."""
    too_new = refusal(db)
    if too_new is not None:
        raise too_new
    if version(db) == VERSION:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        found = version(db)  # (another process may have migrated it meanwhile)
        if found > VERSION:
            raise StoreTooNew(found, VERSION)
        for number, step in enumerate(MIGRATIONS, 1):
            if number > found:
                step(db)
        db.execute(f"PRAGMA user_version = {VERSION}")
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
