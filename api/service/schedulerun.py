"""Running schedules: the runner every `charter serve` process keeps, and the run-now
operation (`schedules.run`, `POST /v1/schedules/{id}/run`).

A run starts a thread for the schedule's agent with the schedule's `prompt` (status
`open`, no `max_cost`), whose `created` event names the schedule and, for a timed run,
the `due` time it ran for; the schedule keeps `last_run` (ms since the epoch: the due
time, or the moment of a run-now) and `last_thread`. The thread, its event and the
schedule's change commit together.

Every serving process, each of `--workers N` and each node on one PostgreSQL database,
ticks every `--schedule-tick` seconds (`Runner`): it reads the schedules and, for each
one due (api.service.scheduledue), claims its due time in a write transaction of its own
that reads the schedule again and goes on only while its `next_run` is still the one
the tick saw, a compare-and-set. Write transactions take the store's one writer lock (on
PostgreSQL an advisory lock every node takes), so of several runners that see the same
due time one claims it, starts the thread and moves `next_run` on; the others find it
moved and start nothing: each due time runs exactly once. A run-now starts a thread in
the same way and leaves `next_run` as it was.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from api import commands as c
from api.records import Thread
from api.service import agentowned, scheduledue
from api.service import schedules as scheduled
from api.service.core import Service, now_ms
from api.service.ops import Operation, Outcome, Result
from api.service.threads import by, open_thread
from api.service.tokens import Principal
from policy.store import StoreDamaged, StoreUnavailable

KIND = agentowned.SCHEDULES
RUNNER = "charter"  # who a timed run's thread is made by, in its `created` event
_logger = logging.getLogger("charter.schedules")


def _start(service: Service, doc: dict[str, Any], who: str, due: int | None, at: int) -> Thread:
    """Inside the caller's transaction: the thread a run of schedule `doc` starts, and the
    schedule's `last_run` and `last_thread` (`doc` changed in place, then stored)."""
    thread = open_thread(
        service.store, str(doc["agent"]), str(doc["prompt"]), None, who,
        schedule=str(doc["id"]), due=due,
    )  # fmt: skip
    doc["last_run"] = at if due is None else due
    doc["last_thread"] = thread.id
    return thread


def claim(service: Service, schedule_id: str, step: scheduledue.Step) -> Thread | None:
    """Take `step` of schedule `schedule_id` in a write transaction of its own, while the
    stored schedule is still the one it was made for; the thread it started (None: it
    runs nothing, or another runner took it first, or the schedule is gone)."""
    store = service.store
    with store.atomic():
        found = store.get(KIND, schedule_id)
        if found is None or not step.holds(found):
            return None
        doc = dict(found)
        thread = None
        if step.due is not None:
            thread = _start(service, doc, RUNNER, step.due, step.due)
        doc["next_run"] = step.next_run
        store.update(KIND, schedule_id, doc, tag=str(doc["agent"]))
    return thread


def tick(service: Service, now: int) -> list[Thread]:
    """One look at every schedule at `now` (ms since the epoch): each due one run once,
    each `next_run` to set set; the threads this runner started."""
    steps = []
    for row in service.store.scan(KIND):
        try:
            found = scheduledue.step(row.body, now)
        except Exception:  # (a stored cron this charter cannot read: the others run on)
            _logger.exception("schedule `%s` cannot be stepped", row.id)
            continue
        if found is not None:
            steps.append((row.id, found))
    started = []
    for schedule_id, found in steps:
        thread = claim(service, schedule_id, found)
        if thread is not None:
            started.append(thread)
    return started


def schedules_run(service: Service, actor: Principal, command: c.RunSchedule) -> Result:
    """Run the schedule now: a thread started as a timed run starts one; `next_run` stays."""
    with service.store.atomic():  # the check and the write see the same schedule
        doc = dict(scheduled.stored(service, actor, command.id))
        at = now_ms()
        thread = _start(service, doc, by(actor), None, at)
        service.store.update(KIND, command.id, doc, tag=str(doc["agent"]))
    return Result(Outcome.CREATED, {"schedule": scheduled.answer(doc, at), "thread": thread})


OPERATIONS: dict[str, Operation] = {"schedules.run": schedules_run}


class Runner:
    """A thread that ticks every `interval_ms` while the process serves (started and
    stopped by the app's lifespan, api.http.app), the first tick at once: a due time
    missed while no server ran is run as soon as one starts."""

    def __init__(self, service: Service, interval_ms: int) -> None:
        self._service = service
        self._interval = interval_ms / 1000
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True, name="charter-schedules")
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def _run(self) -> None:
        while True:
            try:
                tick(self._service, now_ms())
            except (StoreUnavailable, StoreDamaged, OSError) as exc:  # (the next tick tries again)
                _logger.warning("the schedules are not run this tick: %s", exc)
            except Exception:  # a thread of its own: what it raises goes to the log
                _logger.exception("the schedules' tick failed")
            if self._stop.wait(self._interval):
                return
