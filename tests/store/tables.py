"""Reading a store's SQLite file behind its back, for the storage tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from policy.store import Damaged


def table_size(db: Path, table: str) -> tuple[int, int]:
    """Rows and bytes (of `body`) in `table`, read through a connection of its own."""
    with sqlite3.connect(db) as connection:
        rows, size = connection.execute(
            f"SELECT count(*), coalesce(sum(length(body)), 0) FROM {table}"
        ).fetchone()
    connection.close()
    return int(rows), int(size)


def as_an_older_charter_left_it(db: Path | str) -> None:
    """Mark the file as written by a charter before rows carried checksums (schema version
    1, policy/store/schema.py): rows written into it behind the store's back, as that
    charter wrote them, get their checksums when a store next opens it."""
    with sqlite3.connect(db) as connection:
        connection.execute("PRAGMA user_version = 1")
    connection.close()


def sound(rows: list[tuple[int, bytes | Damaged]]) -> list[tuple[int, bytes]]:
    """The log's rows as `read_decisions` gave them, each one sound (a `Damaged` among
    them fails the test that reads them)."""
    found: list[tuple[int, bytes]] = []
    for seq, row in rows:
        assert isinstance(row, bytes), (seq, row)
        found.append((seq, row))
    return found
