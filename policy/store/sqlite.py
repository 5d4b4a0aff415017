"""The embedded store: one SQLite file in WAL mode, rows encoded as CBOR.

One connection per process, guarded by a lock (the HTTP app is one event loop; fit checks
run in worker threads). Several processes (`charter serve --workers N`) share the file:
writes take the lock with BEGIN IMMEDIATE (policy/store/transaction.py), and
`data_version()` reads PRAGMA data_version so a process notices another's commits and
drops its caches.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import struct
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import accumulate
from pathlib import Path
from typing import Any

import cbor2

from policy.store import Doc, Row, ledger, revisions, texts
from policy.store.checkpoints import Checkpointer
from policy.store.transaction import Transaction
from policy.store.writerlock import WriterLock

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
# one made before this table was lacks it until this version opens it.
TEXTS = "CREATE TABLE IF NOT EXISTS texts (digest BLOB PRIMARY KEY, body BLOB NOT NULL);"
_TEXTS_AT_ONCE = 500  # digests a statement looks up (SQLite's variables: 32766 at most)


# The log is kept in runs: a row of `decisions` holds the `count` rows a transaction
# logged together, numbered `seq` to `seq + count - 1`. A run of one is the row itself; a
# longer run is its rows' lengths (unsigned 32-bit, little-endian) and then the rows.
_NEXT_SEQ = "SELECT seq + count FROM decisions ORDER BY seq DESC LIMIT 1"
_APPEND_RUN = f"INSERT INTO decisions (seq, count, body) VALUES (coalesce(({_NEXT_SEQ}), 1), ?, ?)"
# A run's length, not its bytes (SQLite's length() of a column reads the record's header,
# and `count`, stored after `body`, is reached through its overflow pages without copying
# them; `body` beside length(), even in a CASE that skips it, is loaded whole): the rows a
# page takes are read from the blob (`SqliteStore._run_rows`).
_READ_RUNS = (
    "SELECT seq, count, length(body) FROM decisions WHERE seq >= "
    "(SELECT coalesce(max(seq), 0) FROM decisions WHERE seq <= ?) ORDER BY seq"
)
_RUN_BYTES = "SELECT substr(body, ?, ?) FROM decisions WHERE seq = ?"
_NO_BUDGET = (1 << 63) - 1

# Under load the WAL starts over about every this many frames (4 KiB pages: 16 MiB).
RESTART_FRAMES = 4000


def _pack(rows: Sequence[bytes]) -> bytes:
    if len(rows) == 1:
        return rows[0]
    return struct.pack(f"<{len(rows)}I", *map(len, rows)) + b"".join(rows)


def _unpack(count: int, body: bytes, start: int, stop: int) -> list[bytes]:
    """Rows `start` to `stop - 1` of a run (only those are copied out)."""
    if count == 1:
        return [body][start:stop]
    ends = list(accumulate(struct.unpack_from(f"<{count}I", body), initial=4 * count))
    return [body[ends[i] : ends[i + 1]] for i in range(start, min(stop, count))]


def _enc(body: Mapping[str, Any]) -> bytes:
    return bytes(cbor2.dumps(dict(body)))


def _dec(blob: bytes) -> Doc:
    value = cbor2.loads(blob)
    assert isinstance(value, dict)
    return value


def _create_private(path: str) -> None:
    """A database not there yet is made here, empty and 0600 (SQLite made it 0644 whatever
    the umask, and its `-wal` and `-shm` files take its mode): it holds what only an admin
    token reads over HTTP, the decision log, the approvals, the agents. A file that is
    there keeps the mode it has; a path that cannot be made is left to SQLite to refuse.
    A symlink is followed to where it points, as SQLite follows it: an exclusive create
    does not follow one, so a link to a database not made yet left SQLite to make it with
    the umask's mode."""
    with contextlib.suppress(OSError):
        target = os.path.realpath(path)
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _file_identity(path: str) -> tuple[int, int] | None:
    if path in ("", ":memory:"):
        return None
    found = os.stat(path)
    return found.st_dev, found.st_ino


class SqliteStore:
    """`shared`: several serving processes write this file (`charter serve --workers N`);
    their write transactions take a `WriterLock` first (policy/store/writerlock.py).
    `timeout`: how long a transaction waits for another writer before StoreUnavailable."""

    def __init__(
        self, path: str | Path = ":memory:", *, shared: bool = False, timeout: float = 30.0
    ) -> None:
        self.path = str(path)
        if self.path not in ("", ":memory:"):
            _create_private(self.path)
        self._lock = threading.RLock()
        self._depth = 0
        self._after_commit: list[Callable[[], None]] = []  # run after the outer COMMIT
        self._on_begin: Callable[[], None] | None = None  # run after each outer BEGIN
        self._db = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=timeout
        )
        with self._lock:
            self._db.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            if self.path != ":memory:":
                self._db.execute("PRAGMA journal_mode = WAL")
            # NORMAL in WAL: a power cut may lose the last commits, never corrupt the file.
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.executescript(SCHEMA + TEXTS)
            columns = [c[1] for c in self._db.execute("PRAGMA table_info(decisions)")]
            if "count" not in columns:  # a log written a row per decision: runs of one
                self._db.execute(
                    "ALTER TABLE decisions ADD COLUMN count INTEGER NOT NULL DEFAULT 1"
                )
            ledger.add_running_totals(self._db)  # a ledger without running totals: they are added
        # One cursor for the statements of every decision request (BEGIN, COMMIT, the data
        # version, the log's INSERT), each run and read to its end under the lock: a new
        # cursor per statement cost more than the statement's own Python.
        self._cursor = self._db.cursor()
        self._file = _file_identity(self.path)  # (what `moved` compares the path with)
        self._checkpointer: Checkpointer | None = None
        self._writers: WriterLock | None = None
        if shared and self.path != ":memory:":
            self._writers = WriterLock.of(self.path, timeout)

    def moved(self) -> str | None:
        """Why the path no longer names the file this store opened (removed, renamed or
        replaced), or None. SQLite goes on writing the file it opened, whose commits a
        restart never sees (a removed file's are gone), so /readyz says so."""
        if self._file is None:
            return None
        try:
            now = _file_identity(self.path)
        except OSError:
            now = None
        if now == self._file:
            return None
        return "the database file was removed or replaced since it was opened"

    # ---- transactions ---------------------------------------------------------------------
    def atomic(self) -> Transaction:
        return Transaction(self)

    def on_begin(self, check: Callable[[], None] | None) -> None:
        self._on_begin = check

    def after_commit(self, action: Callable[[], None]) -> None:
        with self._lock:
            if self._depth:
                self._after_commit.append(action)
                return
        action()

    def data_version(self) -> int:
        with self._lock:
            row = self._cursor.execute("PRAGMA data_version").fetchone()
        return int(row[0])

    # ---- revisions ------------------------------------------------------------------------
    def add_revision(self, body: Mapping[str, Any]) -> int:
        refs, new = texts.split(body["files"])  # (hashed before the transaction's lock)
        with self.atomic():
            # A text already kept (by an earlier revision, or twice in this one) is not
            # written again: the conflict on its digest is found in the key's index.
            self._db.executemany("INSERT OR IGNORE INTO texts (digest, body) VALUES (?, ?)",
                                 new.items())  # fmt: skip
            (last,) = self._db.execute("SELECT coalesce(max(n), 0) FROM revisions").fetchone()
            number = int(last) + 1
            # Its row holds what changed since the latest, read here, in this transaction:
            # another process may have added one since this one last looked.
            tip = self._replay(number - 1) if number > 1 else None
            row = _enc(revisions.row(body, refs, tip, number))
            self._db.execute("INSERT INTO revisions (n, body) VALUES (?, ?)", (number, row))
            return number

    def get_revision(self, number: int) -> Doc | None:
        with self._lock:
            state = self._replay(number)
            if state is None:
                return None
            pairs = state.pairs()
            # (its texts were committed with it and are never deleted: a read of its own
            # finds them all)
            found = self._texts(texts.digests(pairs))
        return state.body(texts.join(pairs, found))

    def _replay(self, number: int) -> revisions.Replay | None:
        """Revision `number` read from its chain: the full row it starts from and the
        deltas after it (policy/store/revisions.py), `revisions.EVERY` rows at most.
        Under the lock; the rows of a committed revision never change, so the chain's
        are the same whichever statement reads them."""
        found = self._db.execute("SELECT body FROM revisions WHERE n = ?", (number,)).fetchone()
        if found is None:
            return None
        last = _dec(found[0])
        state = revisions.Replay()
        if revisions.is_delta(last):
            for n, blob in self._db.execute(
                "SELECT n, body FROM revisions WHERE n >= ? AND n < ? ORDER BY n",
                (revisions.chain_start(number, last), number),
            ):
                state.apply(int(n), _dec(blob))
        state.apply(number, last)
        return state

    def _texts(self, digests: set[bytes]) -> dict[bytes, bytes]:
        wanted = list(digests)
        found: dict[bytes, bytes] = {}
        for start in range(0, len(wanted), _TEXTS_AT_ONCE):
            chunk = wanted[start : start + _TEXTS_AT_ONCE]
            marks = ", ".join("?" * len(chunk))
            found.update(
                self._db.execute(f"SELECT digest, body FROM texts WHERE digest IN ({marks})", chunk)
            )
        return found

    def latest_revision(self) -> int:
        with self._lock:
            (last,) = self._db.execute("SELECT coalesce(max(n), 0) FROM revisions").fetchone()
        return int(last)

    def list_revisions(self, after: int, limit: int) -> list[tuple[int, Doc]]:
        state = revisions.Replay()
        with self._lock:
            rows = [(int(n), _dec(blob)) for n, blob in self._db.execute(
                "SELECT n, body FROM revisions WHERE n > ? ORDER BY n LIMIT ?", (after, limit)
            )]  # fmt: skip
            if rows and revisions.is_delta(rows[0][1]):  # (the rows before it in its chain)
                first, row = rows[0]
                for n, blob in self._db.execute(
                    "SELECT n, body FROM revisions WHERE n >= ? AND n < ? ORDER BY n",
                    (revisions.chain_start(first, row), first),
                ):
                    state.apply(int(n), _dec(blob))
        listed = []
        for n, row in rows:
            state.apply(n, row)
            listed.append((n, state.body(state.paths(), shared=True)))
        return listed

    # ---- documents ------------------------------------------------------------------------
    # Every write runs in `atomic()`: inside a caller's transaction it joins it; alone it is
    # a transaction of its own, so it takes the writer lock like any other and a busy or
    # full database is StoreUnavailable there too.
    def insert(self, kind: str, id: str, body: Mapping[str, Any], tag: str | None = None) -> bool:
        with self.atomic():
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO documents (kind, id, tag, body) VALUES (?, ?, ?, ?)",
                (kind, id, tag, _enc(body)),
            )
        return cursor.rowcount == 1

    def update(self, kind: str, id: str, body: Mapping[str, Any], tag: str | None = None) -> bool:
        with self.atomic():
            cursor = self._db.execute(
                "UPDATE documents SET body = ?, tag = ? WHERE kind = ? AND id = ?",
                (_enc(body), tag, kind, id),
            )
        return cursor.rowcount == 1

    def get(self, kind: str, id: str) -> Doc | None:
        with self._lock:
            row = self._db.execute(
                "SELECT body FROM documents WHERE kind = ? AND id = ?", (kind, id)
            ).fetchone()
        return None if row is None else _dec(row[0])

    def delete(self, kind: str, id: str) -> bool:
        with self.atomic():
            cursor = self._db.execute("DELETE FROM documents WHERE kind = ? AND id = ?", (kind, id))
        return cursor.rowcount == 1

    def page(self, kind: str, after_pos: int, limit: int, tag: str | None = None) -> list[Row]:
        with self._lock:
            if tag is None:
                rows = self._db.execute(
                    "SELECT pos, id, body FROM documents WHERE kind = ? AND pos > ? "
                    "ORDER BY pos LIMIT ?",
                    (kind, after_pos, limit),
                ).fetchall()
            else:
                rows = self._db.execute(
                    "SELECT pos, id, body FROM documents WHERE kind = ? AND tag = ? AND pos > ? "
                    "ORDER BY pos LIMIT ?",
                    (kind, tag, after_pos, limit),
                ).fetchall()
        return [Row(int(pos), str(id), _dec(body)) for pos, id, body in rows]

    def scan(self, kind: str, tag: str | None = None) -> Iterator[Row]:
        after = 0
        while True:
            rows = self.page(kind, after, 500, tag)
            yield from rows
            if len(rows) < 500:
                return
            after = rows[-1].pos

    # ---- the decision log -----------------------------------------------------------------
    def append_decisions(self, rows: Sequence[bytes]) -> list[int]:
        if not rows:
            return []
        with self.atomic():
            # One INSERT for the whole run, numbered after the last run inside the write
            # lock: a row per decision cost twice the SQLite time of a run per group.
            cursor = self._cursor.execute(_APPEND_RUN, (len(rows), _pack(rows)))
            first = cursor.lastrowid
            assert first is not None
        return list(range(first, first + len(rows)))

    def read_decisions(
        self, after_seq: int, limit: int, max_bytes: int | None = None
    ) -> list[tuple[int, bytes]]:
        """Rows from `after_seq + 1` on, at most `limit`; with `max_bytes`, stopping before
        the row that would take their bytes past it, but never before the first."""
        found: list[tuple[int, bytes]] = []
        budget = _NO_BUDGET if max_bytes is None else max_bytes
        size = 0
        with self._lock:
            # From the run that holds `after_seq + 1` (the last one starting at or before
            # it) on, in one statement: one snapshot, so a run another process commits
            # meanwhile is either wholly there or wholly not, never skipped (a blob opened
            # while the statement runs reads in its snapshot, and runs never change).
            cursor = self._db.execute(_READ_RUNS, (after_seq + 1,))
            for seq, count, length in cursor:
                start = max(0, after_seq + 1 - seq)  # inside the first run, or 0
                stop = min(count, start + limit - len(found))
                if start >= stop:
                    continue  # (the first run ended at or before `after_seq`)
                # `_run_rows` keeps to the bytes left (but for a page's first row): taken whole
                rows = self._run_rows(seq, count, length, start, stop, budget - size, not found)
                found.extend(enumerate(rows, seq + start))
                size += sum(map(len, rows))
                if len(rows) < stop - start or len(found) >= limit:
                    break  # (full: by its bytes, or by `limit`)
            cursor.close()
        return found

    def _run_rows(
        self, seq: int, count: int, length: int, start: int, stop: int, room: int, first: bool
    ) -> list[bytes]:
        """Rows `start` to `stop - 1` of the run `seq` (`length` bytes), as many of them as
        fit in `room` bytes together (and the `first` row of a page whatever its size):
        the whole run read when it fits, else its sizes and then the bytes of the rows
        taken, so a page of a long run never holds all of it.

        Read with SQL, not `blobopen`: CPython 3.11's sqlite3 keeps a weak reference to
        every blob a connection opened until the connection closes (89 bytes each), so a
        serving process grew with every page of the log it served."""
        if length <= room:
            return _unpack(count, self._run_bytes(seq, 1, length), start, stop)
        if count == 1:
            return [self._run_bytes(seq, 1, length)] if first else []
        sizes = struct.unpack(f"<{count}I", self._run_bytes(seq, 1, 4 * count))
        ends = list(accumulate(sizes, initial=4 * count))
        taken = start
        while taken < stop and (sizes[taken] <= room or (taken == start and first)):
            room -= sizes[taken]
            taken += 1
        if taken == start:
            return []
        chunk = self._run_bytes(seq, ends[start] + 1, ends[taken] - ends[start])
        base = ends[start]
        return [chunk[ends[i] - base : ends[i + 1] - base] for i in range(start, taken)]

    def _run_bytes(self, seq: int, offset: int, size: int) -> bytes:
        """`size` bytes of run `seq` from `offset` (1 is its first byte)."""
        (found,) = self._db.execute(_RUN_BYTES, (offset, size, seq)).fetchone()
        return b"" if found is None else bytes(found)  # (SQLite's substr of no bytes: NULL)

    def last_seq(self) -> int:
        with self._lock:
            found = self._db.execute(_NEXT_SEQ).fetchone()
        return 0 if found is None else int(found[0]) - 1

    # ---- the budget ledger ----------------------------------------------------------------
    # Each row keeps its subject's running total: a sum is two look-ups of the index, not a
    # read of every row in the window (policy/store/ledger.py).
    def spent(self, subject: str, since_ms: int) -> int:
        with self._lock:
            return ledger.spent(self._cursor, subject, since_ms)

    def charge(self, subjects: Sequence[str], micros: int, at_ms: int) -> None:
        with self.atomic():
            ledger.charge(self._cursor, subjects, micros, at_ms)

    # ---- named values ---------------------------------------------------------------------
    def get_meta(self, key: str) -> Any:
        with self._lock:
            row = self._db.execute("SELECT body FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else cbor2.loads(row[0])

    def latest_with_meta(self, key: str) -> tuple[int, Any]:
        with self._lock:
            latest, body = self._cursor.execute(
                "SELECT (SELECT coalesce(max(n), 0) FROM revisions), "
                "(SELECT body FROM meta WHERE key = ?)",
                (key,),
            ).fetchone()
        return int(latest), None if body is None else cbor2.loads(body)

    def set_meta(self, key: str, value: Any) -> None:
        with self.atomic():
            self._db.execute(
                "INSERT INTO meta (key, body) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET body = excluded.body",
                (key, cbor2.dumps(value)),
            )

    # ---- checkpoints ----------------------------------------------------------------------
    def checkpoint_in_background(
        self, interval: float = 0.05, restart_frames: int = RESTART_FRAMES,
        wal_pages: int = 4 * RESTART_FRAMES,
    ) -> None:  # fmt: skip
        """Copy the WAL back into the database from a thread of its own, and let it start
        over every `restart_frames` frames (policy/store/checkpoints.py); the writer's own
        automatic checkpoint stays as a backstop at `wal_pages`. For a file database
        only; idempotent."""
        if self.path == ":memory:" or self._checkpointer is not None:
            return
        with self._lock:
            self._db.execute(f"PRAGMA wal_autocheckpoint = {int(wal_pages)}")
        self._checkpointer = Checkpointer(
            self.path, self._lock, shared=self._writers is not None, interval=interval,
            restart_frames=restart_frames,
        )  # fmt: skip
        self._checkpointer.start()

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
            self._checkpointer = None
        with self._lock:
            self._db.close()
            if self._writers is not None:
                self._writers.close()
