"""The store's write transaction: BEGIN IMMEDIATE ... COMMIT under the store's locks.

What SQLite reports as a condition that passes (another writer past the timeout, a full
disk) goes up as StoreUnavailable (a 503 over HTTP), with the transaction rolled back.
"""

from __future__ import annotations

import sqlite3
from types import TracebackType
from typing import TYPE_CHECKING

from policy.store import StoreUnavailable

if TYPE_CHECKING:
    from policy.store.sqlite import SqliteStore

# SQLite's primary result codes for conditions that pass (StoreUnavailable): BUSY and
# LOCKED (another writer past the timeout), IOERR, FULL, CANTOPEN.
TRANSIENT = frozenset({5, 6, 10, 13, 14})
# Those that say the store cannot write (the disk, not another writer): /readyz reports
# them until a write succeeds (`SqliteStore.write_failure`).
CANNOT_WRITE = {10: "an I/O error", 13: "the disk is full", 14: "a file cannot be opened"}


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


class Transaction:
    """`SqliteStore.atomic()`: BEGIN IMMEDIATE ... COMMIT (ROLLBACK on an exception) under
    the store's lock, `on_begin`'s check first; a nested one joins the outer transaction
    (and is not checked again). A class rather than a
    generator-based context manager: it is entered twice for every decision request."""

    __slots__ = ("_outer", "_store")

    def __init__(self, store: SqliteStore) -> None:
        self._store = store
        self._outer = False

    def __enter__(self) -> None:
        store = self._store
        store._lock.acquire()
        if store._depth:
            store._depth += 1
            return
        writers = store._writers
        try:
            if writers is not None:
                writers.acquire()
            try:
                store._cursor.execute("BEGIN IMMEDIATE")
            except BaseException as exc:
                if writers is not None:
                    writers.release()
                if _transient(exc):
                    raise _unavailable(exc, store) from exc
                raise
        except BaseException:
            store._lock.release()
            raise
        store._depth = 1
        store._changes = store._db.total_changes
        self._outer = True
        check = store._on_begin
        if check is not None:
            try:
                check()
            except BaseException as refused:  # rolled back: nothing of it is written
                self.__exit__(type(refused), refused, refused.__traceback__)
                raise

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        store = self._store
        try:
            if not self._outer:
                store._depth -= 1
                return
            try:
                if kind is None:
                    try:
                        store._cursor.execute("COMMIT")
                    except BaseException as failed:
                        if store._db.in_transaction:
                            store._db.execute("ROLLBACK")
                        if _transient(failed):
                            raise _unavailable(failed, store) from failed
                        raise
                    store.committed()  # (the mark, before anyone is told)
                    actions, store._after_commit = store._after_commit, []
                    for action in actions:
                        action()
                else:
                    if store._db.in_transaction:  # (SQLite may have rolled back already)
                        store._db.execute("ROLLBACK")
                    if exc is not None and _transient(exc):  # a full disk mid-way, say
                        raise _unavailable(exc, store) from exc
            finally:
                store._depth = 0
                store._after_commit = []
                store._due_seq = store._due_revision = None
                if store._writers is not None:
                    store._writers.release()
        finally:
            store._lock.release()
