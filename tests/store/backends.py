"""The stores the contract tests run on: SQLite (a file) and PostgreSQL (a database of a
test server, tests/pgserver.py), opened and read behind their backs alike."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any

from policy.store import Store
from policy.store.postgres import PostgresStore
from policy.store.sqlite import SqliteStore
from tests.pgserver import PgServer, in_schema


class Backend:
    """One database of one kind: `open()` a store on it (each one as another process's
    would be), `sql()` behind the stores' backs, `fresh()` another, empty database."""

    def __init__(self, kind: str, where: Path | str, server: PgServer | None) -> None:
        self.kind = kind
        self.where = where  # a file's path, or a URL
        self._server = server
        self._opened: list[Store] = []

    def open(self, **options: Any) -> Store:
        store: Store
        if self.kind == "sqlite":
            store = SqliteStore(self.where, **options)
        else:
            store = PostgresStore(str(self.where), **options)
        self._opened.append(store)
        return store

    def sql(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """A statement with `?` marks, run in a connection of its own."""
        if self.kind == "sqlite":
            with sqlite3.connect(self.where) as db:
                rows = db.execute(statement, params).fetchall()
            db.close()
            return rows
        assert self._server is not None
        return self._server.sql(str(self.where), statement.replace("?", "%s"), params)

    def fresh(self) -> Backend:
        """Another database of the same kind, empty (cheap: a schema in PostgreSQL)."""
        name = f"s_{uuid.uuid4().hex[:12]}"
        if self.kind == "sqlite":
            where: Path | str = Path(self.where).parent / f"{name}.db"
        else:
            where = in_schema(str(self.where), name)
        backend = Backend(self.kind, where, self._server)
        backend._opened = self._opened  # (closed with this one's)
        return backend

    def close(self) -> None:
        for store in self._opened:
            store.close()
        self._opened.clear()
