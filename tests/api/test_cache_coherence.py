"""What a process caches never changes an answer (api/service/readmodel.py): two services
on one SQLite file, as two workers, take turns at generated sequences of what changes
what a decision reads (threads made and deleted, turns admitted, an agent moved to
another profile, deleted and made again under its id) and at decisions naming any of
them, deleted ones included, with an expected cost or none (a thread's `max_cost` of 0
refuses any). Each decision both workers answer on their caches is answered the same,
effect or error code, by a third service that has just dropped everything it cached and
reads the store afresh."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api import commands as c
from api.http.app import open_service
from api.service.calls import Call
from api.service.core import Service
from api.service.decide import decide_calls
from api.service.errors import ServiceError
from api.service.readmodel import ReadModel
from api.service.resources import admit_turn, agents_delete, agents_update, create_agent
from api.service.threads import threads_create, threads_delete
from api.service.tokens import Principal
from tests.api.conftest import make_harness

ADMIN = Principal("t", "admin")
AGENTS = ("a1", "b1")
PROFILES = ("support", "narrow")  # (narrow: mail alone, no hooks)
CALLS = (
    ("mail.send", {"to": "bob@example.com", "subject": "s", "body": "b"}),  # allowed by both
    ("billing.refund", {"amount": 80}),  # support: paused; narrow: denied
)
WORKER = st.integers(0, 1)
CAPS = (None, Decimal(0))  # a thread's `max_cost`: none, or one that refuses any cost
COST = Decimal("0.001")  # a call's expected cost, when it has one: 10 USD a day is 10,000
# none, or one of those made (deleted ones too): a call mostly names a thread, half the
# time a turn
THREAD = st.sampled_from([None, 0, 1, 2, 3, 4, 5, 6, 7])
TURN = st.none() | st.integers(0, 15)
# (a decision's agent: mostly the one its turn or thread was made for, else a mismatch)
CALLER = st.sampled_from(["owner", "owner", "owner", *AGENTS])

MAKE_THREAD = st.tuples(st.just("thread"), WORKER, st.sampled_from(AGENTS), st.sampled_from(CAPS))
DECIDE = st.tuples(st.just("decide"), st.sampled_from(CALLS), THREAD, TURN, CALLER, st.booleans())
STEPS = st.lists(
    st.one_of(  # (made likelier by being listed more than once: threads, decisions)
        MAKE_THREAD, MAKE_THREAD,
        st.tuples(st.just("delete thread"), WORKER, st.integers(0, 15)),
        st.tuples(st.just("turn"), WORKER, st.sampled_from(AGENTS), THREAD),
        st.tuples(st.just("move b1"), WORKER, st.sampled_from(PROFILES)),
        st.tuples(st.just("make b1 again"), WORKER, st.sampled_from(PROFILES)),
        DECIDE, DECIDE, DECIDE,
    ),
    min_size=40,
    max_size=80,
)  # fmt: skip


class Workers:
    """The two workers, the cache-less service, and what the steps made."""

    def __init__(self, root: Path) -> None:
        harness = make_harness(root)
        self.identity = harness.identity
        harness.add_agent("b1", "support")
        self.workers: list[Service] = [harness.service, open_service(harness.db)]
        self.fresh = open_service(harness.db)
        self.threads: list[str] = []  # every thread made, deleted or not
        self.turns: list[str] = []
        self.owners: dict[str, str] = {}  # thread or turn -> the agent it was made for

    def close(self) -> None:
        for service in (*self.workers, self.fresh):
            service.store.close()

    def step(self, kind: str, *args: Any) -> None:
        if kind == "decide":
            self.decide(*args)
            return
        worker, *rest = args
        service = self.workers[worker]
        try:
            with service.store.atomic():
                getattr(self, kind.replace(" ", "_"))(service, *rest)
        except ServiceError:
            pass  # (one already deleted, an agent not there: refused, nothing changed)

    def thread(self, service: Service, agent: str, cap: Decimal | None) -> None:
        made = threads_create(service, ADMIN, c.CreateThread(agent=agent, max_cost=cap)).body.id
        self.threads.append(made)
        self.owners[made] = agent

    def delete_thread(self, service: Service, pick: int) -> None:
        if self.threads:
            threads_delete(service, ADMIN, c.DeleteThread(id=_one(self.threads, pick) or ""))

    def turn(self, service: Service, agent: str, pick: int | None) -> None:
        service.sync()
        made = admit_turn(service, agent, _one(self.threads, pick), service.current()).id
        self.turns.append(made)
        self.owners[made] = agent

    def move_b1(self, service: Service, profile: str) -> None:
        agents_update(service, ADMIN, c.UpdateAgent(id="b1", profile=profile))

    def make_b1_again(self, service: Service, profile: str) -> None:
        service.sync()
        if service.find_agent("b1") is not None:
            agents_delete(service, ADMIN, c.DeleteAgent(id="b1"))
        made = c.CreateAgent(name="b1", profile=profile, identity=self.identity)
        create_agent(service, ADMIN, made, "b1")

    def decide(
        self, which: tuple[str, Any], thread: int | None, turn: int | None, caller: str,
        costs: bool,
    ) -> None:  # fmt: skip
        tool, args = which
        named = (_one(self.threads, thread), _one(self.turns, turn))
        owners = [self.owners[name] for name in named if name is not None]
        agent = caller if caller != "owner" else (owners[-1] if owners else "a1")
        cost = COST if costs else None
        call = Call(agent, tool, args, thread=named[0], turn=named[1], expected_cost=cost)
        fresh = self.fresh
        fresh.read = ReadModel(fresh.store, fresh.snapshots)  # (nothing cached)
        expected = _outcome(partial(_decided, fresh, call))
        for n, worker in enumerate(self.workers):  # (each on what it cached)
            answered = _outcome(partial(_decided, worker, call))
            assert answered == expected, (call, n)
        assert self.workers[0].store.last_seq() == self.workers[1].store.last_seq()


def _one(names: list[str], pick: int | None) -> str | None:
    return None if pick is None or not names else names[pick % len(names)]


def _outcome(decide: Callable[[], str]) -> str:
    try:
        return decide()
    except ServiceError as exc:
        return exc.code


def _decided(service: Service, call: Call) -> str:
    return str(decide_calls(service, [call])[0]["effect"])


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(STEPS)
def test_caches_never_change_an_answer(steps: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory(prefix="charter-coherence-") as root:
        workers = Workers(Path(root))
        try:
            for step in steps:
                workers.step(*step)
        finally:
            workers.close()
