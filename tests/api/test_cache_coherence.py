"""What a process caches never changes an answer (api/service/readmodel.py): two services
on one SQLite file, as two workers, take turns at generated sequences of what changes
what a decision reads (threads made and deleted, turns admitted, an agent moved to
another profile, deleted and made again under its id) and at decisions naming any of
them, deleted ones included. Each decision both workers answer on their caches is
answered the same, effect or error code, by a third service that has just dropped
everything it cached and reads the store afresh."""

from __future__ import annotations

import tempfile
from functools import partial
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from api import commands as c
from api.http.app import open_service
from api.service.calls import Call
from api.service.core import Service
from api.service.decide import decide_calls, prepare
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


def _outcome(decide: Any) -> str:
    try:
        return str(decide())
    except ServiceError as exc:
        return exc.code


class Workers(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._tmp = tempfile.TemporaryDirectory(prefix="charter-coherence-")
        harness = make_harness(Path(self._tmp.name))
        self.identity = harness.identity
        harness.add_agent("b1", "support")
        self.workers: list[Service] = [harness.service, open_service(harness.db)]
        self.fresh = open_service(harness.db)
        self.threads: list[str] = []  # every thread made, deleted or not
        self.turns: list[str] = []
        self.owners: dict[str, str] = {}  # thread or turn -> the agent it was made for

    def teardown(self) -> None:
        for service in (*self.workers, self.fresh):
            service.store.close()
        self._tmp.cleanup()

    def _do(self, worker: int, change: Any) -> None:
        service = self.workers[worker]
        try:
            with service.store.atomic():
                change(service)
        except ServiceError:
            pass  # (one already deleted, an agent not there: refused, nothing changed)

    @rule(worker=WORKER, agent=st.sampled_from(AGENTS))
    def make_thread(self, worker: int, agent: str) -> None:
        def make(service: Service) -> None:
            made = threads_create(service, ADMIN, c.CreateThread(agent=agent)).body.id
            self.threads.append(made)
            self.owners[made] = agent

        self._do(worker, make)

    @precondition(lambda self: self.threads)
    @rule(worker=WORKER, data=st.data())
    def delete_thread(self, worker: int, data: st.DataObject) -> None:
        thread = data.draw(st.sampled_from(self.threads))
        self._do(worker, lambda s: threads_delete(s, ADMIN, c.DeleteThread(id=thread)))

    @rule(worker=WORKER, agent=st.sampled_from(AGENTS), data=st.data())
    def admit(self, worker: int, agent: str, data: st.DataObject) -> None:
        thread = _one_of(data, self.threads)

        def turn(service: Service) -> None:
            service.sync()
            made = admit_turn(service, agent, thread, service.current()).id
            self.turns.append(made)
            self.owners[made] = agent

        self._do(worker, turn)

    @rule(worker=WORKER, profile=st.sampled_from(PROFILES))
    def move_b1(self, worker: int, profile: str) -> None:
        self._do(worker, lambda s: agents_update(s, ADMIN, c.UpdateAgent(id="b1", profile=profile)))

    @rule(worker=WORKER, profile=st.sampled_from(PROFILES))
    def make_b1_again(self, worker: int, profile: str) -> None:
        def again(service: Service) -> None:
            service.sync()
            if service.find_agent("b1") is not None:
                agents_delete(service, ADMIN, c.DeleteAgent(id="b1"))
            made = c.CreateAgent(name="b1", profile=profile, identity=self.identity)
            create_agent(service, ADMIN, made, "b1")

        self._do(worker, again)

    @rule(which=st.sampled_from(CALLS), data=st.data())
    def decide(self, which: tuple[str, Any], data: st.DataObject) -> None:
        tool, args = which
        thread = _one_of(data, self.threads)
        turn = _one_of(data, self.turns)
        # mostly the agent the turn or thread was made for (else a mismatch, both ways)
        mine = [self.owners[named] for named in (turn, thread) if named is not None]
        agent = data.draw(st.sampled_from([*mine * 3, *AGENTS]))
        call = Call(agent, tool, args, thread=thread, turn=turn)
        fresh = self.fresh
        fresh.read = ReadModel(fresh.store, fresh.snapshots)  # (nothing cached)
        fresh.sync()
        expected = _outcome(lambda: _effect(prepare(fresh, [call], {})[0].decision))
        for n, worker in enumerate(self.workers):  # (each on what it cached)
            answered = _outcome(partial(_decided, worker, call))
            assert answered == expected, (call, n)

    @invariant()
    def the_workers_log_without_gaps(self) -> None:
        assert self.workers[0].store.last_seq() == self.workers[1].store.last_seq()


def _one_of(data: st.DataObject, names: list[str]) -> str | None:
    """One of `names` (made, maybe deleted since), or none."""
    return data.draw(st.none() | st.sampled_from(names)) if names else None


def _decided(service: Service, call: Call) -> str:
    return str(decide_calls(service, [call])[0]["effect"])


def _effect(decision: Any) -> str:
    assert decision is not None  # (no condition here reads `thread.cost`)
    return str(decision.effect)


# (examples as the profile says: 30 in `make test`, more in `make fuzz`)
Workers.TestCase.settings = settings(
    stateful_step_count=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)  # fmt: skip
test_caches_never_change_an_answer = Workers.TestCase
