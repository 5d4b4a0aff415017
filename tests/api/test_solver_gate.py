"""The fit checks' turns (api.service.solver.Gate): never more running than the slots or
than a token's share, no slot idle while a check that may start waits, every token with
a check waiting served in turn, and bounded queues that refuse with `solver-busy`."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.http.errors import status_of
from api.service import solver
from api.service.errors import ServiceError
from api.service.solver import RETRY_AFTER_S, Gate, Ticket
from engine.fit.result import FitResult

KEYS = ("a", "b", "c", "d")
DRAWN = ("a", "a", "a", "b", "c", "d")  # (one token sends half the checks: a flood)
# (what, which, times): enter `times` checks of DRAWN[which] (a burst), end the
# `which`-th running check, or give up the `which`-th waiting one (its wait ran out, or
# its client went away). Queues build up, and fill.
OPS = st.lists(
    st.tuples(
        st.sampled_from(("enter", "leave", "withdraw")), st.integers(0, 15), st.integers(1, 4)
    ),
    max_size=60,
)


class Model:
    """The gate driven from outside, with what each check was told."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.running: list[Ticket] = []
        self.waiting: list[Ticket] = []
        self.notified: Counter[int] = Counter()  # by id(ticket): every ticket is kept in
        self.made: list[Ticket] = []  # `made`, so that no id is reused within one example
        self.order: list[str] = []  # the keys of the checks started from the queue

    def enter(self, key: str) -> None:
        box: list[Ticket] = []

        def notify() -> None:
            self.notified[id(box[0])] += 1
            self.order.append(key)

        try:
            ticket = self.gate.enter(key, notify)
        except ServiceError as refused:
            assert status_of(refused.code) == 503 and refused.code == "solver-busy"
            assert refused.retry_after == RETRY_AFTER_S
            queued = Counter(t.key for t in self.waiting)
            assert queued[key] >= self.gate.key_queue or len(self.waiting) >= self.gate.queue
            return
        box.append(ticket)
        self.made.append(ticket)
        (self.running if ticket.granted else self.waiting).append(ticket)

    def settle(self) -> None:
        for ticket in [t for t in self.waiting if t.granted]:
            assert self.notified[id(ticket)] == 1
            self.waiting.remove(ticket)
            self.running.append(ticket)

    def eligible(self) -> set[str]:
        busy = Counter(t.key for t in self.running)
        return {t.key for t in self.waiting if busy[t.key] < self.gate.per_key}


@given(ops=OPS, slots=st.integers(1, 3), per_key=st.integers(1, 2))
def test_turns_are_shared_and_slots_never_idle(
    ops: list[tuple[str, int, int]], slots: int, per_key: int
) -> None:
    model = Model(Gate(slots=slots, per_key=min(per_key, slots), queue=6, key_queue=3))
    # for each token, the others served while it had a check waiting that could start
    passed: dict[str, list[str]] = {}
    for what, which, times in ops:
        before = model.eligible()
        if what == "enter":
            for _ in range(times):
                model.enter(DRAWN[which % len(DRAWN)])
        elif what == "leave" and model.running:
            ticket = model.running.pop(which % len(model.running))
            started = len(model.order)
            model.gate.leave(ticket.key)
            model.settle()
            for chosen in model.order[started:]:
                for other in before - {chosen}:
                    passed.setdefault(other, []).append(chosen)
                passed.pop(chosen, None)
        elif what == "withdraw" and model.waiting:
            ticket = model.waiting[which % len(model.waiting)]
            assert model.gate.withdraw(ticket)  # (nothing was granted since it was queued)
            model.waiting.remove(ticket)
        model.settle()
        busy = Counter(t.key for t in model.running)
        assert len(model.running) == model.gate.running() <= model.gate.slots
        assert all(n <= model.gate.per_key for n in busy.values())
        # work-conserving: a check that may start is not left waiting beside a free slot
        assert not model.eligible() or len(model.running) == model.gate.slots
        for key in set(passed) - model.eligible():
            del passed[key]  # (not waiting, or at its share: nothing owed)
        # round-robin: no other token is served twice before a waiting one
        assert all(len(set(others)) == len(others) for others in passed.values()), passed


def test_a_flooding_token_is_served_in_turn_with_the_others() -> None:
    gate = Gate(slots=1, per_key=1, queue=16, key_queue=8)
    served: list[str] = []
    gate.enter("flood", lambda: None)  # running
    for key in ("flood",) * 5 + ("other", "third"):
        gate.enter(key, lambda k=key: served.append(k))  # type: ignore[misc]
    for _ in range(7):
        gate.leave(served[-1] if served else "flood")
    # (`flood` had its turn: the running check)
    assert served == ["other", "third", "flood", "flood", "flood", "flood", "flood"]


def test_full_queues_refuse() -> None:
    gate = Gate(slots=1, per_key=1, queue=3, key_queue=2)
    gate.enter("a", lambda: None)
    gate.enter("a", lambda: None)
    gate.enter("a", lambda: None)
    with pytest.raises(ServiceError) as mine:
        gate.enter("a", lambda: None)
    assert "2 checks of this token are waiting already" in mine.value.message
    gate.enter("b", lambda: None)
    with pytest.raises(ServiceError) as everyone:
        gate.enter("c", lambda: None)
    assert "3 checks are waiting already" in everyone.value.message


def _never(*args: object, timeout_ms: int) -> FitResult:
    raise AssertionError("a check that never got its turn ran")


def _fits(*args: object, timeout_ms: int) -> FitResult:
    return FitResult.of([])


def test_a_wait_past_its_bound_is_refused_and_leaves_no_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = Gate(slots=1, per_key=1)
    monkeypatch.setattr(solver, "GATE", gate)
    monkeypatch.setattr(solver, "MAX_WAIT_S", 0.2)
    gate.enter("holder", lambda: None)  # (a check that runs all along)
    attempts: list[Callable[[], object]] = [
        lambda: solver.check("b", _never, timeout_ms=1000),
        lambda: asyncio.run(solver.check_async("b", _never, timeout_ms=1000)),
    ]
    for attempt in attempts:
        started = time.monotonic()
        with pytest.raises(ServiceError) as refused:
            attempt()
        assert 0.2 <= time.monotonic() - started < 1.5
        assert refused.value.code == "solver-busy" and refused.value.retry_after == RETRY_AFTER_S
        assert "no check could start within 0.2 s" in refused.value.message
        assert gate.running() == 1  # (the holder's: the refused one neither waits nor runs)
    gate.leave("holder")
    # the next check, of any token, starts at once and runs in a process of its own
    assert asyncio.run(solver.check_async("b", _fits, timeout_ms=1000)).fits
    assert solver.check("c", _fits, timeout_ms=1000).fits
    assert gate.running() == 0
