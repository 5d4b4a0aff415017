"""WAL checkpoints for a serving process, off the commit path.

SQLite in WAL mode appends every commit to `<db>-wal`; a checkpoint copies the frames back
into the database file (and fsyncs it), and the WAL starts over from its beginning only
when a write transaction begins with every frame copied back. Left to SQLite, the commit
that takes the WAL past `wal_autocheckpoint` pages runs the checkpoint itself, inside its
COMMIT: measured with batches of 100 at 16 clients, every ~300 ms the event loop stalled
12-15 ms (one worker) or 20-35 ms (two, with the writers' lock held all along, so the
other worker waited too) copying frames and waiting for two fsyncs.

So a thread of the process's own copies the frames back every `interval` seconds, with a
passive checkpoint on a connection of its own that never blocks a writer. That alone does
not let the WAL start over under load: by the time a checkpoint has copied and synced,
another commit has added frames. Once the WAL holds `restart_frames` frames, the thread
copies the few frames that came in meanwhile with no writer going (it holds the store's
lock, which every transaction of this process takes first, and a writer lock of its own,
which every other serving process's transactions take), so the next write transaction
finds everything copied back and starts the WAL over. That stalls writers for the copy
of a few milliseconds' frames and the fsyncs (a few ms every few hundred ms at full load,
instead of the writer's 12-35). If another process is writing at that moment, the thread
tries again at its next turn; the writer's own automatic checkpoint stays as a backstop.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from policy.store.writerlock import WriterLock

_datasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


class Checkpointer:
    """`lock`: the store's lock (this process's transactions take it first); `shared`:
    other serving processes write the file too (they take `<path>.writer-lock`)."""

    def __init__(
        self, path: str, lock: threading.RLock, *, shared: bool, interval: float,
        restart_frames: int,
    ) -> None:  # fmt: skip
        self.path = path
        self._lock = lock
        # Its own open file: flock excludes other open files of this process as well, so
        # holding it keeps out this process's writers (which also hold the store's lock).
        self._writers = WriterLock.of(path, timeout=0) if shared else None
        self._interval = interval
        self._restart_frames = restart_frames
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="charter-wal-checkpoint")

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=5)
        if self._writers is not None:
            self._writers.close()

    def _run(self) -> None:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        file = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            while not self._stop.wait(self._interval):
                try:
                    self.turn(db, file)
                except (sqlite3.Error, OSError):  # busy, closing, full: next turn, or a writer
                    continue
        finally:
            os.close(file)
            db.close()

    def turn(self, db: sqlite3.Connection, file: int) -> bool:
        """One passive checkpoint, and past `restart_frames` the quiet one that lets the
        next writer start the WAL over; whether that one ran. `file`: the database file
        open for reading."""
        _, frames, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        if frames < self._restart_frames:
            return False
        # A checkpoint fsyncs the database file only once it has copied the whole WAL,
        # that is in the quiet one below: the pages copied by the passive ones since the
        # last restart made that fsync ~10 ms, with every writer held off. Synced here
        # first, they leave it the few pages copied in the quiet one.
        _datasync(file)
        with self._no_writers() as quiet:
            if quiet:
                db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        return quiet

    @contextmanager
    def _no_writers(self) -> Iterator[bool]:
        """Holds off every serving writer (False, holding nothing, if another process is
        writing now). The store's lock first, as a transaction takes them: no deadlock."""
        with self._lock:
            if self._writers is None:
                yield True
                return
            if not self._writers.try_acquire():
                yield False
                return
            try:
                yield True
            finally:
                self._writers.release()
