"""Which turns of a run work in the background ran in (bench.store_bench).

Two kinds of work run now and then whatever is measured, and move the figures of the
turn they land on (taking CPU from it, and counted in PostgreSQL's CPU a decision when
they are PostgreSQL's):
- PostgreSQL's autovacuum: the launcher wakes every `autovacuum_naptime` (60 s) and
  vacuums what was written since, the decision log and its TOAST table first (about 3 s
  of a worker at the store bench's rates);
- charter's log checkpoint (policy/logseal.py): every 60 s each serving process walks
  the log from the newest signed checkpoint to the head, verifying the chain before it
  signs it. On PostgreSQL that walk reads the runs written since (a minute of batches:
  millions of decisions, 2-3 s of a server process) with the log's page statement.
A thread of its own asks `pg_stat_activity` every `EVERY` seconds whether either is
running, and a turn says which ran within it.
"""

from __future__ import annotations

import threading
import time

import psycopg

EVERY = 0.2  # seconds between looks
_RUNNING = (
    "SELECT backend_type = 'autovacuum worker' FROM pg_stat_activity WHERE state = 'active' "
    "AND (backend_type = 'autovacuum worker' "
    "OR query LIKE 'WITH start AS (SELECT coalesce(max(seq)%%')"
)
VACUUM, WALK = "autovacuum", "log walk"


class BackgroundWatch:
    def __init__(self, url: str) -> None:
        self._url = url
        self._seen: list[tuple[float, str]] = []  # (monotonic time, VACUUM or WALK)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="background-watch")

    def __enter__(self) -> BackgroundWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def ran(self, start: float, end: float) -> frozenset[str]:
        """What was seen running between `start` and `end` (monotonic)."""
        return frozenset(kind for at, kind in list(self._seen) if start <= at <= end)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._url, autocommit=True) as db:
                    while not self._stop.wait(EVERY):
                        now = time.monotonic()
                        for (vacuum,) in db.execute(_RUNNING).fetchall():
                            self._seen.append((now, VACUUM if vacuum else WALK))
            except psycopg.Error:  # (the server restarting or stopping: look again)
                self._stop.wait(1)
