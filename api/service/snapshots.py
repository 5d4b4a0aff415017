"""Compiled snapshots per revision, compiled once and kept while in use.

A revision's files are checked and compiled on first use; the latest few and any a turn
still pins stay cached. Another process's policy upload is noticed through the store's
`data_version()` (PRAGMA data_version), so a worker never decides on a stale "latest".

Compiling takes a while (about a second at 10,000 roles), so code on the event loop asks
with `compile=False` and compiles what is missing on a worker thread (api.service.groupcommit);
one compile per revision, the others wait for it. `/readyz` and a serving process's start
ask for the latest in the background (`compile_in_background`), so a worker is ready to
decide before a load balancer sends it traffic.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable

from api.service import memory
from api.service.errors import ServiceError, no_policy
from engine.check import check_sources
from engine.compile import Snapshot, compile_workspace
from engine.served import load_served
from engine.workspace import Workspace
from policy.diagnostics import CharterError
from policy.store import Store

CACHE_SIZE = 8


class NotCompiled(Exception):
    """A revision asked for with `compile=False` that this process has not compiled."""

    def __init__(self, revision: int) -> None:
        super().__init__(f"revision {revision} is not compiled here yet")
        self.revision = revision


def _does_not_check(revision: int) -> ServiceError:
    """A stored revision checked when it was uploaded: this version of charter reads it
    otherwise (a rule added since). An internal error before."""
    return ServiceError(
        "revision-does-not-check",
        f"revision {revision} does not check with this version of charter",
        help="upload the policy again with its errors mended (`charter check` lists them); "
        "a turn pinned to an older revision: admit a new one",
    )  # fmt: skip


def served_snapshot(
    files: list[tuple[str, str]], revision: int, base: Snapshot | None = None
) -> Snapshot | None:
    """Stored revision `revision` (its `files`) compiled from what deciding reads of it,
    its whole workspace checked when first asked for; None when it cannot be taken so
    (engine/served.py): the caller checks it whole. `base`: a partial snapshot of the
    revision it changes, whose unchanged files and compiled profiles it keeps."""
    served = load_served(files, base=None if base is None else base.served)
    if served is None:
        return None

    def whole() -> Workspace:
        try:
            return check_sources(files)
        except CharterError:  # (a part no decision reads does not check with this charter)
            raise _does_not_check(revision) from None

    return Snapshot(served, revision, base, whole=whole)


class Snapshots:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._cache: OrderedDict[int, Snapshot] = OrderedDict()
        self._lock = threading.Lock()
        self._compiling = threading.Lock()  # one compile at a time: no revision twice
        # Revisions that do not check with this charter: a stored revision never changes,
        # so it is not checked again (a second or so at 10,000 roles) for every request.
        self._unreadable: set[int] = set()
        # Revisions being compiled by `compile_in_background`: one thread per revision,
        # however many readiness probes ask while it runs.
        self._background: set[int] = set()
        # Called on that thread, with the revision, as each such compile begins.
        self.on_background_compile: list[Callable[[int], None]] = []
        self.latest = store.latest_revision()

    def cached(self, revision: int) -> Snapshot | None:
        """Revision `revision`'s snapshot when it is compiled here, else None."""
        with self._lock:
            return self._cache.get(revision)

    def newest(self) -> Snapshot | None:
        """The compiled snapshot a change is likeliest to be made against: the latest
        revision's when it is compiled here, else the one used last; None before any."""
        with self._lock:
            found = self._cache.get(self.latest)
            if found is None and self._cache:
                found = next(reversed(self._cache.values()))
        return found

    def refresh(self, latest: int | None = None) -> int:
        """The latest revision, read from the store (or as the caller just read it)."""
        self.latest = self.store.latest_revision() if latest is None else latest
        return self.latest

    def get(self, revision: int, compile: bool = True) -> Snapshot:
        """Revision `revision` compiled (`revision-not-found` if there is none); with `compile` False,
        NotCompiled unless it is already."""
        with self._lock:
            snapshot = self._cache.get(revision)
            if snapshot is not None:
                self._cache.move_to_end(revision)
                return snapshot
        if revision in self._unreadable:
            raise _does_not_check(revision)
        if not compile:
            raise NotCompiled(revision)
        # Read before the compile lock, never under it: a thread inside a write transaction
        # holds the store's lock and may wait here for the compile lock, so its holder
        # waiting on the store's lock (to read the files) deadlocked the two, and with
        # them every request of the process.
        body = self.store.get_revision(revision)
        if body is None:
            raise ServiceError("revision-not-found", f"revision {revision} not found")
        files = [(str(path), str(text)) for path, text in body["files"]]
        with self._compiling:
            with self._lock:  # (compiled by whoever held the compile lock before)
                snapshot = self._cache.get(revision)
            if snapshot is not None:
                return snapshot
            # Against the newest compiled here when it is whole: another worker's upload
            # of a change to a few files compiles those files and what depends on them.
            # Else what deciding needs, no more (engine/served.py): a worker starting on
            # a large policy, or following others' uploads, parses a fraction of it.
            base = self.newest()
            whole = None if base is None else base.whole_loaded()
            try:
                found = None if whole is not None else served_snapshot(files, revision, base)
                if found is None:
                    found = compile_workspace(check_sources(files, base=whole), revision, base)
                snapshot = found
            except CharterError:
                self._unreadable.add(revision)
                raise _does_not_check(revision) from None
            self.put(snapshot)
        return snapshot

    def compile_in_background(self, revision: int) -> bool:
        """Start compiling `revision` on a thread of its own, unless it is compiled, known
        not to check, or compiling there already; whether one was started. Returns at
        once: a caller on the event loop never waits for the compile."""
        with self._lock:
            if revision in self._cache or revision in self._unreadable:
                return False
            if revision in self._background:
                return False
            self._background.add(revision)
        thread = threading.Thread(
            target=self._compile_quietly, args=(revision,), daemon=True,
            name=f"charter-compile-{revision}",
        )  # fmt: skip
        try:
            thread.start()
        except BaseException:
            self._done_in_background(revision)
            raise
        return True

    def _compile_quietly(self, revision: int) -> None:
        try:
            for hook in self.on_background_compile:
                hook(revision)
            # A revision that does not check is remembered (`_unreadable`) and `/readyz`
            # says so; a store that failed is tried again by the next probe.
            with contextlib.suppress(Exception):
                self.get(revision)
        finally:
            self._done_in_background(revision)

    def _done_in_background(self, revision: int) -> None:
        with self._lock:
            self._background.discard(revision)

    def put(self, snapshot: Snapshot) -> None:
        dropped: list[Snapshot] = []
        with self._lock:
            self._cache[snapshot.revision] = snapshot
            self._cache.move_to_end(snapshot.revision)
            while len(self._cache) > CACHE_SIZE:
                dropped.append(self._cache.popitem(last=False)[1])
        if dropped:
            # Freed here, outside the lock, when nothing else holds them (a request on an
            # old revision frees its snapshot when it ends), and their pages handed back.
            del dropped
            memory.release_freed()

    def current(self, compile: bool = True) -> Snapshot:
        if self.latest == 0:
            raise no_policy()
        return self.get(self.latest, compile)
