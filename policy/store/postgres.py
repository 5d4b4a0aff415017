"""The PostgreSQL store: the tables of the SQLite store on a server, shared by every node.

The same rows as `SqliteStore` (policy/store/__init__.py): revisions as deltas
(policy/store/revisions.py) with each text once by its digest, documents with their
position and tag, the decision log in chained runs (policy/store/logread.py), the ledger
with running totals (policy/store/ledger.py), meta; each row with its checksum, checked
on every read (policy/store/decode.py), so a row changed behind the store's back is
reported as damaged, never served. The schema and its version are in
policy/store/pgschema.py.

Writers are serialized, across every process and node, by one lock: each outermost
`atomic()` is one transaction whose first statement takes a transaction-scoped advisory
lock on a fixed key (`pg_advisory_xact_lock`), held until its COMMIT or ROLLBACK. That is
SQLite's BEGIN IMMEDIATE: `on_begin`'s check, a budget's check-and-charge and the log's
`max(seq) + 1` read nothing another writer changes before the COMMIT, so the log stays
gap-free and a cap is never overrun, with no retry of serialization failures. One writer
at a time costs little: the service commits decisions in groups (api/service/groupcommit.py),
so a transaction holds the lock for a few statements. A writer that waits longer than
`timeout` for it gets StoreUnavailable (`lock_timeout`). Reads take no lock.

One connection per process, in autocommit mode, guarded by a lock (a read is one
statement; `atomic()` sends BEGIN and COMMIT itself: a write transaction is two round
trips, BEGIN with the writer lock and its reads, then the writes whose results nobody
reads with the COMMIT, each one libpq pipeline, policy/store/pgpipe.py; a caller may
have the COMMIT's answer read later, `defer_commit`), and the change feed's own
connection (policy/store/pgfeed.py): each write transaction moves the `feed` row's
version when it added a revision or noted a change (`note_change`: what a service's
caches are brought up to date by; a transaction of decisions or documents alone moves
nothing), and notifies it at COMMIT; `data_version()` counts the moves of that version
that were not this process's own: read with the writer lock at BEGIN inside a
transaction (no extra round trip), from the feed outside one.

A lost connection, a server gone or shutting down, a full disk, a lock waited on past
`timeout`: StoreUnavailable (the transaction rolled back, nothing written), and the next
call connects again. A value the database refuses (a NUL in a text) is ValueError; any
other error of the driver is RuntimeError: none of the driver's own goes up to callers.
`shared` is accepted for the same call as `SqliteStore`'s; every PostgresStore takes the
writer lock. `moved()` is None: a server has no file to be replaced.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

import cbor2
import psycopg

from policy.store import (
    Damaged,
    Doc,
    Limit,
    Row,
    StoreDamaged,
    StoreUnavailable,
    changes,
    ledger,
    logread,
    pgpipe,
    pgschema,
    revisions,
    texts,
)
from policy.store.decode import document, document_rows, encoded, meta, revision, summed
from policy.store.deferred import Deferred
from policy.store.logcheck import Chain
from policy.store.pgfeed import NOTIFY_CHANNEL, Feed
from policy.store.pgpipe import Pipeline, Prepared, Statement
from policy.store.rowsum import GENESIS, log_digest, row_digest
from policy.store.transaction import Transaction

Connection = psycopg.Connection[tuple[Any, ...]]

# The writer lock, then the feed's version and the log's tip (where the next run goes,
# and the sum it chains to): exact for the whole transaction, since no other writer
# commits while the lock is held. Two statements, sent with the BEGIN in one round trip
# (policy/store/pgpipe.py): a statement's snapshot is taken when it starts, so reads in
# the statement that takes the lock could miss a commit made while it waited for it.
_LOCK = Statement(b"charter_lock", f"SELECT pg_advisory_xact_lock({pgschema.WRITER_LOCK})".encode())
_TIP = Statement(
    b"charter_tip",
    b"SELECT f.version, d.next, d.sum FROM feed f LEFT JOIN LATERAL "
    b"(SELECT seq + count AS next, sum FROM decisions ORDER BY seq DESC LIMIT 1) d ON true",
)
# The feed's version moved and notified (delivered at COMMIT), by a transaction that wrote.
_BUMP = Statement(
    b"charter_bump",
    b"WITH moved AS (UPDATE feed SET version = version + 1 RETURNING version) "
    + f"SELECT version, pg_notify({NOTIFY_CHANNEL}, version::text) FROM moved".encode(),
)
_APPEND = Statement(
    b"charter_append",
    b"INSERT INTO decisions (seq, count, body, sum) VALUES ($1, $2, $3, $4)",
    (pgpipe.INT8, pgpipe.INT4, pgpipe.BYTEA, pgpipe.BYTEA),
)
_LAST_RUN = "SELECT seq + count, sum FROM decisions ORDER BY seq DESC LIMIT 1"
_RUN_AT = "SELECT seq + count, sum FROM decisions WHERE seq <= %s ORDER BY seq DESC LIMIT 1"
# A page of the log in one statement: the runs from the one that holds the first seq
# wanted on (at most a page's `limit` of them give rows, after one that may end before
# that seq, and one more tells where the last one ends), each with its body when it is
# small and starts within the page and the bytes of the runs before it leave room for it
# (the rest are read a piece at a time); and first the run before them, the link the
# first one is checked against (`before` 0, its seq + count, its sum).
_READ_PAGE = (
    "WITH start AS (SELECT coalesce(max(seq), 0) AS at FROM decisions WHERE seq <= %(first)s) "
    "(SELECT 0 AS before, seq + count, NULL::integer, NULL::integer, sum, NULL::bytea "
    "FROM decisions WHERE seq < (SELECT at FROM start) ORDER BY seq DESC LIMIT 1) "
    "UNION ALL "
    "(SELECT 1, seq, count, length(body), sum, CASE WHEN seq <= %(last)s "
    "AND length(body) <= %(small)s AND coalesce(sum(length(body)) OVER "
    "(ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) <= %(room)s "
    "THEN body END FROM decisions WHERE seq >= (SELECT at FROM start) "
    "ORDER BY seq LIMIT %(runs)s) ORDER BY 1, 2"
)
_RUN_BYTES = "SELECT substring(body FROM %s FOR %s) FROM decisions WHERE seq = %s"
_LATEST = "SELECT coalesce(max(n), 0) FROM revisions"
# A change numbered after the newest, and the oldest past the newest KEEP dropped.
_NOTE_CHANGE = (
    "WITH added AS (INSERT INTO changes (seq, kind, key, sum) "
    "VALUES (%(seq)s, %(kind)s, %(key)s, %(sum)s)) "
    "DELETE FROM changes WHERE seq <= %(kept)s"
)
# The latest revision, the schema's version, the newest change, and the changes after
# one (at most a limit), in one statement: one snapshot.
_CHANGES_AFTER = (
    f"SELECT ({_LATEST}), ({pgschema.READ_VERSION}), "
    "(SELECT coalesce(max(seq), 0) FROM changes), c.seq, c.kind, c.key, c.sum "
    "FROM (SELECT 1) AS one LEFT JOIN LATERAL (SELECT seq, kind, key, sum FROM changes "
    "WHERE seq > %(after)s ORDER BY seq LIMIT %(limit)s) AS c ON true"
)
_SET_META = (
    "INSERT INTO meta (key, body, sum) VALUES (%s, %s, %s) "
    "ON CONFLICT (key) DO UPDATE SET body = excluded.body, sum = excluded.sum"
)
_PAGE = 500  # rows a scan reads at a time

# SQLSTATE classes of conditions that pass (StoreUnavailable): a connection exception,
# insufficient resources (a full disk, out of memory), operator intervention (a server
# shutting down, a statement cancelled), an object not available (a lock past its
# timeout), a transaction rolled back (a deadlock), a system error (I/O).
_PASSING = frozenset({"08", "53", "57", "55", "40", "58"})
# Those that say the server cannot write (its disk, not another writer): /readyz reports
# them until a write succeeds (`PostgresStore.write_failure`).
_CANNOT_WRITE = {"53100": "the disk is full", "58030": "an I/O error"}


def _piece(db: Connection, seq: int, start: int, size: int) -> bytes:
    row = db.execute(_RUN_BYTES, (start, size, seq)).fetchone()
    return b"" if row is None or row[0] is None else bytes(row[0])


def _opened(db: Connection, bodies: dict[int, bytes], seq: int, length: int) -> logread.Pieces:
    """The body of the run `seq`: from what the page's statement read of it, or else a
    piece at a time from the database."""
    body = bodies.get(seq)
    if body is None:
        return logread.Pieces(partial(_piece, db), seq, length)
    return logread.Pieces(lambda _seq, start, size: body[start - 1 : start - 1 + size], seq, length)


class PostgresStore:
    """`url`: `postgresql://...` (libpq's URI; a `host` of a socket directory too).
    `timeout`: how long a connection attempt, or a transaction waiting for another
    writer, takes before StoreUnavailable."""

    waits = True  # (Store.waits: a transaction's round trips, its COMMIT's fsync)

    def __init__(self, url: str, *, shared: bool = False, timeout: float = 30.0) -> None:
        self.url = url
        self.shared = shared  # (every PostgresStore takes the writer lock)
        self._timeout = timeout
        self._lock = threading.RLock()
        self._depth = 0
        self._wrote = False  # whether the current transaction wrote
        # whether it added a revision or noted a change (it moves the feed)
        self._changed = False
        self._began = 0  # what data_version() says inside the current transaction
        # The log's last run (the seq after it, its sum; None, None: no run yet) as the
        # current transaction's BEGIN read it, and after each append of its own.
        self._tip: tuple[Any, Any] | None = None
        self._held: set[str] = set()  # the ledger subjects the current transaction holds
        self._holding: str | None = None  # one to hold with the next ledger statement
        # Writes of the current transaction whose results nobody reads (a run of the
        # log), not sent yet: they go with its COMMIT, in the same round trip, or before
        # any other statement of it (which may read what they wrote).
        self._pending: list[tuple[Statement, tuple[Any, ...]]] = []
        self._prepared = Prepared()  # (the statements of pgpipe.py on this connection)
        # The current transaction's COMMIT, when its caller reads the answer later
        # (`defer_commit`); and a COMMIT sent whose answer nobody has read yet: the
        # pipeline, whether the feed moved, whether it wrote, its after-commit actions.
        self._deferring: Deferred | None = None
        self._unsettled: tuple[Deferred, Pipeline, bool, bool, list[Callable[[], None]]] | None
        self._unsettled = None
        self._after_commit: list[Callable[[], None]] = []
        self._on_begin: Callable[[], None] | None = None
        self._db: Connection | None = None
        self.write_failed: str | None = None
        self._feed = Feed(url)
        with self._lock:
            db = self._connection()
            try:
                pgschema.migrate(db)  # (StoreTooNew: a newer charter's database)
            except psycopg.Error as exc:
                self._close_connection()
                raise self._failure(exc) from exc
            except BaseException:
                self._close_connection()
                raise

    # ---- the connection and its errors ----------------------------------------------------
    def _connection(self) -> Connection:
        """The process's connection, connected again if it was lost (outside a
        transaction: one that lost it has failed)."""
        if self._unsettled is not None:
            self._settle()  # (the answer to a COMMIT sent, read before anything else)
        db = self._db
        if db is not None and not db.closed:
            if self._pending:
                pending, self._pending = self._pending, []
                write = Pipeline(db, self._prepared)
                for statement, params in pending:
                    write.add(statement, params)
                write.send()
            return db
        if self._depth:
            raise StoreUnavailable("the connection to the database was lost")
        try:
            db = psycopg.connect(
                self.url, autocommit=True, connect_timeout=max(1, round(self._timeout))
            )
            db.execute(f"SET lock_timeout = {max(1, int(self._timeout * 1000))}")
        except psycopg.Error as exc:
            raise self._failure(exc) from exc
        self._db = db
        return db

    def _close_connection(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            with contextlib.suppress(psycopg.Error):
                db.close()

    def _failure(self, exc: psycopg.Error) -> Exception:
        """What a driver error goes up as: StoreUnavailable for a condition that passes
        (and why writes fail, for /readyz), ValueError for a value refused, else
        RuntimeError. A connection it broke is dropped: the next call connects again."""
        state = exc.sqlstate or ""
        db = self._db
        if db is not None and db.broken:
            self._close_connection()
        if isinstance(exc, psycopg.DataError):
            return ValueError(f"the database refused a value ({str(exc).strip().lower()})")
        if (
            isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
            or state[:2] in _PASSING
        ):
            why = _CANNOT_WRITE.get(state)
            if why is not None:
                self.write_failed = f"the last write failed: {why} ({state})"
            name = state or type(exc).__name__
            return StoreUnavailable(f"the database is unavailable ({name})")
        return RuntimeError(f"the database failed a statement ({str(exc).strip().lower()})")

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except psycopg.Error as exc:
            raise self._failure(exc) from exc

    def _rows(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        """A statement's rows (none for one that returns none), under the store's lock."""
        with self._errors():
            cursor = self._connection().execute(statement, params)
            return cursor.fetchall() if cursor.description is not None else []

    def _one(self, statement: str, params: Any = None) -> tuple[Any, ...] | None:
        rows = self._rows(statement, params)
        return rows[0] if rows else None

    # ---- transactions ---------------------------------------------------------------------
    def atomic(self) -> Transaction:
        return Transaction(self)

    # The transaction's hooks (policy/store/transaction.py), under the store's lock.

    def _begin(self) -> None:
        db = self._connection()
        try:
            begin = Pipeline(db, self._prepared)
            begin.add(b"BEGIN")
            begin.add(_LOCK)
            begin.add(_TIP)
            row = begin.send()[2]
        except psycopg.Error as exc:
            failure = self._failure(exc)
            self._rollback_quietly()
            raise failure from exc
        assert row is not None  # (one row: the feed's, the log's tip joined to it)
        version, tip, chained_to = row
        self._began = self._feed.seen(pgpipe.int8(version) or 0)
        self._tip = (pgpipe.int8(tip), chained_to)
        self._wrote = self._changed = False
        self._held.clear()
        self._holding = None

    def _commit(self) -> None:
        db = self._db
        pending, self._pending = self._pending, []
        deferred, self._deferring = self._deferring, None
        if db is None or db.closed:
            raise StoreUnavailable("the connection to the database was lost")
        changed, wrote = self._changed, self._wrote
        try:
            # One round trip: the writes waiting to be sent, the feed moved (when the
            # transaction changed what it tells of), and the COMMIT; the COMMIT runs only
            # if every statement before it succeeded.
            commit = Pipeline(db, self._prepared)
            for statement, params in pending:
                commit.add(statement, params)
            if changed:
                commit.add(_BUMP)
            commit.add(b"COMMIT")
            if deferred is not None:  # (the answer is read later: `_settle`)
                commit.start()
                actions, self._after_commit = self._after_commit, []
                self._unsettled = (deferred, commit, changed, wrote, actions)
                deferred.fileno = db.pgconn.socket
                deferred.reader = self._settle_outside
                deferred.answered = partial(self._answered, deferred)
                return
            rows = commit.send()
        except psycopg.Error as exc:
            failure = self._failure(exc)
            self._rollback_quietly()
            raise failure from exc
        self._committed(rows, changed, wrote)

    def _committed(self, rows: list[Any], changed: bool, wrote: bool) -> None:
        if changed:
            bumped = rows[-2]
            if bumped is not None:
                self._feed.own(pgpipe.int8(bumped[0]) or 0)
        if wrote:
            self.write_failed = None

    def defer_commit(self) -> Deferred | None:
        """Inside a transaction: its COMMIT is sent at its end and its answer read later,
        by the caller (the Deferred's `settle`, once its `fileno` is readable) or before
        the next use of the connection (policy/store/deferred.py)."""
        with self._lock:
            if not self._depth:
                return None
            if self._deferring is None:
                self._deferring = Deferred()
            return self._deferring

    def _answered(self, deferred: Deferred) -> bool:
        """Whether the answer to `deferred`'s COMMIT is in, whole or in part (its start
        may have been read off the socket with what was sent, and then the socket does
        not say so): under the store's lock, without waiting for it (a thread that holds it
        reads the answer first)."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            db = self._db
            unsettled = self._unsettled
            if unsettled is None or unsettled[0] is not deferred or db is None:
                return True  # (read already)
            try:
                db.pgconn.consume_input()
            except psycopg.Error:
                return True  # (a broken connection: reading says so at once)
            return not db.pgconn.is_busy()
        finally:
            self._lock.release()

    def _settle_outside(self) -> None:
        with self._lock:
            self._settle()

    def _settle(self) -> None:
        """Read the answer to the COMMIT sent (under the store's lock): the Deferred is
        done, committed or failed (rolled back), and the after-commit actions run."""
        unsettled, self._unsettled = self._unsettled, None
        if unsettled is None:
            return
        deferred, commit, changed, wrote, actions = unsettled
        try:
            rows = commit.finish()
        except psycopg.Error as exc:
            failure = self._failure(exc)
            self._rollback_quietly()
            deferred.done(failure)
            return
        self._committed(rows, changed, wrote)
        try:
            for action in actions:
                action()
        finally:
            deferred.done(None)

    def _rollback(self, exc: BaseException | None) -> None:
        self._rollback_quietly()

    def _ended(self) -> None:
        # The advisory lock ends with the transaction: nothing to release. A transaction
        # rolled back leaves nothing to wait for.
        self._deferring = None

    def _rollback_quietly(self) -> None:
        self._pending = []
        db = self._db
        if db is None or db.closed:
            return
        try:
            if db.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                # (past psycopg: a ROLLBACK it runs makes it deallocate every prepared
                # statement, pgpipe's too)
                rollback = Pipeline(db, self._prepared)
                rollback.add(b"ROLLBACK")
                rollback.send()
        except psycopg.Error:
            self._close_connection()  # (a connection that cannot roll back is let go)

    def _written(self, changed: bool = False) -> None:
        """The current transaction wrote; `changed`: a revision or a noted change, what
        `data_version()` tells other processes of (their caches hold nothing else)."""
        self._wrote = True
        self._changed = self._changed or changed

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
            if self._depth:  # inside this thread's transaction: as read at its BEGIN
                return self._began
        found = self._feed.version()
        self._feed.start()
        if found is not None:
            return found
        with self._lock:
            return self._feed.seen(self._feed_row())

    def _feed_row(self) -> int:
        row = self._one("SELECT version FROM feed")
        return 0 if row is None else int(row[0])

    def moved(self) -> str | None:
        return None

    def serving(self) -> None:
        """Nothing to start: the server keeps its own files (checkpoints, vacuum)."""

    def write_failure(self) -> str | None:
        """Why this store cannot write (its last write failed for want of space, or an I/O
        error), or None. While it fails, a write is tried here (a meta value), so a
        server with room again is found without a request's write."""
        if self.write_failed is None:
            return None
        with contextlib.suppress(StoreUnavailable), self.atomic():
            body = cbor2.dumps(time.time_ns())
            self._rows(_SET_META, ("write_probe", body, row_digest("meta", ("write_probe", body))))
            self._written()
        return self.write_failed

    # ---- revisions ------------------------------------------------------------------------
    def add_revision(self, body: Mapping[str, Any]) -> int:
        refs, new = texts.split(body["files"])  # (hashed before the writer lock)
        with self.atomic():
            if new:
                with self._errors():
                    self._connection().cursor().executemany(
                        "INSERT INTO texts (digest, body, sum) VALUES (%s, %s, %s) "
                        "ON CONFLICT (digest) DO NOTHING",
                        [
                            (key, text, row_digest("texts", (key, text)))
                            for key, text in new.items()
                        ],
                    )
            last = self._one(_LATEST)
            number = int(last[0] if last else 0) + 1
            # Its row holds what changed since the latest, read here, under the writer
            # lock: another process may have added one since this one last looked.
            tip = self._replay(number - 1) if number > 1 else None
            row = encoded(revisions.row(body, refs, tip, number))
            self._rows(
                "INSERT INTO revisions (n, body, sum) VALUES (%s, %s, %s)",
                (number, row, row_digest("revisions", (number, row))),
            )
            self._written(changed=True)
            return number

    def get_revision(self, number: int) -> Doc | None:
        with self._lock:
            state = self._replay(number)
            if state is None:
                return None
            pairs = state.pairs()
            found = self._texts(texts.digests(pairs))
        return state.body(texts.join(pairs, found))

    def _replay(self, number: int) -> revisions.Replay | None:
        """Revision `number` read from its chain: the full row it starts from and the
        deltas after it, `revisions.EVERY` rows at most (under the lock)."""
        found = self._one("SELECT n, body, sum FROM revisions WHERE n = %s", (number,))
        if found is None:
            return None
        last = revision(*found)
        state = revisions.Replay()
        if revisions.is_delta(last):
            for n, blob, stored in self._rows(
                "SELECT n, body, sum FROM revisions WHERE n >= %s AND n < %s ORDER BY n",
                (revisions.chain_start(number, last), number),
            ):
                state.apply(int(n), revision(n, blob, stored))
        state.apply(number, last)
        return state

    def _texts(self, digests: set[bytes]) -> dict[bytes, bytes]:
        found: dict[bytes, bytes] = {}
        if not digests:
            return found
        for digest, body, stored in self._rows(
            "SELECT digest, body, sum FROM texts WHERE digest = ANY(%s)", (list(digests),)
        ):
            summed("texts", f"the policy text {bytes(digest).hex()[:16]}", stored, digest, body)
            found[digest] = body
        missing = digests.difference(found)
        if missing:  # (committed with the revision and never deleted: removed behind it)
            raise StoreDamaged(
                f"the policy text {min(missing).hex()[:16]}", "it is not in the database"
            )
        return found

    def latest_revision(self) -> int:
        with self._lock:
            row = self._one(_LATEST)
        return int(row[0]) if row else 0

    def list_revisions(self, after: int, limit: int) -> list[tuple[int, Doc]]:
        state = revisions.Replay()
        with self._lock:
            rows = [
                (int(n), revision(n, blob, stored))
                for n, blob, stored in self._rows(
                    "SELECT n, body, sum FROM revisions WHERE n > %s ORDER BY n LIMIT %s",
                    (after, limit),
                )
            ]
            if rows and revisions.is_delta(rows[0][1]):  # (the rows before it in its chain)
                first, row = rows[0]
                for n, blob, stored in self._rows(
                    "SELECT n, body, sum FROM revisions WHERE n >= %s AND n < %s ORDER BY n",
                    (revisions.chain_start(first, row), first),
                ):
                    state.apply(int(n), revision(n, blob, stored))
        listed = []
        for n, row in rows:
            state.apply(n, row)
            listed.append((n, state.body(state.paths(), shared=True)))
        return listed

    # ---- documents ------------------------------------------------------------------------
    # Every write runs in `atomic()`: inside a caller's transaction it joins it; alone it is
    # a transaction of its own, so it takes the writer lock like any other.
    def insert(self, kind: str, id: str, body: Mapping[str, Any], tag: str | None = None) -> bool:
        blob = encoded(body)
        with self.atomic():
            done = self._rows(
                "INSERT INTO documents (kind, id, tag, body, sum) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (kind, id) DO NOTHING RETURNING pos",
                (kind, id, tag, blob, row_digest("documents", (kind, id, tag, blob))),
            )
            if done:
                self._written()
        return bool(done)

    def insert_many(
        self, kind: str, docs: Sequence[tuple[str, Mapping[str, Any], str | None]]
    ) -> int:
        rows = document_rows(kind, docs)
        if not rows:
            return 0
        with self.atomic(), self._errors():
            cursor = self._connection().cursor()
            cursor.executemany(
                "INSERT INTO documents (kind, id, tag, body, sum) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (kind, id) DO NOTHING",
                rows,
            )
            added = max(cursor.rowcount, 0)
            if added:
                self._written()
        return added

    def update(self, kind: str, id: str, body: Mapping[str, Any], tag: str | None = None) -> bool:
        blob = encoded(body)
        with self.atomic():
            done = self._rows(
                "UPDATE documents SET body = %s, tag = %s, sum = %s WHERE kind = %s AND id = %s "
                "RETURNING pos",
                (blob, tag, row_digest("documents", (kind, id, tag, blob)), kind, id),
            )
            if done:
                self._written()
        return bool(done)

    def get(self, kind: str, id: str) -> Doc | None:
        with self._lock:
            row = self._one(
                "SELECT tag, body, sum FROM documents WHERE kind = %s AND id = %s", (kind, id)
            )
        return None if row is None else document(kind, id, *row)

    def delete(self, kind: str, id: str) -> bool:
        with self.atomic():
            done = self._rows(
                "DELETE FROM documents WHERE kind = %s AND id = %s RETURNING pos", (kind, id)
            )
            if done:
                self._written()
        return bool(done)

    def page(self, kind: str, after_pos: int, limit: int, tag: str | None = None) -> list[Row]:
        with self._lock:
            if tag is None:
                rows = self._rows(
                    "SELECT pos, id, tag, body, sum FROM documents WHERE kind = %s AND pos > %s "
                    "ORDER BY pos LIMIT %s",
                    (kind, after_pos, limit),
                )
            else:
                rows = self._rows(
                    "SELECT pos, id, tag, body, sum FROM documents "
                    "WHERE kind = %s AND tag = %s AND pos > %s ORDER BY pos LIMIT %s",
                    (kind, tag, after_pos, limit),
                )
        return [
            Row(int(pos), str(name), document(kind, name, found, blob, stored))
            for pos, name, found, blob, stored in rows
        ]

    def scan(self, kind: str, tag: str | None = None) -> Iterator[Row]:
        after = 0
        while True:
            rows = self.page(kind, after, _PAGE, tag)
            yield from rows
            if len(rows) < _PAGE:
                return
            after = rows[-1].pos

    # ---- the decision log -----------------------------------------------------------------
    def append_decisions(self, rows: Sequence[bytes]) -> list[int]:
        if not rows:
            return []
        body = logread.pack(rows)
        with self.atomic():
            # One INSERT for the whole run, numbered after the last run under the writer
            # lock, and chained to it (policy/store/rowsum.py).
            last = self._tip if self._tip is not None else self._one(_LAST_RUN)
            chained_to: Any
            if last is None or last[0] is None:
                first, chained_to = 1, GENESIS
            else:
                first, chained_to = int(last[0]), last[1]
            if not isinstance(chained_to, bytes):  # (the sum of the last run is damaged)
                chained_to = b""
            digest = log_digest(chained_to, first, len(rows), body)
            self._pending.append((_APPEND, (first, len(rows), body, digest)))
            self._tip = (first + len(rows), digest)
            self._written()
        return list(range(first, first + len(rows)))

    def read_decisions(
        self, after_seq: int, limit: int, max_bytes: int | None = None
    ) -> list[tuple[int, bytes | Damaged]]:
        found: list[tuple[int, bytes | Damaged]] = []
        if limit <= 0:
            return found
        with self._lock, self._errors():
            db = self._connection()
            small = logread.PIECE if max_bytes is None else min(logread.PIECE, max_bytes)
            page = db.execute(
                _READ_PAGE,
                {"first": after_seq + 1, "last": after_seq + limit, "small": small,
                 "room": limit * logread.PIECE if max_bytes is None else max_bytes,
                 "runs": limit + 2},
            ).fetchall()  # fmt: skip
            chain = Chain()
            runs: list[tuple[Any, ...]] = []
            bodies: dict[int, bytes] = {}
            for before, seq, count, length, stored, body in page:
                if not before:
                    chain = Chain(int(seq), stored)
                    continue
                runs.append((seq, count, length, stored))
                if body is not None:
                    bodies[seq] = body
            return logread.read(
                runs, lambda seq: chain, partial(_opened, db, bodies), (),
                after_seq, limit, max_bytes, found,
            )  # fmt: skip

    def log_head(self) -> tuple[int, bytes]:
        with self._lock:
            last = self._one(_LAST_RUN)
        if last is None:
            return 0, GENESIS
        return int(last[0]) - 1, bytes(last[1] or b"")

    def log_link(self, seq: int) -> bytes | None:
        with self._lock:
            found = self._one(_RUN_AT, (seq,))
        return logread.link_at(seq, found)

    def last_seq(self) -> int:
        with self._lock:
            found = self._one(_LAST_RUN)
        return 0 if found is None else int(found[0]) - 1

    # ---- the budget ledger ----------------------------------------------------------------
    def spent(self, subject: str, since_ms: int) -> int:
        with self._lock:
            return ledger.spent(self._query, ledger.POSTGRES, subject, since_ms, self._hold)

    def charge(self, subjects: Sequence[str], micros: int, at_ms: int) -> None:
        with self.atomic():
            ledger.charge(self._query, ledger.POSTGRES, subjects, micros, at_ms, self._hold)
            if subjects:
                self._written()

    def charge_within(
        self, limits: Sequence[Limit], subjects: Sequence[str], micros: int, at_ms: int
    ) -> int | None:
        with self.atomic():
            passed = ledger.charge_within(
                self._query, ledger.POSTGRES, limits, subjects, micros, at_ms, self._hold
            )
            if passed is None and subjects:
                self._written()
            return passed

    def _hold(self, subject: str) -> None:
        """Hold `subject` to the current transaction (nothing outside one): a lock of its
        own, taken in a statement before the one that reads its rows, since a statement
        sees what was committed when it began, and one that waited for the lock would not
        see the charge committed meanwhile. The lock goes in the same round trip as that
        read (`_query`: two statements of one simple query, each with its own snapshot).
        Not the writer lock: the ledger's isolation is its own. Subjects are held as first
        read; two transactions that hold two subjects in opposite orders deadlock, and
        PostgreSQL ends one (StoreUnavailable: tried again, it succeeds). The writer lock,
        taken first, keeps that from happening."""
        if self._depth and subject not in self._held:
            self._holding = subject

    def _query(self, statement: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """A ledger statement's rows, after the lock of a subject `_hold` left to take."""
        subject, self._holding = self._holding, None
        if subject is None:
            return self._rows(statement, params)
        with self._errors():
            cursor = psycopg.ClientCursor(self._connection())
            cursor.execute(
                f"SELECT pg_advisory_xact_lock({pgschema.LEDGER_LOCKS}, hashtext(%(held)s)); "
                + statement,
                {**params, "held": subject},
            )
            cursor.nextset()
            rows = cursor.fetchall() if cursor.description is not None else []
        self._held.add(subject)
        return rows

    # ---- named values ---------------------------------------------------------------------
    def get_meta(self, key: str) -> Any:
        with self._lock:
            row = self._one("SELECT body, sum FROM meta WHERE key = %s", (key,))
        return None if row is None else meta(key, *row)

    # ---- the change feed -------------------------------------------------------------------
    def note_change(self, kind: str, key: str) -> None:
        with self.atomic():
            (newest,) = self._one("SELECT coalesce(max(seq), 0) FROM changes") or (0,)
            seq = int(newest) + 1
            self._rows(_NOTE_CHANGE, {"seq": seq, "kind": kind, "key": key,
                                      "sum": changes.digest(seq, kind, key),
                                      "kept": seq - changes.KEEP})  # fmt: skip
            self._written(changed=True)

    def changes_after(self, after: int) -> changes.Feed:
        with self._lock:
            rows = self._rows(_CHANGES_AFTER, {"after": after, "limit": changes.KEEP + 1})
        latest, version, newest = rows[0][:3]
        too_new = pgschema.refusal(int(version))
        if too_new is not None:  # (a newer charter migrated the database since)
            raise too_new
        found = [row[3:] for row in rows if row[3] is not None]
        return changes.read(after, int(latest), int(newest), found)

    def set_meta(self, key: str, value: Any) -> None:
        body = cbor2.dumps(value)
        with self.atomic():
            self._rows(_SET_META, (key, body, row_digest("meta", (key, body))))
            self._written()

    def close(self) -> None:
        self._feed.stop()
        with self._lock:
            with contextlib.suppress(Exception):
                self._settle()
            self._close_connection()
