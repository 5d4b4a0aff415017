"""The SQLite store's own: WAL, its file, its writer lock, its pages (the contract both stores
keep is tested in test_contract.py)."""

from __future__ import annotations

import threading
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.store import StoreUnavailable
from policy.store.sqlite import SqliteStore


def test_documents_and_pages(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    assert store.insert("agents", "a", {"x": 1})
    assert not store.insert("agents", "a", {"x": 2})
    assert store.get("agents", "a") == {"x": 1}
    assert store.update("agents", "a", {"x": 3}, tag="t")
    assert not store.update("agents", "zz", {"x": 3})
    store.insert("agents", "b", {"x": 4})
    first = store.page("agents", 0, 1)
    assert [r.id for r in first] == ["a"]
    assert [r.id for r in store.page("agents", first[0].pos, 10)] == ["b"]
    assert [r.id for r in store.page("agents", 0, 10, tag="t")] == ["a"]
    assert store.delete("agents", "a") and not store.delete("agents", "a")
    assert [r.id for r in store.scan("agents")] == ["b"]
    wal = store._db.execute("PRAGMA journal_mode").fetchone()[0]
    assert wal == "wal"


def test_a_page_by_tag_is_a_search_of_the_tag_index(tmp_path: Path) -> None:
    """Whether an agent has children is a page of one by tag (agents are tagged with their
    parent): SQLite answers it from the (kind, tag, pos) index, not by reading the kind."""
    store = SqliteStore(tmp_path / "s.db")
    for i in range(200):
        store.insert("agents", f"a{i}", {"parent": f"p{i % 10}"}, tag=f"p{i % 10}")
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    assert [r.id for r in store.page("agents", 0, 1, tag="p3")] == ["a3"]
    assert store.page("agents", 0, 1, tag="nobody") == []
    store._db.set_trace_callback(None)
    assert len(statements) == 2
    for statement in statements:  # as run, with the values bound
        plan = " ".join(row[3] for row in store._db.execute("EXPLAIN QUERY PLAN " + statement))
        assert plan.startswith("SEARCH documents USING INDEX documents_tag (kind=? AND tag=?"), plan
    store.close()


def test_log_is_gap_free_across_rollbacks_and_threads(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    assert store.append_decisions([b'{"n":1}', b'{"n":2}']) == [1, 2]
    with pytest.raises(RuntimeError), store.atomic():
        store.append_decisions([b'{"n":3}'])
        raise RuntimeError("rolled back")
    assert store.append_decisions([b'{"n":4}']) == [3]
    other = SqliteStore(tmp_path / "s.db")  # a second process's connection
    versions = store.data_version(), other.data_version()

    def write(s: SqliteStore) -> None:
        for _ in range(50):
            s.append_decisions([b'{"n":0}'] * 3)

    threads = [threading.Thread(target=write, args=(s,)) for s in (store, other, store, other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seqs = [seq for seq, _ in store.read_decisions(0, 10_000)]
    assert seqs == list(range(1, 3 + 600 + 1))
    assert store.data_version() != versions[0] and other.data_version() != versions[1]


@settings(deadline=None)
@given(
    groups=st.lists(st.lists(st.binary(max_size=12), min_size=1, max_size=9), max_size=8),
    after=st.integers(min_value=-1, max_value=80),
    limit=st.integers(min_value=1, max_value=80),
)
def test_reading_the_log_anywhere_in_its_runs(
    tmp_path_factory: pytest.TempPathFactory, groups: list[list[bytes]], after: int, limit: int
) -> None:
    """Whatever the groups were, the log reads back as one numbered list: a read starting
    or stopping inside a run gives the rows of that list from `after + 1`, `limit` of them."""
    store = SqliteStore(tmp_path_factory.mktemp("log") / "s.db")
    flat = [row for group in groups for row in group]
    for group in groups:
        store.append_decisions(group)
    numbered = list(enumerate(flat, start=1))
    assert store.read_decisions(after, limit) == [(s, r) for s, r in numbered if s > after][:limit]
    assert store.last_seq() == len(flat)
    store.close()


def _within(rows: list[tuple[int, bytes]], limit: int, max_bytes: int) -> list[tuple[int, bytes]]:
    """The first `limit` of `rows`, stopping before the row that would take their bytes
    past `max_bytes`, but never before the first."""
    page: list[tuple[int, bytes]] = []
    size = 0
    for seq, row in rows[:limit]:
        if page and size + len(row) > max_bytes:
            break
        page.append((seq, row))
        size += len(row)
    return page


@settings(deadline=None)
@given(
    groups=st.lists(
        st.lists(st.binary(max_size=40).map(lambda b: b * 3), min_size=1, max_size=9),
        max_size=8,
    ),
    after=st.integers(min_value=-1, max_value=80),
    limit=st.integers(min_value=1, max_value=80),
    max_bytes=st.integers(min_value=0, max_value=400),
)
def test_reading_the_log_within_a_byte_budget(
    tmp_path_factory: pytest.TempPathFactory,
    groups: list[list[bytes]],
    after: int,
    limit: int,
    max_bytes: int,
) -> None:
    """With a budget the page stops before the row that would take it past the budget,
    and holds at least one row (so a reader paging on from its last row always moves):
    runs longer than the budget are read a row at a time from the blob, the rest whole."""
    store = SqliteStore(tmp_path_factory.mktemp("log") / "s.db")
    for group in groups:
        store.append_decisions(group)
    numbered = [(s, r) for s, r in enumerate((r for g in groups for r in g), 1) if s > after]
    assert store.read_decisions(after, limit, max_bytes) == _within(numbered, limit, max_bytes)
    store.close()


def test_a_page_of_a_long_run_copies_only_its_rows(tmp_path: Path) -> None:
    """300 rows of 20 KB in one run (6 MB): a page of 200 KB reads 10 of them, and one
    row is given even when it alone is over the budget."""
    store = SqliteStore(tmp_path / "s.db")
    rows = [bytes([i % 251]) * 20_000 for i in range(300)]
    store.append_decisions(rows)
    tracemalloc.start()
    try:
        page = store.read_decisions(5, 1000, 200_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert page == [(6 + i, rows[5 + i]) for i in range(10)]
    assert peak < 600_000, peak  # the page, and not the run's 6 MB
    assert store.read_decisions(7, 1000, 10) == [(8, rows[7])]
    assert store.read_decisions(299, 1000, 10) == [(300, rows[299])]
    assert store.read_decisions(300, 1000, 10) == []
    store.close()


def test_a_log_written_a_row_per_decision_reads_on_and_grows(tmp_path: Path) -> None:
    """A database from before runs (no `count` column, a row per decision, CBOR or JSON)
    gets the column on open; its rows read as runs of one and new runs follow them."""
    import sqlite3

    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE decisions (seq INTEGER PRIMARY KEY, body BLOB NOT NULL)")
    old.executemany(
        "INSERT INTO decisions (seq, body) VALUES (?, ?)", [(1, b"\xa1an\x01"), (2, b"{}")]
    )
    old.commit()
    old.close()
    store = SqliteStore(path)
    assert store.last_seq() == 2
    assert store.append_decisions([b"a", b"b"]) == [3, 4]
    assert store.read_decisions(1, 10) == [(2, b"{}"), (3, b"a"), (4, b"b")]


def test_background_checkpoints_copy_the_wal_and_stop_on_close(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    empty = path.stat().st_size  # the schema only: new pages go to the WAL first
    store.checkpoint_in_background(interval=0.005)
    started = store._checkpointer
    store.checkpoint_in_background()  # idempotent: still the same one thread
    assert started is not None and store._checkpointer is started and started.thread.is_alive()
    seqs = [seq for _ in range(20) for seq in store.append_decisions([b"x" * 200] * 50)]
    assert seqs == list(range(1, 1001))
    # ~60 pages: far below any automatic checkpoint, so only the thread copies them back.
    deadline = time.monotonic() + 5
    while path.stat().st_size == empty and time.monotonic() < deadline:
        time.sleep(0.01)
    assert path.stat().st_size > empty
    store.close()
    assert not started.thread.is_alive()
    assert [seq for seq, _ in SqliteStore(tmp_path / "s.db").read_decisions(0, 2000)] == seqs


def test_shared_stores_take_turns_through_the_writer_lock(tmp_path: Path) -> None:
    """Two serving processes' stores (here two connections): the second's transaction
    waits on the writer lock while the first's is open, then goes ahead."""
    path = tmp_path / "s.db"
    first, second = SqliteStore(path, shared=True), SqliteStore(path, shared=True)
    order: list[str] = []

    def other() -> None:
        with second.atomic():
            order.append("second")
            second.append_decisions([b'{"n":2}'])

    with first.atomic():
        waiter = threading.Thread(target=other)
        waiter.start()
        time.sleep(0.05)
        order.append("first")
        first.append_decisions([b'{"n":1}'])
    waiter.join(5)
    assert order == ["first", "second"]
    assert [row for _, row in first.read_decisions(0, 10)] == [b'{"n":1}', b'{"n":2}']


def test_the_writer_lock_gives_up_as_sqlite_would(tmp_path: Path) -> None:
    from policy.store.writerlock import WriterLock

    holder = WriterLock(str(tmp_path / "x.writer-lock"), timeout=1.0)
    waiter = WriterLock(str(tmp_path / "x.writer-lock"), timeout=0.05)
    holder.acquire()
    with pytest.raises(StoreUnavailable, match="writer lock"):
        waiter.acquire()
    holder.release()
    waiter.acquire()  # free again: taken at once
    waiter.release()


def test_a_writer_that_stays_is_store_unavailable_and_nothing_is_written(tmp_path: Path) -> None:
    """Another process holds SQLite's write lock past the timeout: the transaction gives up
    with StoreUnavailable (a condition that passes, not a bug) and writes nothing; once the
    lock is free the same write goes through."""
    import sqlite3

    path = tmp_path / "s.db"
    store = SqliteStore(path, timeout=0.05)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreUnavailable, match="SQLITE_BUSY"), store.atomic():
        store.append_decisions([b'{"n":1}'])
    other.execute("ROLLBACK")
    assert store.read_decisions(0, 10) == []
    with store.atomic():
        store.append_decisions([b'{"n":1}'])
    assert [row for _, row in store.read_decisions(0, 10)] == [b'{"n":1}']
    with pytest.raises(RuntimeError), store.atomic():  # any other error passes unchanged
        raise RuntimeError("a bug")
    other.close()
    store.close()
