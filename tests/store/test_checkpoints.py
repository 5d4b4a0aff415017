"""The checkpoint thread's turn: the WAL starts over under load, and no writer is waited on."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from policy.store.checkpoints import Checkpointer
from policy.store.sqlite import SqliteStore
from policy.store.writerlock import WriterLock


@contextmanager
def _turns(
    store: SqliteStore, restart_frames: int
) -> Iterator[tuple[Checkpointer, Callable[[], bool]]]:
    """A checkpointer for `store` whose turns the test runs itself (its thread never
    starts), with the connection and the open database file a turn takes."""
    checkpointer = Checkpointer(
        store.path, store._lock, shared=store._writers is not None, interval=60,
        restart_frames=restart_frames,
    )  # fmt: skip
    db = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)
    file = os.open(store.path, os.O_RDONLY)
    try:
        yield checkpointer, lambda: checkpointer.turn(db, file)
    finally:
        os.close(file)
        db.close()
        if checkpointer._writers is not None:
            checkpointer._writers.close()


def _wal_frames(path: str) -> int:
    """Frames in the WAL (a checkpoint that copies nothing new, on a connection of its own)."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        _, frames, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    finally:
        db.close()
    return int(frames)


def test_past_the_threshold_a_turn_lets_the_next_writer_start_the_wal_over(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "s.db", shared=True)
    store._db.execute("PRAGMA wal_autocheckpoint = 0")  # only the turns checkpoint here
    with _turns(store, restart_frames=40) as (_, turn):
        store.append_decisions([b"x" * 300] * 20)  # a couple of pages: under the threshold
        assert turn() is False
        for _ in range(30):
            store.append_decisions([b"x" * 300] * 20)
        grown = _wal_frames(store.path)
        assert grown >= 40
        assert turn() is True  # every frame copied back with no writer going
        store.append_decisions([b"y" * 300] * 20)  # this writer starts the WAL over
        assert _wal_frames(store.path) < 10
    assert [seq for seq, _ in store.read_decisions(0, 1000)] == list(range(1, 641))
    store.close()


def test_a_turn_does_not_wait_for_another_process_writing(tmp_path: Path) -> None:
    """Another serving process holds the writer lock: the turn copies what it may, skips
    the quiet step (the next turn tries again) and returns at once."""
    store = SqliteStore(tmp_path / "s.db", shared=True)
    store._db.execute("PRAGMA wal_autocheckpoint = 0")
    other = WriterLock.of(store.path, timeout=1.0)
    with _turns(store, restart_frames=1) as (_, turn):
        store.append_decisions([b"x" * 300] * 50)
        other.acquire()
        try:
            started = time.monotonic()
            assert turn() is False
            assert time.monotonic() - started < 1.0
        finally:
            other.release()
        assert turn() is True
    other.close()
    store.close()


def test_the_quiet_step_holds_off_this_process_writers(tmp_path: Path) -> None:
    """One serving process (no writer lock): the turn holds the store's lock, so a write
    transaction begun meanwhile waits for it and then goes ahead."""
    store = SqliteStore(tmp_path / "s.db")
    store._db.execute("PRAGMA wal_autocheckpoint = 0")
    with _turns(store, restart_frames=1) as (checkpointer, _):
        store.append_decisions([b"x" * 300] * 50)
        order: list[str] = []
        with checkpointer._no_writers() as quiet:
            assert quiet

            def write() -> None:
                store.append_decisions([b"z"])
                order.append("written")

            writer = threading.Thread(target=write)
            writer.start()
            time.sleep(0.05)
            order.append("quiet")
        writer.join(5)
        assert order == ["quiet", "written"]
    store.close()
