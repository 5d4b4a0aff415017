"""Reading a store's SQLite file behind its back, for the storage tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def table_size(db: Path, table: str) -> tuple[int, int]:
    """Rows and bytes (of `body`) in `table`, read through a connection of its own."""
    with sqlite3.connect(db) as connection:
        rows, size = connection.execute(
            f"SELECT count(*), coalesce(sum(length(body)), 0) FROM {table}"
        ).fetchone()
    connection.close()
    return int(rows), int(size)
