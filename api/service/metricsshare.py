"""The workers' counters, shared through files beside the database.

With `charter serve --workers N` a scrape of /metrics reaches one worker, and a counter
that is one worker's total in one scrape and another's in the next is no counter. So
each worker writes its counters to `<db>.metrics/<pid>-<start>.json` about once a second
(a write to a temporary file, then a rename: a reader never sees half a file), off the
request path, and the worker answering a scrape adds the others' latest files to its own
live counters. A worker that has exited leaves its last file, so the sums never go down;
`charter serve` empties the directory before it starts its workers. A file that does not
read as counters (cut short, edited) is left out rather than failing the scrape.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field

from api.service.encoding import dumps
from api.service.metrics import BUCKETS, Metrics

PUBLISH_EVERY = 1.0  # seconds: how far behind another worker's counters can be
# Label values from a file are written into the Prometheus text: only names as the
# service makes them (effects, problem codes), so an edited file cannot add lines.
_Name = Annotated[str, Field(strict=True, pattern=r"^[a-z0-9][a-z0-9-]*$")]
_Count = Annotated[int, Field(strict=True, ge=0)]


class _Snapshot(BaseModel):
    """What `Metrics.snapshot` gives, as a file must hold it to be counted."""

    decisions: dict[_Name, _Count]
    counts: Annotated[list[_Count], Field(min_length=len(BUCKETS) + 1, max_length=len(BUCKETS) + 1)]
    total: Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]
    requests: _Count
    rejected: list[tuple[_Count, _Name, _Count]]  # (status, problem code, count)


def directory_for(db: str) -> Path:
    return Path(f"{db}.metrics")


def reset(db: str) -> None:
    """Before the workers start: counts of an earlier run are not this one's."""
    shutil.rmtree(directory_for(db), ignore_errors=True)


class SharedMetrics:
    """One worker's side: publish its own counters, read the others'."""

    def __init__(self, db: str, metrics: Metrics, every: float = PUBLISH_EVERY) -> None:
        self.directory = directory_for(db)
        self.directory.mkdir(mode=0o700, exist_ok=True)
        self.metrics = metrics
        self.name = f"{os.getpid()}-{time.time_ns()}.json"  # a reused pid gets a new file
        self._every = every
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._published: bytes | None = None

    def publish(self) -> None:
        data = dumps(self.metrics.snapshot())
        path = self.directory / self.name
        # Unchanged counts are written again only if the file is gone (another `charter
        # serve` on this database empties the directory when it starts).
        if data == self._published and path.exists():
            return
        self.directory.mkdir(mode=0o700, exist_ok=True)
        temporary = self.directory / f".{self.name}.tmp"
        temporary.write_bytes(data)
        os.replace(temporary, path)
        self._published = data

    def others(self) -> list[dict[str, Any]]:
        """The other workers' latest published counters."""
        found = []
        for path in sorted(self.directory.glob("*.json")):
            if path.name == self.name:
                continue
            with contextlib.suppress(OSError, ValueError):  # (ValidationError is one)
                found.append(_Snapshot.model_validate_json(path.read_bytes()).model_dump())
        return found

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._loop, daemon=True, name="charter-metrics-publish"
            )
            self._thread.start()

    def close(self) -> None:
        """Stop publishing, after a last publication (a worker shutting down)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with contextlib.suppress(OSError):
            self.publish()

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            with contextlib.suppress(OSError):  # a full disk: the next turn tries again
                self.publish()
