"""`POST /v1/threads/{id}/wait`: a long poll of one thread, the built-in tool
`threads.wait`. It answers the thread once its status is other than `running`, or as it
is when `timeout` seconds passed (or the server shuts down).

The request is decided (an agent's token) and reads the thread as `threads.get` does;
only then does it wait, holding no thread, no transaction and nothing of the event loop:
it awaits an `asyncio.Event` set after a commit of this process that changed or deleted
the thread (`ReadModel.note_thread`), and reads the thread again, on a worker thread,
when it is woken, when the app's version watch saw another process commit
(api/http/versionwatch.py: one read of the store's data version every 0.1 s for all the
waiters), and at least every `RECHECK` seconds (another process's change on PostgreSQL,
whose data version shows a document's change only through the change feed). It joins
the wake-ups before it reads again, so a change committed after the first read is seen.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from api import commands as c
from api.http.approvalwatch import closing, wait_any
from api.http.auth import require_manager
from api.http.body import body, checked
from api.http.parts import parts_of, service_of
from api.http.routing import json_response, path_ids
from api.records import Thread
from api.service.core import Service
from api.service.manage import manage
from api.service.ops import Outcome

RECHECK = 1.0  # seconds between reads of a waited thread when nothing woke the wait


@contextlib.contextmanager
def _woken_by(service: Service, thread_id: str) -> Iterator[asyncio.Event]:
    """An event set, from any thread, after a commit of this process changed or deleted
    thread `thread_id`, while inside."""
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()

    def told(changed: str) -> None:
        if changed == thread_id and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # (a loop closing meanwhile)
                loop.call_soon_threadsafe(woken.set)

    service.read.on_threads.append(told)
    try:
        yield woken
    finally:
        service.read.on_threads.remove(told)


async def _ended(request: Request, service: Service, thread_id: str, seconds: int) -> Thread:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    stop = closing(request.scope)
    with _woken_by(service, thread_id) as woken:
        async with parts_of(request).versions.watching() as moved:
            thread: Thread | None = None
            last_read = loop.time()
            while True:
                if (
                    thread is None
                    or woken.is_set()
                    or moved.is_set()
                    or (loop.time() - last_read >= RECHECK)
                ):
                    woken.clear()
                    moved.clear()
                    last_read = loop.time()
                    thread = await run_in_threadpool(service.record, Thread, "thread", thread_id)
                    if thread.status != "running":
                        return thread
                left = deadline - loop.time()
                if left <= 0 or stop.is_set():
                    return thread
                recheck = RECHECK - (loop.time() - last_read)
                await wait_any(woken, moved, stop, timeout=max(0.0, min(left, recheck)))


async def wait_thread(request: Request) -> Response:
    actor = require_manager(request)
    path = path_ids(request)
    fields = (await body(request, c.ThreadWait)).model_dump(exclude_unset=True)
    command = checked(c.WaitThread, {**fields, **path})
    service = service_of(request)
    result = await run_in_threadpool(manage, service, actor, command, None)
    found = result.body
    if result.outcome is Outcome.PENDING or not isinstance(found, Thread):
        return json_response(found, 202 if result.outcome is Outcome.PENDING else 200)
    if found.status == "running" and command.timeout > 0:
        # (its id as allowed: a rewrite may have the wait read another thread)
        found = await _ended(request, service, found.id, command.timeout)
    return json_response(found, 200)
