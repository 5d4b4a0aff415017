"""Schedules run by a real `charter serve --workers 2 --schedule-tick 1`: a run now
answers its thread, and a due time missed while no one ran it (set in the file beside the
server, as a server that was down leaves it) is run within a tick or two, once, though
both workers tick."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from policy.store.open import open_store, parse
from tests.api.start_runs import Served, workspace

MINUTE = 60_000


def test_a_served_schedule_runs_now_and_when_due(tmp_path: Path) -> None:
    db = tmp_path / "charter.db"
    served = Served(db, "--workspace", str(workspace(tmp_path)), "--workers", "2",
                    "--schedule-tick", "1")  # fmt: skip
    try:
        with httpx.Client(base_url=served.url, headers=served.headers, timeout=30) as http:
            body = {"agent": "demo-support", "name": "nightly", "cron": "0 3 * * *",
                    "prompt": "sum up the day"}  # fmt: skip
            made = http.post("/v1/schedules", json=body)
            assert made.status_code == 201, made.text
            schedule = made.json()
            one = f"/v1/schedules/{schedule['id']}"
            ran = http.post(f"{one}/run")
            assert ran.status_code == 201, ran.text
            now_thread = ran.json()["thread"]["id"]
            # a due time a minute ago, as a server down at that minute leaves it
            due = (int(time.time() * 1000) // MINUTE - 1) * MINUTE
            store = open_store(parse(str(db)), shared=True)
            try:
                with store.atomic():
                    doc = dict(store.get("schedules", schedule["id"]) or {})
                    doc["next_run"] = due
                    store.update("schedules", schedule["id"], doc, tag="demo-support")
            finally:
                store.close()
            deadline = time.monotonic() + 15
            got = http.get(one).json()
            while got["last_run"] != due and time.monotonic() < deadline:
                time.sleep(0.2)
                got = http.get(one).json()
            assert got["last_run"] == due, got
            assert got["next_run"] > due + MINUTE and got["last_thread"] != now_thread
            time.sleep(1.2)  # (a tick more of each worker: nothing more runs)
            threads = http.get("/v1/threads", params={"agent": "demo-support"}).json()["items"]
            assert sorted(t["id"] for t in threads) == sorted([now_thread, got["last_thread"]])
            events = http.get(f"/v1/threads/{got['last_thread']}/events").json()["items"]
            assert [e["event"] for e in events] == ["created"]
            assert (events[0]["schedule"], events[0]["due"], events[0]["by"]) == (
                schedule["id"], due, "charter"
            )  # fmt: skip
    finally:
        served.stop()
