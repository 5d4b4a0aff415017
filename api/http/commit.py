"""Group commit: decision requests that arrive together share one write transaction.

A decision request is parsed and authorized in its handler, then queued; the first one
queued schedules a flush for the event loop's next turn, so every request that became
ready in the meantime (the loop reads all readable connections before it runs their
handlers) joins it. The flush resolves each request on its own (an unknown agent fails
that request only, and nothing of it is written), then decides step 6 and logs all of
them in ONE transaction: one BEGIN IMMEDIATE, one sequence read, one INSERT of all rows,
one COMMIT. Only then is each request answered, so no response is sent before its
decisions are committed, and the sequence stays gap-free (assigned inside the
transaction). A batch request is one entry: its calls stay all or nothing.

A lone request pays one extra turn of the loop; under load, N concurrent requests pay for
one commit instead of N.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from api.service.core import Service
from api.service.decide import Call, Prepared, prepare, write
from engine.compile import Snapshot

Waiting = tuple[Sequence[Call], "asyncio.Future[list[dict[str, Any]]]"]


class GroupCommit:
    def __init__(self, service: Service) -> None:
        self.service = service
        # One queue per event loop (the in-process test client runs its own loop).
        self._queues: dict[asyncio.AbstractEventLoop, list[Waiting]] = {}

    async def decide(self, calls: Sequence[Call]) -> list[dict[str, Any]]:
        """Decide and log `calls` (one request: all or nothing); their response documents."""
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = []
        future: asyncio.Future[list[dict[str, Any]]] = loop.create_future()
        queue.append((calls, future))
        if len(queue) == 1:
            loop.call_soon(self._flush, loop)
        return await future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        waiting = self._queues.pop(loop, [])
        service = self.service
        ready: list[tuple[int, int, asyncio.Future[list[dict[str, Any]]]]] = []
        prepared: list[Prepared] = []
        try:
            service.sync()
            snapshots: dict[int, Snapshot] = {}
            for calls, future in waiting:
                if future.done():  # cancelled: the client is gone, nothing is logged
                    continue
                try:
                    mine = prepare(service, calls, snapshots)
                except Exception as exc:  # a 404, a 409: this request only
                    future.set_exception(exc)
                    continue
                ready.append((len(prepared), len(prepared) + len(mine), future))
                prepared.extend(mine)
            if not ready:
                return
            with service.store.atomic():
                responses, _ = write(service, prepared)
        except Exception as exc:  # the store failed: every request still waiting gets it
            for _, future in waiting:
                if not future.done():
                    future.set_exception(exc)
            return
        for start, end, future in ready:
            if not future.done():
                future.set_result(responses[start:end])
