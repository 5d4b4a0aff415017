"""The stores the contract tests run on: SQLite (a file) and PostgreSQL (a database of a
test server, tests/pgserver.py), opened and read behind their backs alike."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from policy.store import Store
from policy.store.postgres import PostgresStore
from policy.store.sqlite import SqliteStore
from tests.pgserver import PgServer


class Backend:
    """One database of one kind: `open()` a store on it (each one as another process's
    would be), `sql()` behind the stores' backs."""

    def __init__(self, kind: str, where: Path | str, server: PgServer | None) -> None:
        self.kind = kind
        self.where = where  # a file's path, or a URL
        self._server = server
        self._opened: list[Store] = []
        self._kept: Store | None = None

    def open(self, **options: Any) -> Store:
        store: Store
        if self.kind == "sqlite":
            store = SqliteStore(self.where, **options)
        else:
            store = PostgresStore(str(self.where), **options)
        self._opened.append(store)
        return store

    def kept(self) -> Store:
        """One store, opened on the first call and the same after (for the examples of a
        property, each of which empties the tables it uses)."""
        if self._kept is None:
            self._kept = self.open()
        return self._kept

    def sql(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """A statement with `?` marks, run in a connection of its own."""
        if self.kind == "sqlite":
            with sqlite3.connect(self.where) as db:
                rows = db.execute(statement, params).fetchall()
            db.close()
            return rows
        assert self._server is not None
        return self._server.sql(str(self.where), statement.replace("?", "%s"), params)

    def close(self) -> None:
        for store in self._opened:
            store.close()
        self._opened.clear()
