"""The version watch: one per app, it notices commits of other processes (`--workers N`,
other nodes) for whatever waits on what they may change: a long poll of a thread
(api/http/threadwait.py), and the approval watch (api/http/approvalwatch.py), which then
reads the change feed.

While anyone waits, one task of the event loop reads the store's data version every
`POLL` seconds on a worker thread, and wakes every waiter when it moved: a read of the
version for the whole process, however many wait, where a waiter of its own read it
every `POLL` seconds (300 idle waiters of a thread took about a third of a core). A
waiter's first look comes after it joined and wakes it whatever the version did: it
reads what it waits on after joining, and a commit between that read and the version
the look starts from would go unseen otherwise (its next read comes after the look, and
any commit after the look moves the version the next look reads).

The data version counts what SQLite's other connections committed and, on PostgreSQL,
the change feed's moves (revisions and named values, not every document's change): a
waiter still reads again on its own now and then (`RECHECK` in threadwait), and on its
own process's commits (`ReadModel.note_thread`) at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.concurrency import run_in_threadpool

from api.service.core import Service

POLL = 0.1  # seconds between looks at the store's data version while anyone waits


class VersionWatch:
    def __init__(self, service: Service) -> None:
        self._service = service
        self._waiters: set[asyncio.Event] = set()
        self._joined: set[asyncio.Event] = set()  # whose first look is still to come
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[asyncio.Event]:
        """An event set whenever another process may have committed, while inside;
        whoever waits on it clears it."""
        woken = asyncio.Event()
        self._waiters.add(woken)
        self._joined.add(woken)
        self._start()
        try:
            yield woken
        finally:
            self._waiters.discard(woken)
            self._joined.discard(woken)

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        if self._task is not None and not self._task.done() and self._loop is loop:
            return
        self._loop = loop
        self._task = loop.create_task(self._run())

    async def _run(self) -> None:
        seen: int | None = None
        while self._waiters:
            joined, self._joined = self._joined, set()
            try:
                version: int | None = await run_in_threadpool(self._service.store.data_version)
            except Exception:  # (a store unavailable a moment: everyone reads for itself)
                version = None
            moved = version is None or version != seen
            seen = version
            for woken in list(self._waiters) if moved else joined:
                woken.set()
            await asyncio.sleep(POLL)
