"""The store tests' fixtures: on the PostgreSQL server of the test process (`pg_server`,
tests/conftest.py), a database of its own per test, and `backend`,
each contract test run on both stores."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pgserver import PgServer
from tests.store.backends import Backend


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """A new, empty database of the test server."""
    return pg_server.database()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        found = Backend("sqlite", tmp_path / "s.db", None)
    else:
        server: PgServer = request.getfixturevalue("pg_server")
        found = Backend("postgres", server.database(), server)
    yield found
    found.close()
