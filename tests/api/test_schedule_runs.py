"""Schedules run (api.service.schedulerun): each due time exactly once however many
runners tick at once (two services on one SQLite file, as `--workers 2`, or on one
PostgreSQL database, as two nodes), the thread started for the schedule's agent with its
prompt, the run readable on the schedule and in the thread's events; and run now over a
real server (`POST /v1/schedules/{id}/run`), with the reach and scopes of an update."""

from __future__ import annotations

import threading
from typing import Any

import httpx

from api.service import schedulerun, threadevents
from api.service.core import Service, now_ms
from tests.api.conftest import BOTH, POLICY, Harness, expect, opened_again
from tests.api.test_schedules import PLANNER

STORES = BOTH
MINUTE = 60_000


def _made(live: httpx.Client, harness: Harness, n: int = 1, agent: str = "a1") -> list[str]:
    ids = []
    for i in range(n):
        body = {"agent": agent, "name": f"s{i}", "cron": "0 3 * * *", "prompt": f"prompt {i}"}
        made = live.post("/v1/schedules", json=body, headers=harness.auth())
        assert made.status_code == 201, made.text
        ids.append(made.json()["id"])
    return ids


def _due_at(service: Service, schedule_id: str, due: int) -> None:
    """Schedule `schedule_id` due at `due`, as if the server was down at that minute."""
    with service.store.atomic():
        doc = dict(service.store.get(schedulerun.KIND, schedule_id) or {})
        doc["next_run"] = due
        service.store.update(schedulerun.KIND, schedule_id, doc, tag=str(doc["agent"]))


def _created(service: Service, thread: str) -> dict[str, Any]:
    events = threadevents.page(service.store, thread, None, 200)["items"]
    assert events[0]["event"] == "created"
    found: dict[str, Any] = events[0]
    return found


def test_two_runners_run_each_due_time_once(live: httpx.Client, harness: Harness) -> None:
    ids = _made(live, harness, 12)
    now = now_ms()
    due = (now // MINUTE - 5) * MINUTE  # five minutes ago: missed
    for schedule_id in ids:
        _due_at(harness.service, schedule_id, due)
    with opened_again(harness.db, harness.key_file) as other:
        started: list[list[Any]] = [[], []]
        gate = threading.Barrier(2)

        def run(index: int, service: Service) -> None:
            gate.wait()
            for _ in range(3):  # (ticks again find nothing left to run)
                started[index] += schedulerun.tick(service, now)

        runners = [threading.Thread(target=run, args=(i, s))
                   for i, s in enumerate((harness.service, other))]  # fmt: skip
        for runner in runners:
            runner.start()
        for runner in runners:
            runner.join(60)
    # (the live server's own runner may tick meanwhile: a third runner, counted too)
    threads = [row.id for row in harness.service.store.scan("threads", tag="a1")]
    assert {t.id for t in started[0] + started[1]} <= set(threads)
    assert len(threads) == len(ids)  # each due time once, by whichever runner
    by_schedule = {}
    for thread in threads:
        created = _created(harness.service, thread)
        assert (created["due"], created["by"], created["agent"]) == (due, "charter", "a1")
        by_schedule[created["schedule"]] = thread
    assert sorted(by_schedule) == sorted(ids)
    for schedule_id in ids:
        got = live.get(f"/v1/schedules/{schedule_id}", headers=harness.auth()).json()
        assert got["last_run"] == due and got["last_thread"] == by_schedule[schedule_id]
        assert got["next_run"] > now  # (the next 03:00)
        thread = live.get(f"/v1/threads/{got['last_thread']}", headers=harness.auth()).json()
        assert thread["prompt"] == f"prompt {ids.index(schedule_id)}"
        assert thread["status"] == "open" and thread["agent"] == "a1"
    # nothing more is due
    assert schedulerun.tick(harness.service, now + 1) == []


def test_run_now(live: httpx.Client, harness: Harness) -> None:
    with harness.service.store.atomic():
        harness.service.upload([("policy.charter", POLICY), ("planner.charter", PLANNER)], "t")
    harness.add_agent("s1", "planner")
    harness.add_agent("s2", "planner")
    s1, s2 = harness.auth(harness.token_for("s1")), harness.auth(harness.token_for("s2"))
    made = live.post("/v1/schedules", json={"name": "n", "cron": "0 3 * * *", "prompt": "go"},
                     headers=s1)  # fmt: skip
    assert made.status_code == 201, made.text
    schedule = made.json()
    assert (schedule["last_run"], schedule["last_thread"]) == (None, None)
    run = f"/v1/schedules/{schedule['id']}/run"
    before = now_ms()
    ran = live.post(run, headers=s1)
    assert ran.status_code == 201, ran.text
    thread, after = ran.json()["thread"], ran.json()["schedule"]
    assert (thread["agent"], thread["prompt"], thread["status"]) == ("s1", "go", "open")
    assert after["last_thread"] == thread["id"] and after["last_run"] >= before
    assert after["next_run"] == schedule["next_run"]  # (a run now leaves the due time)
    got = live.get(f"/v1/schedules/{schedule['id']}", headers=s1).json()
    assert got == after
    events = live.get(f"/v1/threads/{thread['id']}/events", headers=harness.auth()).json()
    created = events["items"][0]
    assert (created["event"], created["schedule"], created["by"]) == (
        "created",
        schedule["id"],
        "s1",
    )
    assert "due" not in created
    # decided as the tool and logged
    log = live.get("/v1/decisions", params={"limit": "1000"}, headers=harness.auth()).json()
    assert any(r["tool"] == "schedules.run" and r["agent"] == "s1" for r in log["decisions"])
    # an admin runs it too; another agent neither runs it nor starts a thread
    assert live.post(run, headers=harness.auth()).status_code == 201
    threads = live.get("/v1/threads", params={"agent": "s1"}, headers=harness.auth()).json()
    expect(live.post(run, headers=s2), 403, "not-managed-agent")
    expect(live.post("/v1/schedules/nope/run", headers=s1), 404, "schedule-not-found")
    expect(live.post(run, headers=harness.auth(harness.decide)), 403, "insufficient-scope")
    # a1's policy (`support`) does not grant schedules.*: denied, logged, nothing started
    mine = _made(live, harness, 1)[0]
    denied = live.post(f"/v1/schedules/{mine}/run", headers=harness.auth(harness.agent_token))
    expect(denied, 403, "denied-by-policy")
    again = live.get("/v1/threads", params={"agent": "s1"}, headers=harness.auth()).json()
    assert len(again["items"]) == len(threads["items"]) == 2
    assert (
        live.get("/v1/threads", params={"agent": "a1"}, headers=harness.auth()).json()["items"]
        == []
    )


def test_a_changed_cron_moves_next_run(live: httpx.Client, harness: Harness) -> None:
    schedule_id = _made(live, harness)[0]
    one = f"/v1/schedules/{schedule_id}"
    due = (now_ms() // MINUTE + 60) * MINUTE  # (stored as is: the answer is what is stored)
    _due_at(harness.service, schedule_id, due)
    assert live.get(one, headers=harness.auth()).json()["next_run"] == due
    # a prompt change keeps the due time; a new cron takes its first minute after now
    kept = live.patch(one, json={"prompt": "other", "cron": "0 3 * * *"}, headers=harness.auth())
    assert kept.json()["next_run"] == due
    moved = live.patch(one, json={"cron": "*/10 * * * *"}, headers=harness.auth()).json()
    assert moved["next_run"] > now_ms() - MINUTE and moved["next_run"] % (10 * MINUTE) == 0
    assert schedulerun.tick(harness.service, now_ms()) == []
