"""The PostgreSQL store's own: several processes writing at once, the writer lock, a lost
connection or server, a fresh database opened by several processes, the feed's thread;
and, for any sequence of document operations, the same answers as the SQLite store."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy.store import Limit, StoreUnavailable, pgschema, postgres
from policy.store.deferred import Deferred
from policy.store.pgfeed import Feed
from policy.store.pgpipe import Statement
from policy.store.postgres import PostgresStore
from policy.store.sqlite import SqliteStore
from tests.pgserver import PgServer, in_schema
from tests.store import pgworkers

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 4


def _together(what: str, url: str, count: int, *extra: str) -> list[Any]:
    """PROCESSES processes each running `pgworkers` with a store of its own, started at
    one moment (once every one has its store open); what each printed."""
    command = [sys.executable, "-m", "tests.store.pgworkers", what, url, str(count), *extra]
    workers = [
        subprocess.Popen(
            command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(PROCESSES)
    ]
    for worker in workers:
        assert worker.stdout is not None and worker.stdout.readline() == "ready\n"
    found = []
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    for worker in workers:
        out, _ = worker.communicate(timeout=120)
        assert worker.returncode == 0
        found.append(json.loads(out))
    return found


def test_processes_appending_at_once_get_every_seq_once(pg_url: str) -> None:
    """Four processes append groups of 1-3 rows at once: every seq is given out once, the
    log is gap-free, and each row reads back at the seq its writer was given."""
    store = PostgresStore(pg_url)
    given_out = _together("append", pg_url, 60)
    seqs = sorted(seq for seqs in given_out for seq in seqs)
    total = PROCESSES * sum(1 + i % 3 for i in range(60))
    assert seqs == list(range(1, total + 1))
    log = store.read_decisions(0, 10_000)
    assert [seq for seq, _ in log] == seqs
    assert all(isinstance(row, bytes) for _, row in log)
    store.close()


def test_processes_spending_under_a_cap_never_pass_it(pg_url: str) -> None:
    """Four processes check `spent` and `charge` in one transaction, 40 times each, under
    a cap of 50 charges: exactly 50 are charged, never more."""
    store = PostgresStore(pg_url)
    cap = 50 * pgworkers.COST
    charged = _together("spend", pg_url, 40, str(cap))
    assert sum(charged) == 50
    assert store.spent(pgworkers.SUBJECT, 0) == cap
    store.close()


def test_the_ledger_holds_its_subjects_without_the_writer_lock(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger's isolation is its own, not the writer lock's: with that lock taken out
    of BEGIN, a transaction that read a subject's sum holds the subject, so another
    store's check-and-charge of it waits for the COMMIT and then counts its charge; a
    check-and-charge of another subject goes ahead meanwhile."""
    assert str(pgschema.WRITER_LOCK).encode() in postgres._LOCK.sql
    monkeypatch.setattr(postgres, "_LOCK", Statement(b"charter_no_lock", b"SELECT 1"))
    first, second, third = (PostgresStore(pg_url, shared=True) for _ in range(3))
    found: list[int | None] = []
    done = threading.Event()

    def spend() -> None:
        found.append(second.charge_within([Limit("agent:a", 0, 10)], ["agent:a"], 6, at_ms=2))
        done.set()

    waiter = threading.Thread(target=spend)
    with first.atomic():
        assert first.spent("agent:a", 0) == 0
        waiter.start()
        assert not done.wait(0.3), "a held subject was charged by another transaction"
        assert third.charge_within([Limit("agent:b", 0, 10)], ["agent:b"], 6, at_ms=2) is None
        first.charge(["agent:a"], 6, at_ms=1)
    waiter.join(10)
    assert found == [0]  # it saw the first's charge: 6 + 6 is past 10
    assert third.spent("agent:a", 0) == 6 and third.spent("agent:b", 0) == 6
    for store in (first, second, third):
        store.close()


def test_a_fresh_database_opened_by_several_at_once(pg_url: str) -> None:
    """Stores opening a fresh database together create its schema once (under the writer
    lock) and all open it."""
    opened: list[PostgresStore] = []
    failed: list[BaseException] = []

    def open_one() -> None:
        try:
            opened.append(PostgresStore(pg_url))
        except BaseException as exc:
            failed.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failed == [] and len(opened) == 6
    with psycopg.connect(pg_url) as db:
        assert db.execute("SELECT version FROM schema_version").fetchall() == [(pgschema.VERSION,)]
    for store in opened:
        store.close()


def test_a_writer_lock_held_past_the_timeout_is_store_unavailable(pg_url: str) -> None:
    """Another session holds the writer lock past the timeout: the transaction gives up
    with StoreUnavailable and writes nothing; once the lock is free the write goes
    through."""
    store = PostgresStore(pg_url, timeout=0.2)
    with psycopg.connect(pg_url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (pgschema.WRITER_LOCK,))
        with pytest.raises(StoreUnavailable, match="55P03"), store.atomic():
            store.append_decisions([b"1"])
        with pytest.raises(StoreUnavailable):
            store.insert("a", "b", {})
        assert store.read_decisions(0, 10) == [] and store.get("a", "b") is None
        other.execute("SELECT pg_advisory_unlock(%s)", (pgschema.WRITER_LOCK,))
    assert store.append_decisions([b"1"]) == [1]
    with pytest.raises(RuntimeError, match="a bug"), store.atomic():  # others pass unchanged
        raise RuntimeError("a bug")
    store.close()


def _kill(url: str, store: PostgresStore) -> None:
    """End the store's connection from the server's side, as a restart or a network
    failure does."""
    assert store._db is not None
    pid = store._db.info.backend_pid
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_lost_connection_is_store_unavailable_and_the_next_call_reconnects(
    pg_url: str,
) -> None:
    store = PostgresStore(pg_url)
    store.insert("a", "one", {"n": 1})
    _kill(pg_url, store)
    with pytest.raises(StoreUnavailable):
        store.get("a", "one")
    assert store.get("a", "one") == {"n": 1}  # connected again
    with pytest.raises(StoreUnavailable), store.atomic():  # lost inside a transaction
        store.insert("a", "two", {"n": 2})
        _kill(pg_url, store)
        store.append_decisions([b"x"])
    assert store.get("a", "two") is None and store.last_seq() == 0
    assert store.append_decisions([b"x"]) == [1]
    store.close()


def test_a_server_gone_is_store_unavailable_until_it_is_back(
    pg_server: PgServer, pg_url: str
) -> None:
    """The test process's server stopped (its tests run one after another) and started
    again: every call is StoreUnavailable meanwhile, and the store goes on after."""
    store = PostgresStore(pg_url, timeout=1)
    store.append_decisions([b"x"])
    pg_server.stop("fast")
    try:
        for call in (
            lambda: store.last_seq(),
            lambda: store.append_decisions([b"y"]),
            lambda: store.get_meta("k"),
            lambda: store.read_decisions(0, 10),
        ):
            with pytest.raises(StoreUnavailable):
                call()
        with pytest.raises(StoreUnavailable):
            PostgresStore(pg_url, timeout=1)
    finally:
        pg_server.start_again()
    assert store.append_decisions([b"y"]) == [2]
    assert store.last_seq() == 2
    store.close()


def test_a_value_postgresql_cannot_hold_is_a_value_error(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    with pytest.raises(ValueError, match="refused a value"):
        store.insert("a", "nul\x00", {})
    assert store.insert("a", "fine", {})  # (the transaction was rolled back, the lock let go)
    store.close()


def test_moved_is_none_and_close_stops_the_feed(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    assert store.moved() is None and store.write_failure() is None
    store.data_version()
    assert store._feed.running()
    store.close()
    assert not store._feed.running()


def test_data_version_is_read_from_the_row_while_the_feed_is_down(pg_url: str) -> None:
    """The feed's connection lost: its value is not used (stale), the row is read."""
    store, other = PostgresStore(pg_url), PostgresStore(pg_url)
    store.data_version()
    store._feed.stop()
    time.sleep(0.6)  # (past FRESH: the thread's last read is stale)
    before = store.data_version()
    other.note_change("agent", "a1")
    assert store.data_version() != before  # at once: read from the row
    store.close()
    other.close()


# ---- any sequence of document operations: the same on both stores ----------------------

KINDS = ["agents", "turns"]
IDS = ["a", "b", "c", "d"]
TAGS = [None, "t1", "t2"]
operations = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), st.sampled_from(KINDS), st.sampled_from(IDS),
                  st.integers(0, 9), st.sampled_from(TAGS)),
        st.tuples(st.just("update"), st.sampled_from(KINDS), st.sampled_from(IDS),
                  st.integers(0, 9), st.sampled_from(TAGS)),
        st.tuples(st.just("delete"), st.sampled_from(KINDS), st.sampled_from(IDS),
                  st.just(0), st.just(None)),
    ),
    max_size=25,
)  # fmt: skip


def _reads(store: PostgresStore | SqliteStore) -> list[Any]:
    """Everything a reader can see of the documents, positions as their order alone."""
    seen: list[Any] = []
    for kind in KINDS:
        for tag in TAGS:
            seen.append([(row.id, row.body) for row in store.scan(kind, tag)])
        rows = store.page(kind, 0, 2)
        seen.append([(row.id, row.body) for row in rows])
        if rows:
            seen.append([row.id for row in store.page(kind, rows[-1].pos, 10)])
        seen.append([store.get(kind, id) for id in IDS])
    return seen


@pytest.fixture
def both(pg_url: str, tmp_path: Path) -> Iterator[tuple[PostgresStore, SqliteStore]]:
    """A store of each kind, open for every example of a property (emptied by each)."""
    postgres, sqlite = PostgresStore(pg_url), SqliteStore(tmp_path / "s.db")
    yield postgres, sqlite
    postgres.close()
    sqlite.close()


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_any_document_operations_read_back_the_same_on_both_stores(
    both: tuple[PostgresStore, SqliteStore], ops: list[Any]
) -> None:
    postgres, sqlite = both
    postgres._rows("TRUNCATE documents")
    sqlite._db.execute("DELETE FROM documents")
    for op, kind, id, n, tag in ops:
        body = {"n": n, "id": id}
        call = getattr(sqlite, op), getattr(postgres, op)
        args = (kind, id) if op == "delete" else (kind, id, body, tag)
        assert call[0](*args) == call[1](*args)
    assert _reads(postgres) == _reads(sqlite)


def test_pg_server_fixture_gives_each_test_a_database_of_its_own(
    pg_server: PgServer, pg_url: str
) -> None:
    assert pg_url != pg_server.database()
    assert str(pg_server.sql(pg_url, "SELECT current_database()")[0][0]) in pg_url


def test_stores_in_other_schemas_do_not_hold_the_data_version_back(pg_url: str) -> None:
    """Stores in two schemas of one database notify one channel: a version of the other
    schema's feed, however high, is never taken for this one's."""
    busy = PostgresStore(in_schema(pg_url, "busy"))
    quiet = in_schema(pg_url, "quiet")
    store, other = PostgresStore(quiet), PostgresStore(quiet)
    store.data_version()
    for i in range(30):
        busy.note_change("agent", f"a{i}")  # (its feed's version passes the quiet one's)
    time.sleep(0.3)
    before = store.data_version()
    other.note_change("agent", "a1")
    start = time.monotonic()
    while store.data_version() == before:
        assert time.monotonic() - start < 0.5
        time.sleep(0.005)
    for opened in (busy, store, other):
        opened.close()


def _failed(store: PostgresStore) -> str | None:
    return store.write_failed


def test_a_full_disk_is_store_unavailable_and_reported_until_a_write_succeeds(
    pg_url: str,
) -> None:
    """What the driver raises for a full disk (SQLSTATE 53100) goes up as StoreUnavailable
    and is what `write_failure` says until a write succeeds: there, its own probe's."""
    store = PostgresStore(pg_url)
    failure = store._failure(psycopg.errors.DiskFull("could not extend file"))
    assert isinstance(failure, StoreUnavailable) and "53100" in str(failure)
    assert _failed(store) is not None
    assert store.write_failure() is None  # its probe wrote: the disk has room again
    assert store.get_meta("write_probe") is not None
    store._failure(psycopg.errors.DiskFull("could not extend file"))
    assert _failed(store) is not None
    store.set_meta("k", 1)  # any write that commits ends it
    assert _failed(store) is None
    bug = store._failure(psycopg.errors.UndefinedTable("no such table"))
    assert isinstance(bug, RuntimeError) and not isinstance(bug, StoreUnavailable)
    store.close()


def test_the_feed_counts_other_processes_moves_never_its_own() -> None:
    feed = Feed("postgresql:///unused")  # (its thread is never started here)
    assert feed.seen(5) == 1  # a version past what this process knew: news
    feed.own(6)  # this process's COMMIT, right after what it saw: known, not news
    assert feed.seen(6) == 1
    feed.own(8)  # another process committed 7 in between: news
    assert feed.seen(8) == 2
    assert feed.seen(7) == 2  # an older read changes nothing
    assert feed.seen(9) == 3


def test_a_store_sees_another_commit_at_its_begin_and_not_its_own(pg_url: str) -> None:
    # (data_version() inside transactions only: the feed's thread never starts, so no
    # notification of `one`'s own commit can be read before its COMMIT returns)
    one, other = PostgresStore(pg_url), PostgresStore(pg_url)
    try:
        with one.atomic():
            before = one.data_version()
            one.note_change("agent", "a1")
        with one.atomic():
            assert one.data_version() == before  # its own commit is not news
            one.note_change("agent", "a2")
        with other.atomic():
            other.note_change("agent", "a3")
        with one.atomic():
            assert one.data_version() != before  # read with the writer lock at BEGIN
    finally:
        one.close()
        other.close()


def _settled(deferred: Deferred) -> bool:
    return deferred.settled  # (read again: mypy holds it to what an assert said before)


def test_a_deferred_commit_is_answered_before_the_connection_is_used_again(
    pg_url: str,
) -> None:
    """A COMMIT whose answer is read later (`defer_commit`): its after-commit actions
    and its waiters run once it is read, by its caller or by the next use of the
    connection, whichever comes first."""
    store = PostgresStore(pg_url)
    assert store.defer_commit() is None  # (outside a transaction: nothing to defer)
    ran: list[object] = []
    with store.atomic():
        store.append_decisions([b"a"])
        store.after_commit(lambda: ran.append("after"))
        deferred = store.defer_commit()
    assert deferred is not None and not deferred.settled and ran == []
    deferred.when_settled(lambda: ran.append(deferred.error))
    assert store.read_decisions(0, 10) == [(1, b"a")]  # (read back first)
    assert _settled(deferred) and ran == ["after", None]
    with store.atomic():
        store.append_decisions([b"b"])
        again = store.defer_commit()
    assert again is not None
    again.settle()  # (the caller reads it)
    assert again.settled and again.error is None and store.last_seq() == 2
    store.close()


def test_the_log_runs_are_compressed_with_lz4(pg_url: str) -> None:
    """The server has lz4 (Debian's is built with it): a run of the log, a value large
    enough to be compressed, is stored compressed with lz4 (pglz costs the server about
    three times the CPU), and reads back as written."""
    store = PostgresStore(pg_url)
    rows = [f'{{"seq": {i}, "decision": "allow", "tool": "fs.read"}}'.encode() for i in range(400)]
    with store.atomic():
        seqs = store.append_decisions(rows)
    assert store.read_decisions(0, 400) == list(zip(seqs, rows, strict=True))
    with psycopg.connect(pg_url) as db:
        assert db.execute(pgschema.LZ4).fetchone() is not None
        kind = db.execute(
            "SELECT attcompression FROM pg_attribute "
            "WHERE attrelid = 'decisions'::regclass AND attname = 'body'"
        ).fetchone()
        methods = db.execute(
            "SELECT pg_column_compression(body) FROM decisions WHERE seq = %s", (seqs[0],)
        ).fetchall()
    assert kind == ("l",) and methods == [("lz4",)]
    store.close()
