"""The workers' counters, shared through memory-mapped files beside the database (for a
store kept by a server, beside the key file: api/node_files.py; `db` below is what the
files are named after).

With `charter serve --workers N` a scrape of /metrics reaches one worker, and a counter
that is one worker's total in one scrape and another's in the next is no counter. So each
worker keeps a copy of its counters in `<db>.metrics/<pid>-<start>.bin`, mapped into its
memory (MAP_SHARED): each change to a counter is also a store into the mapping, and the
worker answering a scrape reads the others' files, which show their counts as of that
moment. The kernel keeps what was stored in a shared mapping when its process dies, even
by SIGKILL, and a worker's file stays after it exits, so the sums never go down and a
crashed worker's decisions stay counted (they were lost for up to a second when each
worker wrote a JSON file once a second: a scrape the dying worker had answered could show
more than every later one). `charter serve` empties the directory before its workers
start.

A file is a header (`MAGIC`, then the bytes used) and entries appended after it, each its
key's length, the key (padded to 8 bytes) and an 8-byte value, native and aligned, so a
store and a load of one value are one machine word each: a reader never sees half of
one. An entry's value is written before the header counts the entry. A file that does
not read as counters, or an entry whose key is not one the service makes, is left out,
so an edited file cannot add lines to the Prometheus text.
"""

from __future__ import annotations

import math
import mmap
import os
import re
import shutil
import struct
import threading
import time
from pathlib import Path
from typing import Any

from api.service.metrics import BUCKETS, Metrics

MAGIC = b"CHRTMET1"
SIZE = 64 * 1024  # room for about 700 keys; the service makes fewer than 200
_HEADER = len(MAGIC) + 8
_WORD = struct.Struct("@q")  # native and aligned: one store, one load
_FLOAT = struct.Struct("@d")
# The keys the service writes (effects and problem codes are `[a-z0-9-]` names).
_KEY = re.compile(r"decision:[a-z0-9][a-z0-9-]*|bucket:[0-9]{1,2}|total|rejected:[0-9]{3}:"
                  r"[a-z0-9][a-z0-9-]*|webhook:(?:delivered|retry|given-up)")  # fmt: skip
_MAX_KEY = 128


def directory_for(db: str) -> Path:
    return Path(f"{db}.metrics")


def reset(db: str) -> None:
    """Before the workers start: counts of an earlier run are not this one's. A symlink
    to a directory (the files kept elsewhere, a tmpfs say) stays, emptied of counter
    files: `rmtree` refuses a link, and the last run's files were summed into this one's."""
    directory = directory_for(db)
    if directory.is_symlink():
        for path in directory.glob("*.bin"):
            path.unlink(missing_ok=True)
        return
    shutil.rmtree(directory, ignore_errors=True)


def refusal(db: str) -> str | None:
    """Why the workers of `charter serve --workers N` could not keep their counter files
    (something at `<db>.metrics` that is not a directory), or None. Each worker failed
    as it started, and uvicorn started another in its place, again and again: the server
    said it was serving and served nothing."""
    directory = directory_for(db)
    if not os.path.lexists(directory) or directory.is_dir():
        return None
    return f"`{directory}` is not a directory: the workers keep their counters there"


def _entry_size(key: bytes) -> int:
    return 8 + (len(key) + 7) // 8 * 8 + 8


class CounterFile:
    """One process's counters in its mapped file: `set` a key's value (added at the end
    the first time it is set). Callers serialize `set`s of one key; new keys are added
    under a lock of this file's own."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._offsets: dict[str, int] = {}
        self._used = _HEADER
        self._map = self._create()

    def _create(self) -> mmap.mmap:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            # Blocks allocated now: a store into a page of a sparse file that a full disk
            # cannot back is a SIGBUS, which would kill the worker.
            os.posix_fallocate(fd, 0, SIZE)
            mapped = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        mapped[: len(MAGIC)] = MAGIC
        _WORD.pack_into(mapped, len(MAGIC), _HEADER)
        return mapped

    def set(self, key: str, value: float) -> None:
        offset = self._offsets.get(key)
        if offset is None:
            offset = self._add(key)
            if offset is None:
                return  # (no room: counted by this process alone)
        (_FLOAT if key == "total" else _WORD).pack_into(self._map, offset, value)

    def _add(self, key: str) -> int | None:
        raw = key.encode()
        with self._lock:
            offset = self._offsets.get(key)
            if offset is not None:
                return offset
            size = _entry_size(raw)
            if not _KEY.fullmatch(key) or len(raw) > _MAX_KEY or self._used + size > SIZE:
                return None
            at = self._used
            _WORD.pack_into(self._map, at, len(raw))
            self._map[at + 8 : at + 8 + len(raw)] = raw
            offset = at + size - 8
            _WORD.pack_into(self._map, offset, 0)
            self._used += size
            _WORD.pack_into(self._map, len(MAGIC), self._used)  # the entry is complete
            self._offsets[key] = offset
            return offset


def read_counters(path: Path) -> dict[str, Any] | None:
    """A file's counters as `Metrics.snapshot` gives them, or None when it does not read
    as counters."""
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < _HEADER:
                return None
            with mmap.mmap(handle.fileno(), size, mmap.MAP_SHARED, mmap.PROT_READ) as mapped:
                return _parse(mapped, size)
    except (OSError, ValueError):
        return None


def _parse(mapped: mmap.mmap, size: int) -> dict[str, Any] | None:
    if mapped[: len(MAGIC)] != MAGIC:
        return None
    used = min(_WORD.unpack_from(mapped, len(MAGIC))[0], size)
    decisions: dict[str, int] = {}
    counts = [0] * (len(BUCKETS) + 1)
    rejected: list[list[Any]] = []
    webhooks: dict[str, int] = {}
    total = 0.0
    at = _HEADER
    while at + 16 <= used:
        length = _WORD.unpack_from(mapped, at)[0]
        if not 0 < length <= _MAX_KEY or at + _entry_size(b"x" * length) > used:
            return None
        key = bytes(mapped[at + 8 : at + 8 + length]).decode("ascii", "replace")
        offset = at + _entry_size(b"x" * length) - 8
        at = offset + 8
        if not _KEY.fullmatch(key):
            continue  # (not a key the service makes: left out)
        if key == "total":
            value = _FLOAT.unpack_from(mapped, offset)[0]
            if math.isfinite(value) and value >= 0:
                total = value
            continue
        count = _WORD.unpack_from(mapped, offset)[0]
        if count < 0:
            continue
        kind, _, name = key.partition(":")
        if kind == "decision":
            decisions[name] = count
        elif kind == "bucket" and int(name) < len(counts):
            counts[int(name)] = count
        elif kind == "rejected":
            status, _, code = name.partition(":")
            rejected.append([int(status), code, count])
        elif kind == "webhook":
            webhooks[name] = count
    return {
        "decisions": decisions, "counts": counts, "total": total, "rejected": rejected,
        "webhooks": webhooks,
    }  # fmt: skip


class SharedMetrics:
    """One worker's side: its counters stored into its file as they change, and the
    others' read from theirs."""

    def __init__(self, db: str, metrics: Metrics) -> None:
        self.directory = directory_for(db)
        self.directory.mkdir(mode=0o700, exist_ok=True)
        self.metrics = metrics
        self.name = f"{os.getpid()}-{time.time_ns()}.bin"  # a reused pid gets a new file
        self.file = CounterFile(self.directory / self.name)
        metrics.attach(self.file)

    def others(self) -> list[dict[str, Any]]:
        """The other workers' counters, as they are now."""
        found = []
        for path in sorted(self.directory.glob("*.bin")):
            if path.name != self.name:
                counters = read_counters(path)
                if counters is not None:
                    found.append(counters)
        return found

    def close(self) -> None:
        """Stop storing into the file (a worker shutting down); it stays, with its counts.
        (The mapping stays until the process exits: a thread may be storing into it.)"""
        self.metrics.attach(None)
