"""The embedded store: one SQLite file in WAL mode, rows encoded as CBOR.

One connection per process, guarded by a lock (the HTTP app is one event loop; fit checks
run in worker threads). Several processes (`charter serve --workers N`) share the file:
writes take the lock with BEGIN IMMEDIATE (the store's hooks of the transaction in
policy/store/transaction.py), and `data_version()` reads PRAGMA data_version so a process
notices another's commits and reads what they changed (`changes_after`).

What SQLite reports as a condition that passes (another writer past the timeout, a full
disk) goes up as StoreUnavailable (a 503 over HTTP), with the transaction rolled back.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import cbor2

from policy.store import (
    Damaged,
    Doc,
    Limit,
    Row,
    StoreDamaged,
    StoreTooNew,
    StoreUnavailable,
    changes,
    ledger,
    logread,
    revisions,
    schema,
    texts,
)
from policy.store.checkpoints import Checkpointer
from policy.store.decode import document as _document
from policy.store.decode import document_rows
from policy.store.decode import encoded as _enc
from policy.store.decode import meta as _meta
from policy.store.decode import revision as _revision
from policy.store.decode import summed as _summed
from policy.store.logcheck import Chain
from policy.store.mark import Mark, attach
from policy.store.rowsum import GENESIS, log_digest, row_digest
from policy.store.schema import SCHEMA as SCHEMA
from policy.store.schema import TEXTS as TEXTS
from policy.store.transaction import Transaction
from policy.store.writerlock import WriterLock

# SQLite's primary result codes for conditions that pass (StoreUnavailable): BUSY and
# LOCKED (another writer past the timeout), IOERR, FULL, CANTOPEN.
TRANSIENT = frozenset({5, 6, 10, 13, 14})
# Those that say the store cannot write (the disk, not another writer): /readyz reports
# them until a write succeeds (`SqliteStore.write_failure`).
CANNOT_WRITE = {10: "an I/O error", 13: "the disk is full", 14: "a file cannot be opened"}
_TEXTS_AT_ONCE = 500  # digests a statement looks up (SQLite's variables: 32766 at most)


# The log is kept in runs (policy/store/logread.py), each chained to the one before.
_NEXT_SEQ = "SELECT seq + count FROM decisions ORDER BY seq DESC LIMIT 1"
_LAST_RUN = "SELECT seq + count, sum FROM decisions ORDER BY seq DESC LIMIT 1"
_APPEND_RUN = "INSERT INTO decisions (seq, count, body, sum) VALUES (?, ?, ?, ?)"
_RUN_BEFORE = "SELECT seq + count, sum FROM decisions WHERE seq < ? ORDER BY seq DESC LIMIT 1"
_RUN_AT = "SELECT seq + count, sum FROM decisions WHERE seq <= ? ORDER BY seq DESC LIMIT 1"
# A run's length, not its bytes (SQLite's length() of a column reads the record's header,
# and `count`, stored after `body`, is reached through its overflow pages without copying
# them; `body` beside length(), even in a CASE that skips it, is loaded whole): the rows a
# page takes are read from the blob (`SqliteStore._run_rows`).
_READ_RUNS = (
    "SELECT seq, count, length(body), sum FROM decisions WHERE seq >= "
    "(SELECT coalesce(max(seq), 0) FROM decisions WHERE seq <= ?) ORDER BY seq"
)
_RUN_BYTES = "SELECT substr(body, ?, ?) FROM decisions WHERE seq = ?"

# Under load the WAL starts over about every this many frames (4 KiB pages: 16 MiB).
RESTART_FRAMES = 4000


# SQLite's result codes for a file it finds damaged: CORRUPT ("database disk image is
# malformed") and NOTADB.
_CORRUPT = frozenset({11, 26})


@contextlib.contextmanager
def _unreadable(what: str) -> Iterator[None]:
    """A read that meets damaged pages, or a column garbled into text that is not UTF-8
    (which Python's sqlite3 cannot hand over), raises StoreDamaged naming `what`."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        if _damage(exc):
            raise StoreDamaged(what, "its pages or columns do not read") from None
        raise


def _damage(exc: sqlite3.DatabaseError) -> bool:
    """Whether SQLite (or its Python module) failed for damage in the file, not for a
    condition that passes (a busy lock, a full disk: StoreUnavailable's)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return (code is not None and code & 0xFF in _CORRUPT) or "Could not decode" in str(exc)


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


def _transient(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return (
        isinstance(exc, sqlite3.OperationalError) and code is not None and code & 0xFF in TRANSIENT
    )


def _unavailable(exc: BaseException, store: SqliteStore) -> StoreUnavailable:
    name = getattr(exc, "sqlite_errorname", "SQLITE_ERROR")
    why = CANNOT_WRITE.get(getattr(exc, "sqlite_errorcode", 0) & 0xFF)
    if why is not None:
        store.write_failed = f"the last write failed: {why} ({name})"
    return StoreUnavailable(f"the database is unavailable ({name})")


def _file_identity(path: str) -> tuple[int, int] | None:
    if path in ("", ":memory:"):
        return None
    found = os.stat(path)
    return found.st_dev, found.st_ino


class SqliteStore:
    """`shared`: several serving processes write this file (`charter serve --workers N`);
    their write transactions take a `WriterLock` first (policy/store/writerlock.py).
    `timeout`: how long a transaction waits for another writer before StoreUnavailable."""

    waits = False  # (Store.waits: a transaction is function calls)

    def __init__(
        self, path: str | Path = ":memory:", *, shared: bool = False, timeout: float = 30.0,
        mark: bool = True,
    ) -> None:  # fmt: skip
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
            try:
                schema.migrate(self._db)  # (StoreTooNew: a newer charter's file)
            except BaseException:
                self._db.close()
                raise
        # One cursor for the statements of every decision request (BEGIN, COMMIT, the data
        # version, the log's INSERT), each run and read to its end under the lock: a new
        # cursor per statement cost more than the statement's own Python.
        self._cursor = self._db.cursor()
        self._file = _file_identity(self.path)  # (what `moved` compares the path with)
        # The last seq and revision this transaction gave out (written to the mark after
        # its COMMIT), and why the last write failed when none succeeded since.
        self._due_seq: int | None = None
        self._due_revision: int | None = None
        self._changes = 0  # the connection's total_changes at the outer BEGIN
        self.write_failed: str | None = None
        self._mark: Mark | None = None
        if mark and self._file is not None:
            try:
                self._mark = attach(self.path, lambda: (self.last_seq(), self.latest_revision()))
            except BaseException:
                self._db.close()
                raise
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

    # The transaction's hooks (policy/store/transaction.py), under the store's lock.
    def _begin(self) -> None:
        writers = self._writers
        if writers is not None:
            writers.acquire()
        try:
            self._cursor.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            if writers is not None:
                writers.release()
            if _transient(exc):
                raise _unavailable(exc, self) from exc
            raise
        self._changes = self._db.total_changes

    def _commit(self) -> None:
        try:
            self._cursor.execute("COMMIT")
        except BaseException as failed:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            if _transient(failed):
                raise _unavailable(failed, self) from failed
            raise
        self.committed()  # (the mark, before anyone is told)

    def _rollback(self, exc: BaseException | None) -> None:
        if self._db.in_transaction:  # (SQLite may have rolled back already)
            self._db.execute("ROLLBACK")
        if exc is not None and _transient(exc):  # a full disk mid-way, say
            raise _unavailable(exc, self) from exc

    def _ended(self) -> None:
        self._due_seq = self._due_revision = None
        if self._writers is not None:
            self._writers.release()

    def on_begin(self, check: Callable[[], None] | None) -> None:
        self._on_begin = check

    def defer_commit(self) -> None:
        """None: a COMMIT here is a function call, answered when it returns."""
        return None

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
            self._db.executemany(
                "INSERT OR IGNORE INTO texts (digest, body, sum) VALUES (?, ?, ?)",
                [(key, text, row_digest("texts", (key, text))) for key, text in new.items()],
            )
            (last,) = self._db.execute("SELECT coalesce(max(n), 0) FROM revisions").fetchone()
            number = int(last) + 1
            # Its row holds what changed since the latest, read here, in this transaction:
            # another process may have added one since this one last looked.
            tip = self._replay(number - 1) if number > 1 else None
            row = _enc(revisions.row(body, refs, tip, number))
            self._db.execute(
                "INSERT INTO revisions (n, body, sum) VALUES (?, ?, ?)",
                (number, row, row_digest("revisions", (number, row))),
            )
            self._due_revision = number
            return number

    def get_revision(self, number: int) -> Doc | None:
        with self._lock, _unreadable(f"revision {number}"):
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
        found = self._db.execute(
            "SELECT n, body, sum FROM revisions WHERE n = ?", (number,)
        ).fetchone()
        if found is None:
            return None
        last = _revision(*found)
        state = revisions.Replay()
        if revisions.is_delta(last):
            for n, blob, stored in self._db.execute(
                "SELECT n, body, sum FROM revisions WHERE n >= ? AND n < ? ORDER BY n",
                (revisions.chain_start(number, last), number),
            ):
                state.apply(int(n), _revision(n, blob, stored))
        state.apply(number, last)
        return state

    def _texts(self, digests: set[bytes]) -> dict[bytes, bytes]:
        wanted = list(digests)
        found: dict[bytes, bytes] = {}
        for start in range(0, len(wanted), _TEXTS_AT_ONCE):
            chunk = wanted[start : start + _TEXTS_AT_ONCE]
            marks = ", ".join("?" * len(chunk))
            for digest, body, stored in self._db.execute(
                f"SELECT digest, body, sum FROM texts WHERE digest IN ({marks})", chunk
            ):
                _summed(
                    "texts", f"the policy text {bytes(digest).hex()[:16]}", stored, digest, body
                )
                found[digest] = body
        return found

    def latest_revision(self) -> int:
        with self._lock:
            (last,) = self._db.execute("SELECT coalesce(max(n), 0) FROM revisions").fetchone()
        return int(last)

    def list_revisions(self, after: int, limit: int) -> list[tuple[int, Doc]]:
        state = revisions.Replay()
        with self._lock, _unreadable(f"the revisions after {after}"):
            rows = [(int(n), _revision(n, blob, stored)) for n, blob, stored in self._db.execute(
                "SELECT n, body, sum FROM revisions WHERE n > ? ORDER BY n LIMIT ?", (after, limit)
            )]  # fmt: skip
            if rows and revisions.is_delta(rows[0][1]):  # (the rows before it in its chain)
                first, row = rows[0]
                for n, blob, stored in self._db.execute(
                    "SELECT n, body, sum FROM revisions WHERE n >= ? AND n < ? ORDER BY n",
                    (revisions.chain_start(first, row), first),
                ):
                    state.apply(int(n), _revision(n, blob, stored))
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
            blob = _enc(body)
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO documents (kind, id, tag, body, sum) VALUES (?, ?, ?, ?, ?)",
                (kind, id, tag, blob, row_digest("documents", (kind, id, tag, blob))),
            )
        return cursor.rowcount == 1

    def insert_many(
        self, kind: str, docs: Sequence[tuple[str, Mapping[str, Any], str | None]]
    ) -> int:
        rows = document_rows(kind, docs)
        if not rows:
            return 0
        with self.atomic():
            cursor = self._db.executemany(
                "INSERT OR IGNORE INTO documents (kind, id, tag, body, sum) VALUES (?, ?, ?, ?, ?)",
                rows,
            )
        return cursor.rowcount

    def update(self, kind: str, id: str, body: Mapping[str, Any], tag: str | None = None) -> bool:
        with self.atomic():
            blob = _enc(body)
            cursor = self._db.execute(
                "UPDATE documents SET body = ?, tag = ?, sum = ? WHERE kind = ? AND id = ?",
                (blob, tag, row_digest("documents", (kind, id, tag, blob)), kind, id),
            )
        return cursor.rowcount == 1

    def get(self, kind: str, id: str) -> Doc | None:
        with self._lock, _unreadable(f"document {kind}/{id}"):
            row = self._db.execute(
                "SELECT tag, body, sum FROM documents WHERE kind = ? AND id = ?", (kind, id)
            ).fetchone()
        return None if row is None else _document(kind, id, *row)

    def delete(self, kind: str, id: str) -> bool:
        with self.atomic():
            cursor = self._db.execute("DELETE FROM documents WHERE kind = ? AND id = ?", (kind, id))
        return cursor.rowcount == 1

    def page(self, kind: str, after_pos: int, limit: int, tag: str | None = None) -> list[Row]:
        with self._lock, _unreadable(f"the documents {kind} after position {after_pos}"):
            if tag is None:
                rows = self._db.execute(
                    "SELECT pos, id, tag, body, sum FROM documents WHERE kind = ? AND pos > ? "
                    "ORDER BY pos LIMIT ?",
                    (kind, after_pos, limit),
                ).fetchall()
            else:
                rows = self._db.execute(
                    "SELECT pos, id, tag, body, sum FROM documents "
                    "WHERE kind = ? AND tag = ? AND pos > ? ORDER BY pos LIMIT ?",
                    (kind, tag, after_pos, limit),
                ).fetchall()
        return [
            Row(int(pos), str(name), _document(kind, name, tag, blob, stored))
            for pos, name, tag, blob, stored in rows
        ]

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
        body = logread.pack(rows)
        with self.atomic():
            # One INSERT for the whole run, numbered after the last run inside the write
            # lock (a row per decision cost twice the SQLite time of a run per group), and
            # chained to it (policy/store/rowsum.py).
            last = self._cursor.execute(_LAST_RUN).fetchone()
            first, chained_to = (1, GENESIS) if last is None else (int(last[0]), last[1])
            if not isinstance(chained_to, bytes):  # (the sum of the last run is damaged)
                chained_to = b""
            digest = log_digest(chained_to, first, len(rows), body)
            self._cursor.execute(_APPEND_RUN, (first, len(rows), body, digest))
            self._due_seq = first + len(rows) - 1
        return list(range(first, first + len(rows)))

    def log_head(self) -> tuple[int, bytes]:
        with self._lock:
            last = self._db.execute(_LAST_RUN).fetchone()
        if last is None:
            return 0, GENESIS
        return int(last[0]) - 1, bytes(last[1] or b"")

    def log_link(self, seq: int) -> bytes | None:
        with self._lock:
            found = self._db.execute(_RUN_AT, (seq,)).fetchone()
        return logread.link_at(seq, found)

    def read_decisions(
        self, after_seq: int, limit: int, max_bytes: int | None = None
    ) -> list[tuple[int, bytes | Damaged]]:
        """Rows from `after_seq + 1` on, at most `limit`; with `max_bytes`, stopping before
        the row that would take their bytes past it, but never before the first. Every run
        a row is taken from is checked whole, its link to the run before too
        (policy/store/logcheck.py); a damaged stretch is one `Damaged`."""
        found: list[tuple[int, bytes | Damaged]] = []
        with self._lock:
            # From the run that holds `after_seq + 1` (the last one starting at or before
            # it) on, in one statement: one snapshot, so a run another process commits
            # meanwhile is either wholly there or wholly not, never skipped (a blob opened
            # while the statement runs reads in its snapshot, and runs never change).
            cursor = self._db.execute(_READ_RUNS, (after_seq + 1,))
            try:
                # Read with SQL, not `blobopen`: CPython 3.11's sqlite3 keeps a weak
                # reference to every blob a connection opened until the connection closes
                # (89 bytes each), so a serving process grew with every page it served.
                return logread.read(
                    cursor, self._chain_before,
                    lambda seq, length: logread.Pieces(self._piece, seq, length),
                    (sqlite3.Error,), after_seq, limit, max_bytes, found,
                )  # fmt: skip
            except sqlite3.DatabaseError as exc:
                if not _damage(exc):
                    raise
                raise StoreDamaged(
                    f"the decision log after seq {found[-1][0] if found else after_seq}",
                    f"its pages do not read ({str(exc).lower()})",
                ) from None
            finally:
                cursor.close()

    def _piece(self, seq: int, start: int, size: int) -> bytes:
        row = self._db.execute(_RUN_BYTES, (start, size, seq)).fetchone()
        found = None if row is None else row[0]
        if found is not None and not isinstance(found, bytes):
            raise sqlite3.DataError("the run's body is not a blob")  # (garbled)
        return b"" if found is None else found

    def _chain_before(self, seq: int) -> Chain:
        before = self._db.execute(_RUN_BEFORE, (seq,)).fetchone()
        return Chain() if before is None else Chain(int(before[0]), before[1])

    def last_seq(self) -> int:
        with self._lock:
            found = self._db.execute(_NEXT_SEQ).fetchone()
        return 0 if found is None else int(found[0]) - 1

    # ---- the budget ledger ----------------------------------------------------------------
    # Each row keeps its subject's running total: a sum is two look-ups of the index, not a
    # read of every row in the window (policy/store/ledger.py).
    # A transaction holds every subject it reads: its BEGIN IMMEDIATE holds the file.
    def spent(self, subject: str, since_ms: int) -> int:
        with self._lock, _unreadable(f"the ledger rows of `{subject}`"):
            return ledger.spent(self._query, ledger.SQLITE, subject, since_ms, _held)

    def charge(self, subjects: Sequence[str], micros: int, at_ms: int) -> None:
        with self.atomic(), _unreadable("the ledger"):
            ledger.charge(self._query, ledger.SQLITE, subjects, micros, at_ms, _held)

    def charge_within(
        self, limits: Sequence[Limit], subjects: Sequence[str], micros: int, at_ms: int
    ) -> int | None:
        with self.atomic(), _unreadable("the ledger"):
            return ledger.charge_within(
                self._query, ledger.SQLITE, limits, subjects, micros, at_ms, _held
            )

    def _query(self, statement: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """A statement's rows, on the store's cursor (what policy/store/ledger.py runs)."""
        return self._cursor.execute(statement, params).fetchall()

    # ---- named values ---------------------------------------------------------------------
    def get_meta(self, key: str) -> Any:
        with self._lock, _unreadable(f"the stored value `{key}`"):
            row = self._db.execute("SELECT body, sum FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else _meta(key, *row)

    # ---- the change feed -------------------------------------------------------------------
    def note_change(self, kind: str, key: str) -> None:
        with self.atomic():
            (newest,) = self._db.execute("SELECT coalesce(max(seq), 0) FROM changes").fetchone()
            seq = int(newest) + 1
            self._db.execute(
                "INSERT INTO changes (seq, kind, key, sum) VALUES (?, ?, ?, ?)",
                (seq, kind, key, changes.digest(seq, kind, key)),
            )
            if seq > changes.KEEP:
                self._db.execute("DELETE FROM changes WHERE seq <= ?", (seq - changes.KEEP,))

    def changes_after(self, after: int) -> changes.Feed:
        with self._lock, _unreadable("the change feed"):
            latest, newest, version = self._cursor.execute(
                "SELECT (SELECT coalesce(max(n), 0) FROM revisions), "
                "(SELECT coalesce(max(seq), 0) FROM changes), "
                "(SELECT user_version FROM pragma_user_version)"
            ).fetchone()
            if version > schema.VERSION:  # (a newer charter migrated the file since)
                raise StoreTooNew(version, schema.VERSION)
            rows = []
            if after < newest <= after + changes.KEEP:
                rows = self._cursor.execute(
                    "SELECT seq, kind, key, sum FROM changes WHERE seq > ? AND seq <= ? "
                    "ORDER BY seq",
                    (after, newest),
                ).fetchall()
        return changes.read(after, int(latest), int(newest), rows)

    def set_meta(self, key: str, value: Any) -> None:
        with self.atomic():
            body = cbor2.dumps(value)
            self._db.execute(
                "INSERT INTO meta (key, body, sum) VALUES (?, ?, ?) "
                "ON CONFLICT (key) DO UPDATE SET body = excluded.body, sum = excluded.sum",
                (key, body, row_digest("meta", (key, body))),
            )

    # ---- the mark and failed writes -------------------------------------------------------
    def committed(self) -> None:
        """After an outer COMMIT, under the locks, before anyone is told of it: the seq and
        revision it gave out are written to the mark, and a commit that wrote something
        ends a failure of writes."""
        if self._db.total_changes != self._changes:
            self.write_failed = None
        if self._mark is not None and (self._due_seq is not None or self._due_revision):
            self._mark.record(self._due_seq, self._due_revision)

    def write_failure(self) -> str | None:
        """Why this store cannot write (its last write failed for want of space, or an I/O
        error), or None. While it fails, a write is tried here (a meta value), so a disk
        with room again is found without a request's write."""
        if self.write_failed is None:
            return None
        with contextlib.suppress(StoreUnavailable), self.atomic():
            body = cbor2.dumps(time.time_ns())
            self._db.execute(
                "INSERT INTO meta (key, body, sum) VALUES ('write_probe', ?, ?) "
                "ON CONFLICT (key) DO UPDATE SET body = excluded.body, sum = excluded.sum",
                (body, row_digest("meta", ("write_probe", body))),
            )
        return self.write_failed

    # ---- checkpoints ----------------------------------------------------------------------
    def fold_wal(self) -> None:
        """Copy the whole `-wal` into the file and empty it (a first start's database, made
        under a name of its own, is whole in its file before it is renamed into place);
        sqlite3.OperationalError when it cannot (a full disk), or StoreUnavailable when a
        reader held part of it back."""
        with self._lock:
            busy, _, _ = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            raise StoreUnavailable("the database's -wal could not be copied into it")

    def serving(self) -> None:
        """A serving process: WAL checkpoints run on a thread of their own, off commits."""
        self.checkpoint_in_background()

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
            if self._mark is not None:
                self._mark.close()
                self._mark = None


def _held(subject: str) -> None:
    """A subject held to the transaction: the write transaction holds the whole file."""
