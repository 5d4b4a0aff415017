"""Group commit: decision requests that arrive together share one write transaction.

A decision request is parsed and authorized by its front end (the HTTP handler), then
handed here: the core's decision pipeline, which no front end runs itself. The first
one (the leader) yields for one turn of the event loop, so every request that became
ready meanwhile (the loop reads all readable connections before it runs their handlers)
joins its group, and for a few more turns while the group keeps growing; then the leader
resolves each request of the group on its own (an unknown agent fails that request
only, and nothing of it is written), decides step 6
and logs all of them in ONE transaction: one BEGIN IMMEDIATE, one look at what other
processes committed (PRAGMA data_version, inside the transaction), one INSERT of all rows
(numbered max + 1 on), one COMMIT. Only then is any of them answered, so no response is
sent before its decisions are committed, and the sequence stays gap-free (assigned
inside the transaction). A batch request is one member: its calls stay all or nothing.
A group takes newcomers up to MAX_GROUP_CALLS calls (MAX_WAITING_GROUP_CALLS on a store
whose commits wait on a server); past that a request leads the next.

A lone request commits at once (asyncio's loop tells whether anything else is ready to
run; under uvloop, which does not, the leader stops waiting after a run of lone turns and
probes now and then); under load, N concurrent requests pay for one commit instead of N.

On a store whose commits wait on a server (`Store.waits`: PostgreSQL), a group of at least
MAX_GROUP_CALLS calls sends its COMMIT and reads the answer later (`Store.defer_commit`):
the loop reads and decides the next requests while the server syncs its log, and the
group is answered once the answer is read (`_settled`); a group formed meanwhile stays
open until then. Smaller groups commit as on SQLite: for them the deferral cost more
than it hid (measured at 16 clients of single decisions).

A revision another process uploaded is compiled here on a worker thread before the group
that first needs it is decided (`_compile_then_commit`), not on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Collection, Sequence
from functools import partial
from typing import Any

from api.service.calls import Call, Prepared
from api.service.core import Service, one_moment
from api.service.decide import prepare
from api.service.decisionlog import Draft, draft, write
from api.service.errors import invalid_token
from api.service.snapshots import NotCompiled
from api.service.tokens import TokenCache
from engine.compile import Snapshot
from policy.store.deferred import Deferred

Answer = list[dict[str, Any]]


# A group closes to newcomers at this many calls (a later request leads the next group),
# and a request this big does not wait for company: it fills a transaction by itself.
# Measured: batches of 100 grouped 5 to a transaction went 15% slower at 64 clients
# than batches committed alone (each waited a turn of a busy loop for the others).
MAX_GROUP_CALLS = 100
# The same on a store whose commits wait on a server (`Store.waits`: PostgreSQL's round
# trips and its COMMIT's fsync, ~1 ms, where the loop sits idle): a group's cost is
# mostly that wait, so batches of 100 are grouped too, up to this many calls.
MAX_WAITING_GROUP_CALLS = 1000
# How long a group whose COMMIT was sent waits for its socket before it reads the answer
# anyway (`_settled`).
SETTLE_AFTER = 0.05
# A leader joined by others waits another turn while the last one brought newcomers, up to
# this many turns: under uvloop a single turn gathered a third of 16 busy clients; waiting
# while the group grew took single-call throughput at 16 clients from 14,600 to 18,300/s.
MAX_TURNS = 4
# Under uvloop (which does not say what is ready to run) a leader waits while waiting
# pays; after LONE_TURNS lone turns in a row it waits only on probes, PROBE_GAP requests
# apart at first, the gap doubling after each probe nobody joined, up to MAX_PROBE_GAP.
# Measured at 1 client over HTTP: a probe cost its request ~45 µs (a turn of the loop,
# then a commit on cold caches), ~2.8 µs a request at one probe in 16; one in 256 costs
# ~0.2 µs. When load comes back, at most MAX_PROBE_GAP requests commit alone (~4 ms of
# lone commits) before a probe finds company and grouping resumes.
LONE_TURNS = 8
PROBE_GAP = 16
MAX_PROBE_GAP = 256
# Compiles on a worker thread before a group gives up and compiles on the event loop
# (when each finds yet another upload by the time it is done).
MAX_COMPILES = 3


class _Member:
    __slots__ = ("calls", "error", "future", "generation", "result", "token")

    def __init__(
        self,
        calls: Sequence[Call],
        future: asyncio.Future[Answer] | None,
        token: str | None,
        generation: int,
    ) -> None:
        self.calls = calls
        self.future = future  # None for the leader, which reads result / error itself
        self.token = token  # the bearer token it was authorized by, checked again if stale
        # The token cache's generation (GroupCommit.generation) when the token was
        # looked up: another one at commit time, and the token is looked up again.
        self.generation = generation
        self.result: Answer | None = None
        self.error: BaseException | None = None

    def fail(self, error: BaseException) -> None:
        if self.future is None:
            self.error = self.error or error
        elif not self.future.done():
            self.future.set_exception(error)

    def answer(self, result: Answer) -> None:
        if self.future is None:
            self.result = result
        elif not self.future.done():
            self.future.set_result(result)


class _Group:
    __slots__ = ("calls", "members")

    def __init__(self, leader: _Member) -> None:
        self.members = [leader]
        self.calls = len(leader.calls)


_Outcome = list[tuple[_Member, "list[Prepared] | Exception"]]
_Answering = Callable[[], None]
# A group whose COMMIT was sent: its answer to wait for, its members, their answering.
_Later = tuple[Deferred, list[_Member], _Answering]


class GroupCommit:
    def __init__(self, service: Service, tokens: TokenCache | None = None) -> None:
        self.service = service
        self.tokens = tokens
        # Moves each time tokens are dropped from the token cache (another process
        # revoked some and a `service.sync()` saw it, or one was revoked here): a request
        # authorized on the cache before that is checked again before it is logged,
        # whichever group's sync saw the move. Registered after the cache's own `forget`
        # (create_app), so a look-up on the old cache always carries the old number.
        self.generation = 0
        if tokens is not None:
            service.read.on_tokens.append(self._moved)
        # The group being collected, per event loop (the in-process test client runs its
        # own loop in another thread).
        self._groups: dict[asyncio.AbstractEventLoop, _Group] = {}
        # The running loop per thread: asyncio.get_running_loop() makes a getpid()
        # system call each time (Python 3.11), once per request otherwise. A thread runs
        # one loop at a time, so a cached loop that is running is the caller's.
        self._loops: dict[int, asyncio.AbstractEventLoop] = {}
        # The calls a group takes at most, and whether its COMMIT's answer is waited for
        # on the loop, which meanwhile reads and decides the next requests (policy/store
        # Store.waits, Store.defer_commit).
        self.max_calls = MAX_WAITING_GROUP_CALLS if service.store.waits else MAX_GROUP_CALLS
        self._defers = service.store.waits
        # Per loop and socket, the COMMIT whose answer the loop waits to read there; per
        # loop, the last group sent, answered when its COMMIT's answer is read.
        self._readers: dict[tuple[asyncio.AbstractEventLoop, int], Deferred] = {}
        self._inflight: dict[asyncio.AbstractEventLoop, asyncio.Future[None]] = {}
        self._alone = 0  # leaders in a row that waited a turn and were joined by nobody
        self._skipped = 0  # requests since the last probe
        self._gap = PROBE_GAP

    def _worth_waiting(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether a leader should wait a turn of the loop for others to join."""
        ready = getattr(loop, "_ready", None)
        if ready is not None:  # asyncio's own loop: what is ready to run is known
            return bool(ready)
        # uvloop does not say: wait while waiting pays, then only on probes (LONE_TURNS).
        if self._alone < LONE_TURNS:
            return True
        self._skipped += 1
        if self._skipped < self._gap:
            return False
        self._skipped = 0
        return True

    def _waited(self, joined: bool) -> None:
        """After a leader waited: a group resets the probes, a lone probe spaces them."""
        if joined:
            self._alone, self._gap = 0, PROBE_GAP
            return
        self._alone += 1
        if self._alone > LONE_TURNS:
            self._gap = min(2 * self._gap, MAX_PROBE_GAP)

    def _moved(self, token_ids: Collection[str] | None) -> None:
        self.generation += 1

    async def decide(
        self, calls: Sequence[Call], token: str | None = None, generation: int | None = None
    ) -> Answer:
        """Decide and log `calls` (one request: all or nothing); their response documents.
        `token`: the bearer token the request was authorized by on the token cache as it
        was, at `generation` (self.generation read before the look-up; default: now);
        if the cache was dropped since (a token revoked here or in another process), the
        request is refused with a 401 unless the token is still there."""
        if generation is None:
            generation = self.generation
        loop = self._loops.get(threading.get_ident())
        if loop is None or not loop.is_running():
            loop = self._loops[threading.get_ident()] = asyncio.get_running_loop()
        group = self._groups.get(loop)
        if group is not None and group.calls + len(calls) <= self.max_calls:
            future: asyncio.Future[Answer] = loop.create_future()  # join the open group
            group.members.append(_Member(calls, future, token, generation))
            group.calls += len(calls)
            return await future
        leader = _Member(calls, None, token, generation)
        flight = self._inflight.get(loop)  # (a group committing: waiting pays, see below)
        busy = flight is not None and not flight.done()
        if len(calls) >= self.max_calls or not (busy or self._worth_waiting(loop)):
            members = [leader]  # no turn to wait: nobody could join, no group to open
        else:
            group = self._groups[loop] = _Group(leader)  # (a full one stays with its leader)
            try:
                await asyncio.sleep(0)  # one turn of the loop: whoever is ready joins
                turns, size = 1, len(group.members)
                while size > 1 and turns < MAX_TURNS and group.calls < self.max_calls:
                    await asyncio.sleep(0)  # more came last turn: more may come this one
                    turns += 1
                    if len(group.members) == size:
                        break
                    size = len(group.members)
                # While the group before is committing, this one stays open: its BEGIN
                # would wait for that COMMIT's answer anyway, and newcomers join it.
                flight = self._inflight.get(loop)
                while flight is not None and not flight.done() and group.calls < self.max_calls:
                    await asyncio.wait([flight])
                    flight = self._inflight.get(loop)
            except BaseException:
                group.members.remove(leader)  # cancelled: nothing of ours is logged
                self._commit(self._close(loop, group))
                raise
            self._waited(len(group.members) > 1)
            members = self._close(loop, group)
        later: list[_Later] = []
        defer = self._defers and sum(len(member.calls) for member in members) >= MAX_GROUP_CALLS
        missing = self._commit(members, compile=False, later=later if defer else None)
        if later:
            await self._settled(*later[0])
        if missing is not None:
            await self._compile_then_commit(members, leader, missing)
        if leader.error is not None:
            raise leader.error
        assert leader.result is not None
        return leader.result

    def _close(self, loop: asyncio.AbstractEventLoop, group: _Group) -> list[_Member]:
        if self._groups.get(loop) is group:
            del self._groups[loop]
        return group.members

    async def _compile_then_commit(
        self, members: list[_Member], leader: _Member, revision: int
    ) -> None:
        """A revision another process uploaded is compiled on a worker thread, and the
        group committed on it: compiling takes a while (about a second at 10,000 roles),
        and on the event loop it held up every request of this process meanwhile, a
        health check included. Requests that come meanwhile wait for the same compile."""
        for _ in range(MAX_COMPILES):
            try:
                await asyncio.to_thread(self.service.snapshots.get, revision)
            except Exception:
                break  # (a revision that will not compile: the commit below says why)
            except BaseException:
                # The leader is cancelled: the others are still waiting for their answers.
                self._commit([member for member in members if member is not leader])
                raise
            missing = self._commit(members, compile=False)
            if missing is None:
                return
            revision = missing
        self._commit(members)  # uploads keep coming: compiled here, as any other caller

    def _commit(
        self, group: list[_Member], compile: bool = True, later: list[_Later] | None = None
    ) -> int | None:
        """Decide and log the group, each member answered or failed; or, with `compile`
        False, a revision it needs that is not compiled yet, and nothing done. With
        `later`, on a store that can (`Store.defer_commit`), the transaction's COMMIT is
        sent and the answering is added to `later`: the caller answers once the COMMIT's
        answer is read (`_settled`). The group is decided and logged at one moment
        (`one_moment`): its conditions' `time.*` is its rows' `at`."""
        with one_moment():
            return self._decide_and_log(group, compile, later)

    def _decide_and_log(
        self, group: list[_Member], compile: bool, later: list[_Later] | None
    ) -> int | None:
        service = self.service
        deferred = None
        try:
            # Prepared on the caches as they are, then checked inside the write
            # transaction: if another process changed something since the last look (a
            # new revision, an agent, a connection, a token), the caches catch up, the
            # transaction ends empty, every request is prepared again outside the write
            # lock (where a new revision compiles) and the next transaction looks again
            # (a second change meanwhile: prepared inside it, on what nobody can change
            # before its COMMIT). The usual case (nothing changed) costs no read
            # transaction of its own. Changed means `service.read.moves` moved since the group
            # was prepared: another thread of this process may have seen the change (its
            # own `sync`, whose look at the store then leaves ours nothing new), or made it.
            seen = service.read.moves
            outcome = self._prepare(group, compile=compile)
            prepared, ready = _ready(outcome)
            if not prepared:
                # All refused (or gone): look again on fresh caches, outside any write
                # transaction; a request refused then writes nothing and opens none.
                service.sync()
                if service.read.moves != seen:
                    seen = service.read.moves
                    outcome = self._prepare(group, recheck=True, compile=compile)
                    prepared, ready = _ready(outcome)
                if not prepared:
                    for member, mine in outcome:
                        assert isinstance(mine, Exception)
                        member.fail(mine)
                    return None
            # Rows and responses are drafted here too, outside the write lock (which the
            # workers take in turn), unless a call is charged against a budget or is
            # decided on its thread's running cost (a condition reads `thread.cost`).
            drafted = draft(service, prepared)
            with service.store.atomic():  # never nested: this transaction is ours
                service.sync()
                stale = service.read.moves != seen
                if not stale:
                    if self._revoked(outcome):  # authorized before a move seen earlier
                        prepared, ready = _ready(outcome)
                        drafted = None  # (drafted with the refused: drafted again now)
                    responses = _log(service, prepared, drafted)
                    if later is not None:
                        deferred = service.store.defer_commit()
            if stale:  # ended empty: prepared again outside the write lock, then inside
                seen = service.read.moves
                outcome = self._prepare(group, recheck=True, compile=compile)
                with service.store.atomic():
                    service.sync()
                    if service.read.moves != seen:
                        outcome = self._prepare(group, recheck=True, compile=compile)
                    self._revoked(outcome)
                    prepared, ready = _ready(outcome)
                    responses = _log(service, prepared, None)
        except NotCompiled as missing:  # (a transaction it left ended empty)
            return missing.revision
        except Exception as exc:  # the store failed: every request still waiting gets it
            for member in group:
                member.fail(exc)
            return None
        if deferred is not None and later is not None:
            later.append((deferred, group, partial(_answer, outcome, ready, responses)))
            return None
        _answer(outcome, ready, responses)
        return None

    async def _settled(self, deferred: Deferred, group: list[_Member], answer: _Answering) -> None:
        """Answer the group once its COMMIT's answer is read: by this loop when the
        connection is readable, or by the store before another use of it. The loop reads
        and decides other requests meanwhile; a leader cancelled meanwhile reads it at
        once, so the others are answered all the same."""
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        self._inflight[loop] = woken

        def finish() -> None:  # (on the loop)
            if deferred.error is not None:
                for member in group:
                    member.fail(deferred.error)
            else:
                answer()
            if not woken.done():
                woken.set_result(None)
            if self._inflight.get(loop) is woken:
                del self._inflight[loop]

        def settled() -> None:  # (on the thread that read it)
            loop.call_soon_threadsafe(finish)

        deferred.when_settled(settled)
        if not deferred.settled and deferred.answered():
            deferred.settle()
        if woken.done() or deferred.settled:
            await woken
            return
        # One reader a socket: the group after this one may be waiting on the same
        # connection already (its BEGIN read this answer), and replaced it.
        key = (loop, deferred.fileno)
        self._readers[key] = deferred

        def readable() -> None:
            if self._readers.get(key) is deferred:
                del self._readers[key]
                loop.remove_reader(key[1])
            deferred.settle()

        loop.add_reader(key[1], readable)
        # And read at the latest SETTLE_AFTER seconds on: an answer the driver took in
        # while another thread held the store leaves the socket with nothing to say.
        late = loop.call_later(SETTLE_AFTER, deferred.settle)
        try:
            await asyncio.shield(woken)
        except BaseException:
            deferred.settle()
            raise
        finally:
            late.cancel()
            if self._readers.get(key) is deferred:
                del self._readers[key]
                with contextlib.suppress(Exception):
                    loop.remove_reader(key[1])

    def _revoked(self, outcome: _Outcome) -> bool:
        """Inside the write transaction, after `service.sync()`: a prepared member whose
        token was looked up on a token cache dropped since (by this group's sync or an
        earlier one) is looked up again, and refused in `outcome` if it is gone; whether
        any was. The usual case: one comparison a member."""
        tokens, generation = self.tokens, self.generation
        if tokens is None:
            return False
        refused = False
        for i, (member, mine) in enumerate(outcome):
            if member.generation == generation or type(mine) is not list:
                continue
            if member.token and tokens.lookup(member.token) is None:
                outcome[i] = (member, invalid_token())
                refused = True
            else:
                member.generation = generation
        return refused

    def _prepare(
        self, group: list[_Member], recheck: bool = False, compile: bool = True
    ) -> _Outcome:
        """Each waiting member's prepared calls, or the error that refuses it alone
        (`recheck`: after the caches caught up, each member's token is looked up again;
        `compile` False: NotCompiled, for the whole group, for a revision not compiled
        yet)."""
        service = self.service
        snapshots: dict[int, Snapshot] = {}
        outcome: _Outcome = []
        tokens = self.tokens if recheck else None
        for member in group:
            if member.future is not None and member.future.done():
                continue  # cancelled: the client is gone, nothing is logged
            if tokens is not None and member.token:
                generation = self.generation  # (read first: a look-up on the old cache
                if tokens.lookup(member.token) is None:  # keeps the old number)
                    outcome.append((member, invalid_token()))
                    continue
                member.generation = generation
            try:
                outcome.append((member, prepare(service, member.calls, snapshots, compile)))
            except NotCompiled:
                raise  # the whole group waits for the compile
            except Exception as exc:  # a 404, a 409: this request only
                outcome.append((member, exc))
        return outcome


def _answer(outcome: _Outcome, ready: list[tuple[int, int, _Member]], responses: Answer) -> None:
    for member, mine in outcome:
        if isinstance(mine, BaseException):
            member.fail(mine)  # a 404, a 409: this request only, nothing written
    for start, end, member in ready:
        member.answer(responses[start:end])


def _ready(outcome: _Outcome) -> tuple[list[Prepared], list[tuple[int, int, _Member]]]:
    """The prepared members' calls in one list, and each member's slice of it."""
    ready: list[tuple[int, int, _Member]] = []
    prepared: list[Prepared] = []
    for member, mine in outcome:
        if type(mine) is list:
            ready.append((len(prepared), len(prepared) + len(mine), member))
            prepared.extend(mine)
    return prepared, ready


def _log(service: Service, prepared: list[Prepared], drafted: Draft | None) -> Answer:
    """Log the calls inside the caller's transaction (drafted before it, or now): the
    responses, in order."""
    if not prepared:
        return []
    return (drafted.log(service) if drafted is not None else write(service, prepared))[0]
