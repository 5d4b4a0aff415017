"""Compiled snapshots per revision, compiled once and kept while in use.

A revision's files are checked and compiled on first use; the latest few and any a turn
still pins stay cached. Another process's policy upload is noticed through the store's
`changed()` (PRAGMA data_version), so a worker never decides on a stale "latest".
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from api.service.errors import ServiceError, no_policy
from engine.check import check_sources
from engine.compile import Snapshot, compile_workspace
from policy.store import Store

CACHE_SIZE = 8


class Snapshots:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._cache: OrderedDict[int, Snapshot] = OrderedDict()
        self._lock = threading.Lock()
        self.latest = store.latest_revision()

    def refresh(self, latest: int | None = None) -> int:
        """The latest revision, read from the store (or as the caller just read it)."""
        self.latest = self.store.latest_revision() if latest is None else latest
        return self.latest

    def get(self, revision: int) -> Snapshot:
        with self._lock:
            snapshot = self._cache.get(revision)
            if snapshot is not None:
                self._cache.move_to_end(revision)
                return snapshot
        body = self.store.get_revision(revision)
        if body is None:
            raise ServiceError(404, "revision-not-found", f"revision {revision} not found")
        files = [(str(path), str(text)) for path, text in body["files"]]
        snapshot = compile_workspace(check_sources(files), revision)
        self.put(snapshot)
        return snapshot

    def put(self, snapshot: Snapshot) -> None:
        with self._lock:
            self._cache[snapshot.revision] = snapshot
            self._cache.move_to_end(snapshot.revision)
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)

    def current(self) -> Snapshot:
        if self.latest == 0:
            raise no_policy()
        return self.get(self.latest)
