"""Who gets the solver next: fit checks queued fairly across tokens, each run in a process
of its own that is killed at its deadline (engine.fit.isolated).

A serving process runs at most SLOTS checks at once, and one token (an agent's tokens
count as one: its id) at most PER_KEY of them, so a token sending check after check
leaves a slot to everyone else. A check that cannot start at once waits in its token's
queue; when a check ends, the next to start is taken from the tokens with one waiting in
turn (round-robin: the one whose last check started longest ago, or never), so a flood
from one token delays another's check by at most one running check. A check's deadline starts when its process does: time spent waiting is
never solving time, and a wait never turns into a `timeout` verdict. Waits are bounded
instead: a token with KEY_QUEUE checks waiting, or QUEUE waiting in all, or a wait past
MAX_WAIT_S, is refused with `solver-busy` and a retry delay (the request wrote
nothing; sent again later, it is checked then).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from api.service.errors import ServiceError
from api.service.tokens import Principal

if TYPE_CHECKING:  # (engine.fit is imported when a check runs: fitcheck._engine)
    from engine.fit.result import FitResult

SLOTS = 2  # checks running at once in one serving process (each a process on a core)
PER_KEY = 1  # of them for one token
QUEUE = 16  # checks waiting, all tokens together (each holds a request, some a thread)
KEY_QUEUE = 4  # checks waiting for one token
MAX_WAIT_S = 6.0  # the longest a check waits for a slot
RETRY_AFTER_S = 2  # what a `solver-busy` answer's `Retry-After` says
STAMPS = 4096  # tokens whose last check's start is remembered (Gate._started)


def busy(why: str) -> ServiceError:
    error = ServiceError(
        "solver-busy", f"the fit checker is busy: {why}; nothing was changed",
        help="send the same request again after the Retry-After delay",
    )  # fmt: skip
    error.retry_after = RETRY_AFTER_S
    return error


def key_of(actor: Principal) -> str:
    """Whose turn a check is: an agent's (all its tokens), else the token's."""
    return f"agent:{actor.agent}" if actor.agent is not None else f"token:{actor.token_id}"


def agent_key(agent_id: str) -> str:
    return f"agent:{agent_id}"


@dataclass(eq=False)
class Ticket:
    key: str
    notify: Callable[[], None]
    granted: bool = False


@dataclass
class Gate:
    slots: int = SLOTS
    per_key: int = PER_KEY
    queue: int = QUEUE
    key_queue: int = KEY_QUEUE
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _running: Counter[str] = field(default_factory=Counter)
    _waiting: dict[str, deque[Ticket]] = field(default_factory=dict)  # in arrival order
    # When each token last started a check (a tick of _clock), for the last STAMPS tokens:
    # one that waits for its answer before sending the next keeps its place behind the
    # others (forgotten, it would come back first every time). A token forgotten for
    # being the one that started longest ago would be first in turn anyway.
    _started: OrderedDict[str, int] = field(default_factory=OrderedDict)
    _clock: int = 0

    def enter(self, key: str, notify: Callable[[], None]) -> Ticket:
        """A ticket for `key`'s next check: granted at once (a slot is free and the token
        is under PER_KEY), else queued (`notify` is called when it is granted); a full
        queue is `solver-busy`."""
        ticket = Ticket(key, notify)
        with self._lock:
            if key not in self._waiting and self._may_start(key):
                self._grant(ticket)
                return ticket
            queued = self._waiting.get(key, ())
            if len(queued) >= self.key_queue:
                raise busy(f"{self.key_queue} checks of this token are waiting already")
            if sum(len(q) for q in self._waiting.values()) >= self.queue:
                raise busy(f"{self.queue} checks are waiting already")
            self._waiting.setdefault(key, deque()).append(ticket)
        return ticket

    def withdraw(self, ticket: Ticket) -> bool:
        """Take a waiting ticket out of its queue (True); False when it was granted
        meanwhile, and its holder must `leave`."""
        with self._lock:
            if ticket.granted:
                return False
            queued = self._waiting.get(ticket.key)
            if queued is not None and ticket in queued:
                queued.remove(ticket)
                if not queued:
                    del self._waiting[ticket.key]
            return True

    def leave(self, key: str) -> None:
        """A granted check of `key` ended: its slot goes to the next in turn."""
        with self._lock:
            self._running[key] -= 1
            if self._running[key] <= 0:
                del self._running[key]
            self._dispatch()

    def running(self) -> int:
        with self._lock:
            return sum(self._running.values())

    def _may_start(self, key: str) -> bool:
        return sum(self._running.values()) < self.slots and self._running[key] < self.per_key

    def _grant(self, ticket: Ticket) -> None:
        ticket.granted = True
        self._running[ticket.key] += 1
        self._clock += 1
        self._started[ticket.key] = self._clock
        self._started.move_to_end(ticket.key)
        if len(self._started) > STAMPS:
            self._started.popitem(last=False)

    def _dispatch(self) -> None:
        # Of the tokens with a check waiting that may start one, the one that started a
        # check longest ago (or never) takes the free slot; ties in arrival order.
        while sum(self._running.values()) < self.slots:
            ready = [k for k in self._waiting if self._running[k] < self.per_key]
            if not ready:
                return
            key = min(ready, key=lambda k: self._started.get(k, 0))
            queued = self._waiting[key]
            ticket = queued.popleft()
            if not queued:
                del self._waiting[key]
            self._grant(ticket)
            ticket.notify()


GATE = Gate()
# The threads `check_async`'s processes are waited for on: one a slot, so no check that
# holds a slot waits for a thread.
_WAITERS = ThreadPoolExecutor(SLOTS, thread_name_prefix="charter-solver-wait")


def _isolated() -> Any:
    from engine.fit import isolated  # (engine.fit may be missing: fitcheck answers for it)

    return isolated


def check(
    key: str, fn: Callable[..., FitResult], *args: Any, timeout_ms: int, **kwargs: Any
) -> FitResult:
    """`fn(*args, timeout_ms=..., **kwargs)`, a fit check, run in its turn for `key` in a
    process of its own (this thread waits)."""
    granted = threading.Event()
    ticket = GATE.enter(key, granted.set)
    if not ticket.granted and not granted.wait(MAX_WAIT_S) and GATE.withdraw(ticket):
        raise busy(f"no check could start within {MAX_WAIT_S:g} s")
    try:
        result: FitResult = _isolated().run(fn, *args, timeout_ms=timeout_ms, **kwargs)
        return result
    finally:
        GATE.leave(key)


async def check_async(
    key: str, fn: Callable[..., FitResult], *args: Any, timeout_ms: int, **kwargs: Any
) -> FitResult:
    """As `check`, awaited: waiting for its turn holds no thread."""
    isolated = _isolated()
    result: FitResult = await _in_turn(
        key, lambda: isolated.run(fn, *args, timeout_ms=timeout_ms, **kwargs)
    )
    return result


async def call_async(
    key: str, fn: Callable[..., Any], *args: Any, timeout_ms: int, **kwargs: Any
) -> tuple[str, Any]:
    """As `check_async`, for any `fn` (a draft's lints): what engine.fit.isolated.call
    answers, `("ok", what fn returned)` or why not (`timeout`, `memory`, `died`)."""
    isolated = _isolated()
    answer: tuple[str, Any] = await _in_turn(
        key, lambda: isolated.call(fn, *args, timeout_ms=timeout_ms, **kwargs)
    )
    return answer


async def _in_turn(key: str, run: Callable[[], Any]) -> Any:
    """`run()` on a waiter's thread once `key` has its turn (waiting holds no thread)."""
    loop = asyncio.get_running_loop()
    turn: asyncio.Future[None] = loop.create_future()

    def started() -> None:
        if not turn.done():
            turn.set_result(None)

    def wake() -> None:  # (called by the thread whose check ended, under the gate's lock)
        with contextlib.suppress(RuntimeError):  # (the loop closed: the server stopped)
            loop.call_soon_threadsafe(started)

    ticket = GATE.enter(key, wake)
    if not ticket.granted:
        try:
            await asyncio.wait_for(asyncio.shield(turn), MAX_WAIT_S)
        except TimeoutError:
            if GATE.withdraw(ticket):
                raise busy(f"no check could start within {MAX_WAIT_S:g} s") from None
        except BaseException:  # (the client went away: its place, or its slot, goes on)
            if not GATE.withdraw(ticket):
                GATE.leave(key)
            raise

    def work() -> Any:
        try:
            return run()
        finally:  # (here, not in the request: a request cancelled meanwhile still ends)
            GATE.leave(key)

    return await loop.run_in_executor(_WAITERS, work)
