"""A page of a list of documents is a seek in the (kind, pos) index (schema version 3).

`GET /v1/agents` and every other list reads `WHERE kind = ? AND pos > ? ORDER BY pos
LIMIT ?`. Without an index on (kind, pos), SQLite took every document of the kind and
sorted them for each page, so a page cost grew with the list and `scan` (page after
page) with its square. A file from before the index gets it when a store opens it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from policy.store import schema
from policy.store.sqlite import SqliteStore


def _fill(store: SqliteStore, agents: int) -> None:
    with store.atomic():
        for i in range(agents):
            store.insert("agents", f"a{i:05}", {"n": i}, tag=f"p{i % 7}")
            store.insert("approvals", f"x{i:05}", {"n": i}, tag="pending")


def _plan(store: SqliteStore, after: int) -> str:
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    try:
        store.page("agents", after, 51)
    finally:
        store._db.set_trace_callback(None)
    (statement,) = statements  # as run, with the values bound
    return " ".join(row[3] for row in store._db.execute("EXPLAIN QUERY PLAN " + statement))


def _steps(store: SqliteStore, after: int) -> int:
    count = 0

    def step() -> int:
        nonlocal count
        count += 1
        return 0

    store._db.set_progress_handler(step, 1)
    try:
        assert len(store.page("agents", after, 51)) == 51
    finally:
        store._db.set_progress_handler(None, 1)
    return count


def test_a_page_of_a_list_is_a_seek_in_the_list_index(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    _fill(store, 200)
    small = [_steps(store, after) for after in (0, 100)]
    more = [(f"b{i:05}", {"n": i}) for i in range(1_800)]
    with store.atomic():
        for name, body in more:
            store.insert("agents", name, body, tag="p0")
            store.insert("approvals", name, body, tag="pending")
    large = [_steps(store, after) for after in (0, 100)]
    assert large == small  # (a sort of the kind's 2,000 agents took ten times the steps)
    for after in (0, 150, 10_000):
        plan = _plan(store, after)
        assert plan == "SEARCH documents USING INDEX documents_list (kind=? AND pos>?)", plan
    store.close()


def test_a_file_from_before_the_index_gets_it_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = SqliteStore(path)
    _fill(store, 120)
    pages = [[row.id for row in store.page("agents", after, 51)] for after in (0, 51, 200)]
    store.close()
    with sqlite3.connect(path) as older:  # as schema version 2 left it
        older.execute("DROP INDEX documents_list")
        older.execute("PRAGMA user_version = 2")
    older.close()

    again = SqliteStore(path)
    assert schema.version(again._db) == schema.VERSION
    indexes = {row[1] for row in again._db.execute("PRAGMA index_list(documents)")}
    assert "documents_list" in indexes
    assert [[row.id for row in again.page("agents", a, 51)] for a in (0, 51, 200)] == pages
    assert "documents_list" in _plan(again, 0)
    again.close()
