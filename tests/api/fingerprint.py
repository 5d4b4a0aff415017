"""What an SQLite database of Charter holds, as digests a test compares before and after a
request (tests/api/fuzzworld.py, tests/fuzz/schema_hooks.py): each table's rows (the
append-only log and ledger by their counts and last rows), the documents by kind. Read on
a connection of its own, so it sees what was committed, whatever the service's holds."""

from __future__ import annotations

import hashlib
import sqlite3
from typing import Any


def reader(db: str) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)


def fingerprint(conn: sqlite3.Connection) -> dict[str, tuple[Any, ...]]:
    out: dict[str, tuple[Any, ...]] = {}
    tables = [row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    )]  # fmt: skip
    for table in tables:
        if table == "decisions":
            query = "SELECT count(*), max(seq), total(count) FROM decisions"
            out[table] = tuple(conn.execute(query).fetchone())
        elif table == "ledger":
            query = "SELECT count(*), max(rowid), total(micros) FROM ledger"
            out[table] = tuple(conn.execute(query).fetchone())
        elif table == "documents":
            for kind, count, digest in _documents(conn):
                out[f"documents:{kind}"] = (count, digest)
        elif table == "changes":
            # (an approval's notes are written with its document, which the checks
            # follow: `documents:approvals`; the others are what caches drop)
            rows = conn.execute(
                "SELECT * FROM changes WHERE kind NOT LIKE 'approval.%' ORDER BY 1"
            ).fetchall()
            out[table] = (len(rows), hashlib.sha256(repr(rows).encode()).hexdigest())
        else:
            rows = conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
            out[table] = (len(rows), hashlib.sha256(repr(rows).encode()).hexdigest())
    return out


def _documents(conn: sqlite3.Connection) -> list[tuple[str, int, str]]:
    found: dict[str, tuple[int, Any]] = {}
    query = "SELECT kind, id, tag, body FROM documents ORDER BY kind, pos"
    for kind, *row in conn.execute(query):
        count, digest = found.get(kind, (0, hashlib.sha256()))
        digest.update(repr(row).encode())
        found[kind] = (count + 1, digest)
    return [(kind, count, digest.hexdigest()) for kind, (count, digest) in found.items()]
