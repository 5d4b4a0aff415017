"""Statements sent to PostgreSQL in one round trip: libpq's pipeline, driven directly.

A write transaction of the decision path is two round trips: BEGIN with the writer lock
and the reads it needs (policy/store/postgres.py), then the run of the log with the
COMMIT. Each is a `Pipeline`: its statements are queued, sent with one Sync in one
write, and their results read back in one wait, the way the protocol allows and
psycopg's own pipeline does not (it reads back after every statement: three times the
waits of the statements sent one by one, measured).

The statements are prepared once per connection, by name (in the same round trip as
their first use), so the server neither parses nor plans them again; their parameters
and results are in binary. A statement that fails aborts the ones after it up to the
Sync (so a COMMIT after a failed INSERT does not run): `send` raises the first failure
as psycopg's error for it, with every result read and the connection out of pipeline
mode, ready for the ROLLBACK.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import errors, generators, pq
from psycopg.abc import PQGen

Connection = psycopg.Connection[tuple[Any, ...]]

INT8, INT4, BYTEA = 20, 23, 17  # the type oids of the parameters sent
_BINARY = 1
_INT8 = struct.Struct(">q")
_INT4 = struct.Struct(">i")
_FATAL = (pq.ExecStatus.FATAL_ERROR, pq.ExecStatus.PIPELINE_ABORTED)


@dataclass(frozen=True)
class Statement:
    """A statement prepared as `name`, its parameters of the types `types` (oids)."""

    name: bytes
    sql: bytes
    types: Sequence[int] = ()


@dataclass
class Prepared:
    """The statements prepared on a connection (a new connection prepares them again)."""

    connection: Connection | None = None
    names: set[bytes] = field(default_factory=set)

    def on(self, db: Connection) -> set[bytes]:
        if self.connection is not db:
            self.connection, self.names = db, set()
        return self.names


def value(kind: int, item: Any) -> bytes | None:
    """A parameter in PostgreSQL's binary format."""
    if item is None:
        return None
    if kind == INT8:
        return _INT8.pack(item)
    if kind == INT4:
        return _INT4.pack(item)
    return bytes(item)


def int8(found: bytes | None) -> int | None:
    return None if found is None else int(_INT8.unpack(found)[0])


class Pipeline:
    """Statements queued on `db` (in autocommit mode, idle or in a transaction) and sent
    together by `send`: each one's first row (binary values), or None."""

    def __init__(self, db: Connection, prepared: Prepared) -> None:
        self._db = db
        self._names = prepared.on(db)
        self._queued: list[tuple[Statement | bytes, Sequence[Any]]] = []
        self._expected: list[bytes | None] = []

    def add(self, statement: Statement | bytes, params: Sequence[Any] = ()) -> None:
        """`statement`: a prepared one, or plain SQL without parameters (BEGIN, COMMIT)."""
        self._queued.append((statement, params))

    def send(self) -> list[tuple[bytes | None, ...] | None]:
        self.start()
        return self.finish()

    def start(self) -> None:
        """Send the statements and the Sync, without waiting for the answer (`finish`
        reads it; nothing else may use the connection in between)."""
        db = self._db
        pgconn = db.pgconn
        pgconn.enter_pipeline_mode()
        try:
            self._expected = self._send_all(pgconn)
            db.wait(generators.send(pgconn))
        except BaseException:
            self._exit(pgconn)
            raise

    def finish(self) -> list[tuple[bytes | None, ...] | None]:
        """Wait for the answer and read it: each statement's first row, or None."""
        db = self._db
        pgconn = db.pgconn
        try:
            results = db.wait(self._read(pgconn, self._expected))
        finally:
            self._exit(pgconn)
        rows: list[tuple[bytes | None, ...] | None] = []
        for result in results:
            if result is None:
                rows.append(None)
                continue
            if result.status in _FATAL:
                failure = errors.error_from_result(result, encoding=db.info.encoding)
                if isinstance(failure, errors.InvalidSqlStatementName):
                    self._names.clear()  # (deallocated behind us: prepared again next time)
                raise failure
            rows.append(
                tuple(result.get_value(0, i) for i in range(result.nfields))
                if result.ntuples
                else None
            )
        return rows

    @staticmethod
    def _exit(pgconn: Any) -> None:
        if pgconn.status == pq.ConnStatus.OK and pgconn.pipeline_status:
            pgconn.exit_pipeline_mode()

    def _send_all(self, pgconn: Any) -> list[bytes | None]:
        """Queue every statement and a Sync; per result to come, the name its prepare
        adds (None: a statement's own result)."""
        expected: list[bytes | None] = []
        for statement, params in self._queued:
            if isinstance(statement, bytes):
                pgconn.send_query_params(statement, None)
                expected.append(None)
                continue
            if statement.name not in self._names:
                pgconn.send_prepare(statement.name, statement.sql, param_types=statement.types)
                expected.append(statement.name)
                self._names.add(statement.name)
            pgconn.send_query_prepared(
                statement.name,
                [value(kind, item) for kind, item in zip(statement.types, params, strict=True)],
                param_formats=[_BINARY] * len(params),
                result_format=_BINARY,
            )
            expected.append(None)
        pgconn.pipeline_sync()
        return expected

    def _read(self, pgconn: Any, expected: list[bytes | None]) -> PQGen[list[Any]]:
        """Each statement's result (and its prepare's) up to the Sync's: the statements'
        own results in order, or the first failure alone."""
        found: list[Any] = []
        failure = None
        for prepares in expected:
            results = yield from generators.fetch_many(pgconn)
            result = results[-1] if results else None
            if result is not None and result.status in _FATAL:
                failure = failure or result
                if prepares is not None:  # (failed or skipped: not prepared)
                    self._names.discard(prepares)
            elif prepares is None:
                found.append(result)
        sync = yield from generators.fetch_many(pgconn)  # (the Sync's result)
        if not sync or sync[-1].status != pq.ExecStatus.PIPELINE_SYNC:
            raise errors.InternalError("the pipeline's results ended out of step")
        return [failure] if failure is not None else found
