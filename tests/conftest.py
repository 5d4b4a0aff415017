"""Shared test set-up: hypothesis profiles (`fast` for `make test`, `long` for `make fuzz`),
and `pg_server`: a real PostgreSQL server per test process (each pytest-xdist worker
starts its own, on first use: tests/pgserver.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    MultiplexedDatabase,
    ReadOnlyDatabase,
)

from tests.pgserver import PgServer, running

# Failures a fuzz run found (`make fuzz`, CHARTER_FUZZ_SAVE=1: tests/fuzz/run.py) are
# saved in tests/fuzz/regressions/hypothesis, which every run replays first, read only
# (hypothesis's example database, by test: a saved case replays while its test's source
# is the same). Local runs keep theirs in .hypothesis/examples, as by default.
SAVED = Path(__file__).resolve().parent / "fuzz" / "regressions" / "hypothesis"
LOCAL = DirectoryBasedExampleDatabase(".hypothesis/examples")
DATABASE = MultiplexedDatabase(
    LOCAL,
    DirectoryBasedExampleDatabase(SAVED)
    if os.environ.get("CHARTER_FUZZ_SAVE")
    else ReadOnlyDatabase(DirectoryBasedExampleDatabase(SAVED)),
)
settings.register_profile(
    "fast",
    database=DATABASE,
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "long",
    database=DATABASE,
    max_examples=20_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.register_profile(
    "custom",  # HYPOTHESIS_PROFILE=custom HYPOTHESIS_EXAMPLES=3000: a run of a chosen length
    parent=settings.get_profile("long"),
    max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", "1000")),
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    with running() as server:
        yield server
