"""The approval watch: one per app, it notices approvals opened and decided, by this
process or another (`--workers N`, other nodes on PostgreSQL), and wakes the requests
that wait for them (a long poll of one approval, the approvals' event stream).

While anyone waits, a task of the event loop waits on the app's version watch
(api/http/versionwatch.py: the store's cheap data version, SQLite's `data_version`,
PostgreSQL's change feed, read every 0.1 s for everything that waits) and, when it
moved, reads the change feed after the version last read (api/service/approvalfeed.py)
on a worker thread. A commit of this process that opened or decided one
(`ReadModel.note_approval`, whose own commits the data version does not show) wakes it
at once. A waiting request holds no thread, no transaction and nothing of the event
loop: it awaits an `asyncio.Event`, and reads the store again, on a worker thread, when
it is woken.

Its first look after it starts wakes everyone: a request registers, then reads what it
waits on; a change committed between that read and the version the watch starts from
would otherwise go unseen until the request's wait ended.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.concurrency import run_in_threadpool
from starlette.types import Scope

from api.http.connection import CLOSING
from api.http.versionwatch import POLL, VersionWatch
from api.service.approvalfeed import changed_after
from api.service.core import Service


class ApprovalWatch:
    def __init__(self, service: Service, versions: VersionWatch) -> None:
        self._service = service
        self._versions = versions
        # Who waits: their event -> the approval id it waits on (None: any approval).
        self._waiters: dict[asyncio.Event, str | None] = {}
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kick: asyncio.Event | None = None
        self._seen: int | None = None  # the change feed's version last read
        service.read.on_approvals.append(self.poke)

    def poke(self) -> None:
        """From any thread, after a commit of this process that opened or decided an
        approval: the watch looks at once."""
        loop, kick = self._loop, self._kick
        if loop is None or kick is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # (a loop closing meanwhile)
            loop.call_soon_threadsafe(kick.set)

    @contextlib.asynccontextmanager
    async def watching(self, approval_id: str | None = None) -> AsyncIterator[asyncio.Event]:
        """An event set whenever approval `approval_id` (None: any approval) may have been
        opened or decided, while inside; whoever waits on it clears it."""
        woken = asyncio.Event()
        self._waiters[woken] = approval_id
        self._start()
        try:
            yield woken
        finally:
            del self._waiters[woken]

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        if self._task is not None and not self._task.done() and self._loop is loop:
            return
        self._loop = loop
        self._kick = asyncio.Event()
        self._seen = None  # (its first look wakes everyone: see the module's docstring)
        self._task = loop.create_task(self._run(self._kick))

    async def _run(self, kick: asyncio.Event) -> None:
        # (the version watch's first look sets `moved`: this one's first look is at once)
        async with self._versions.watching() as moved:
            while self._waiters:
                if not (kick.is_set() or moved.is_set()):
                    await wait_any(kick, moved, timeout=POLL)  # (then: anyone left?)
                    if not (kick.is_set() or moved.is_set()):
                        continue
                kick.clear()
                moved.clear()
                try:
                    changed = await run_in_threadpool(self._look)
                except Exception:  # (a store unavailable a moment: the next look tries again)
                    changed = None
                if changed is None or changed:
                    for woken, waits_on in list(self._waiters.items()):
                        if changed is None or waits_on is None or waits_on in changed:
                            woken.set()

    def _look(self) -> frozenset[str] | None:
        """The ids of the approvals opened or decided since the last look (None: any may
        have been, or this is the first look)."""
        first = self._seen is None
        self._seen, changed = changed_after(self._service, self._seen)
        return None if first else changed


def closing(scope: Scope) -> asyncio.Event:
    """An event set when the server shuts down while this request is answered (its
    connection, api/http/connection.py, sets it): a request that waits ends then, so a
    worker's graceful shutdown does not wait for it."""
    found = scope.get(CLOSING)
    if not isinstance(found, asyncio.Event):
        found = scope[CLOSING] = asyncio.Event()
    return found


async def wait_any(*events: asyncio.Event, timeout: float) -> None:
    """Until one of `events` is set, or `timeout` seconds passed."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
