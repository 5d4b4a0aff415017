"""One HTTP/1.1 connection of `charter serve`, with bounds on what a client can make a
worker hold: uvicorn's httptools protocol, with back-pressure, timeouts and caps.

uvicorn's protocol feeds the parser everything a read brings and resumes reading after
every response (and whenever the running request reads its body), so a client that
pipelines requests without reading the answers has every one of them parsed and queued,
about 1 KB of memory a request, for as long as the connection lasts. Here:

- The parser is fed `FEED` bytes at a time (a body of known length at once), and no more once `max_pipeline` requests wait
  behind the running one or the answers already written wait unsent past the transport's
  high-water mark (64 KiB): the rest of that read is kept (one read, at most 256 KiB) and
  the transport stops reading, until the queue drains and the client takes its answers.
  A connection thus holds at most `max_pipeline` requests, plus what one slice of `FEED`
  bytes holds.
- A request's head (request line and headers) is at most `MAX_HEAD` bytes (431
  `headers-too-large`); its head must arrive within `header_timeout` seconds of its
  first byte, and its body within `body_timeout` of its head (408 `request-timeout`);
  a connection on which nothing moves for `idle_timeout` seconds (no byte of a next
  request, or answers the client does not take) is closed.
- A worker serves `max_connections` connections; a request on one more is answered 503
  `too-many-connections` and its connection closed.

The limits reach the workers of `--workers N` (spawned processes, which import this
module afresh) through the environment (`LIMITS_ENV`), as the other options of `charter
serve` do.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from dataclasses import dataclass, fields
from typing import Any

import httptools
from starlette.types import Receive, Scope, Send
from uvicorn._types import ASGI3Application
from uvicorn.config import Config
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)
from uvicorn.server import ServerState

from api.http.codes import HttpCode
from api.http.errors import problem

try:  # (the bytes a socket's kernel buffer holds unsent: POSIX)
    import fcntl
    import termios

    _TIOCOUTQ: int | None = termios.TIOCOUTQ
except (ImportError, AttributeError):  # pragma: no cover
    _TIOCOUTQ = None

LIMITS_ENV = "CHARTER_CONNECTION_LIMITS"
FEED = 1024  # bytes given the parser at a time: what a read past the bounds can add
MAX_HEAD = 64 * 1024  # a request's line and headers, together
LINGER = 2  # seconds a refused client's bytes are read and dropped, after its answer
# The request's scope key of the `asyncio.Event` a request that waits (a long poll, an
# event stream: api/http/approvalwatch.py) puts there: set when the server shuts down
# while it is answered, so it ends then rather than hold the worker's graceful shutdown.
CLOSING = "charter.closing"


@dataclass(frozen=True)
class Limits:
    """What one connection of a worker may hold, and for how long (seconds)."""

    idle_timeout: int = 5
    header_timeout: int = 10
    body_timeout: int = 30
    max_connections: int = 1000
    max_pipeline: int = 8

    def to_env(self) -> str:
        return ",".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))

    @classmethod
    def from_env(cls, text: str | None) -> Limits:
        """What `to_env` wrote (the defaults when there is nothing)."""
        if not text:
            return cls()
        values = dict(part.split("=", 1) for part in text.split(","))
        return cls(**{f.name: int(values[f.name]) for f in fields(cls) if f.name in values})


_limits: Limits | None = None


def process_limits() -> Limits:
    """This process's limits, read from the environment once."""
    global _limits
    if _limits is None:
        _limits = Limits.from_env(os.environ.get(LIMITS_ENV))
    return _limits


class HeldFlow(FlowControl):
    """uvicorn's flow control, but reading resumes only as the connection lets it (what
    it kept of a read is parsed first)."""

    def __init__(self, transport: asyncio.Transport, connection: GuardedHttpTools) -> None:
        super().__init__(transport)
        self._connection = connection

    def resume_reading(self) -> None:
        self._connection.release()


async def _too_many_connections(scope: Scope, receive: Receive, send: Send) -> None:
    response = problem(
        "too-many-connections",
        "this worker serves as many connections as it may; try again",
    )  # fmt: skip
    response.headers["Connection"] = "close"
    response.headers["Retry-After"] = "1"
    await response(scope, receive, send)


class GuardedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol, bounded as the module says."""

    LIMITS: Limits | None = None  # (None: this process's, from the environment)

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.limits = self.LIMITS or process_limits()
        self.limit_concurrency = None  # (the cap is `max_connections`, answered here)
        # A read not all parsed, kept while the connection is held, and where its rest
        # starts (an offset: a copy of the rest per request held would be up to 256 KiB).
        self._unparsed = b""
        self._unparsed_at = 0
        self._in_head = True  # the parser is between requests or in a request's head
        self._head_bytes = 0
        self._in_message = False  # a request has begun and is not all read
        self._body_left = 0  # what its `Content-Length` says is still to come of its body
        self._timer: asyncio.TimerHandle | None = None  # idle, or the request's head or body
        self._timing: Any = None  # what `_timer` calls
        self._stall: asyncio.TimerHandle | None = None  # answers the client does not take
        self._unsent = 0  # the bytes unsent when `_stall` was set
        self._running: RequestResponseCycle | None = None  # the request being answered
        self._lingering = False  # refused, and its answer written: what comes is dropped

    # ---- holding: no more reading while requests or answers wait ---------------------

    def holding(self) -> bool:
        return len(self.pipeline) >= self.limits.max_pipeline or self.flow.write_paused

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.flow = HeldFlow(transport, self)
        self._arm(self.limits.idle_timeout, self._idle)

    def data_received(self, data: bytes) -> None:
        if self._lingering:  # (refused: dropped)
            return
        if self._unparsed:  # (a read the transport had under way when it was paused)
            self._unparsed = self._unparsed[self._unparsed_at :] + data
            self._unparsed_at = 0
            self.flow.pause_reading()
            return
        self._feed(data, 0)

    def _feed(self, data: bytes, offset: int) -> None:
        view = memoryview(data)
        while offset < len(data):
            if self.holding():
                self._unparsed, self._unparsed_at = data, offset
                self.flow.pause_reading()
                self._disarm()  # (the client waits on the server now, not the reverse)
                return
            # A body of known length is fed whole: it cannot hold another request.
            size = FEED if self._in_head or self._body_left < FEED else self._body_left
            piece = view[offset : offset + size]
            offset += len(piece)
            if self._in_head:
                self._head_bytes += len(piece)
            self._parse(piece)
            if self.transport.is_closing():
                return
            if self._in_message:  # a request not all read: its head's or body's time runs
                self._arm_request()
            if self._in_head and self._head_bytes > MAX_HEAD + FEED:
                self._refuse_request(
                    "headers-too-large",
                    f"a request's line and headers are at most {MAX_HEAD // 1024} KiB",
                )  # fmt: skip
                return

    def _parse(self, data: memoryview) -> None:
        """uvicorn's `data_received` for one piece (an invalid request: its plain 400)."""
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            msg = "Invalid HTTP request received."
            self.logger.warning(msg)
            self.send_400_response(msg)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()

    def release(self) -> None:
        """The queue drained, the client took its answers, or the running request reads
        its body: parse what was kept, then read again, as far as the bounds let."""
        if self.transport.is_closing() or self.holding():
            return
        kept, at = self._unparsed, self._unparsed_at
        self._unparsed, self._unparsed_at = b"", 0
        if self._in_message and self._timer is None:  # its time counts afresh
            self._arm_request()
        if kept:
            self._feed(kept, at)
        if not self._unparsed and not self.transport.is_closing():
            FlowControl.resume_reading(self.flow)  # (the transport's, not HeldFlow's)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.timeout_keep_alive_task is not None:  # (uvicorn's keep-alive: ours instead)
            self.timeout_keep_alive_task.cancel()
            self.timeout_keep_alive_task = None
            if not self._in_message and not self._answering():  # (else their time runs)
                self._arm(self.limits.idle_timeout, self._idle)
        self.release()

    def pause_writing(self) -> None:
        super().pause_writing()
        self.flow.pause_reading()
        if self._stall is None:
            self._watch_unsent()

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None
        self.release()

    # ---- the parser's callbacks: the timers and the caps ------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_message = True
        self._disarm()  # (idle no more; its head's time is set once the piece is parsed)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        length = next((v for k, v in self.headers if k == b"content-length"), b"")
        self._body_left = int(length) if length.isdigit() else 0  # (checked by the parser)
        if len(self.connections) > self.limits.max_connections:
            app, self.app = self.app, _too_many_connections
            try:
                super().on_headers_complete()
            finally:
                self.app = app
        else:
            super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        self._body_left -= len(body)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._body_left = 0
        self._in_head = True
        self._in_message = False
        self._disarm()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        self._running = cycle
        super()._start_asgi_task(cycle, app)

    def shutdown(self) -> None:
        """The server shuts down: as uvicorn does (an idle connection is closed, one being
        answered is closed once its answer is done), and a request that waits is told to
        end its answer (`CLOSING`)."""
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            closing = cycle.scope.get(CLOSING)
            if isinstance(closing, asyncio.Event):
                closing.set()
        super().shutdown()

    def connection_lost(self, exc: Exception | None) -> None:
        running = self._running
        if running is not None and not running.response_complete:
            # uvicorn tells only the request it parsed last that the client went, and that
            # is not the running one when others wait behind it, which would write on.
            running.disconnected = True
            running.message_event.set()
        self._disarm()
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None
        super().connection_lost(exc)
        # What waits is dropped now: it is in reference cycles (a queued request's
        # callback is this protocol's), which only the collector's oldest generation frees.
        self.pipeline.clear()
        self._unparsed = b""

    # ---- timeouts -----------------------------------------------------------------

    def _arm(self, seconds: float, then: Any) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, then)
        self._timing = then

    def _arm_request(self) -> None:
        """The time the request being read has left, for its head or for its body, from
        when the parser first saw that part (a timer already set for it runs on). Set
        after each piece is parsed, not in the parser's callbacks: a request read whole
        in one piece costs no timer."""
        then = self._head_late if self._in_head else self._body_late
        if self._timer is None or self._timing != then:
            seconds = self.limits.header_timeout if self._in_head else self.limits.body_timeout
            self._arm(seconds, then)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timing = None

    def _answering(self) -> bool:
        return self._running is not None and not self._running.response_complete

    def _idle(self) -> None:
        self._timer = self._timing = None
        if not self.transport.is_closing() and not self._answering():
            self.transport.close()

    def _watch_unsent(self) -> None:
        self._unsent = self._unsent_bytes()
        self._stall = self.loop.call_later(self.limits.idle_timeout, self._stalled)

    def _unsent_bytes(self) -> int:
        """What the client has yet to take: the transport's buffer, and the kernel's
        for the socket (which the transport refills only once a third of it is free,
        so the transport's alone can stand still while a slow client reads)."""
        size = self.transport.get_write_buffer_size()
        sock = self.transport.get_extra_info("socket")
        if _TIOCOUTQ is not None and sock is not None:
            with contextlib.suppress(OSError, ValueError):
                queued = fcntl.ioctl(sock.fileno(), _TIOCOUTQ, b"\0\0\0\0")
                size += int.from_bytes(queued, sys.byteorder, signed=True)
        return size

    def _stalled(self) -> None:
        """The client took none of its answers for `idle_timeout`: dropped unsent. One
        that took some (a large answer to a slow reader) is watched for as long again."""
        self._stall = None
        if self._unsent_bytes() < self._unsent:
            self._watch_unsent()
        else:
            self.transport.abort()

    def _head_late(self) -> None:
        self._timer = self._timing = None
        self._refuse_request(
            "request-timeout",
            f"the request's headers did not arrive within {self.limits.header_timeout} s",
        )  # fmt: skip

    def _body_late(self) -> None:
        self._timer = self._timing = None
        cycle = self.cycle
        detail = f"the request's body did not arrive within {self.limits.body_timeout} s"
        if cycle is self._running and not cycle.response_started and not self.pipeline:
            cycle.disconnected = True  # the app reading it is told the client went
            cycle.message_event.set()
            self._answer("request-timeout", detail)
        else:  # answered already (without reading it all), or behind another request
            self.transport.close()

    def _refuse_request(self, code: HttpCode, detail: str) -> None:
        """The request being read is refused: answered with a problem, and the connection
        closed. When an answer to an earlier request is under way, closed only: an answer
        written now would be taken for that one's."""
        if self._answering() or self.pipeline:
            self.transport.close()
        else:
            self._answer(code, detail)

    def _answer(self, code: HttpCode, detail: str) -> None:
        """Write the problem and close this side; what the client goes on sending is read
        and dropped for `LINGER` seconds, until it closes its side: closed at once with
        its bytes unread, the connection was reset, and a client still sending (a head
        too large) could lose the answer."""
        if self.transport.is_closing():
            return
        self.transport.write(_problem_bytes(self.server_state, code, detail))
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()
        self._lingering = True
        self._unparsed = b""
        self.pipeline.clear()
        self.flow.read_paused = False
        self.transport.resume_reading()
        self._arm(LINGER, self.transport.close)


def _problem_bytes(state: ServerState, code: HttpCode, detail: str) -> bytes:
    response = problem(code, detail)
    head = [STATUS_LINE[response.status_code]]
    for name, value in [*state.default_headers, *response.raw_headers]:
        head += [name, b": ", value, b"\r\n"]
    return b"".join([*head, b"connection: close\r\n\r\n", response.body])
