"""Approvals that reach whoever waits for them: the long poll `GET /v1/approvals/{id}?wait=`
and the event stream `GET /v1/approvals/events`, against real servers on loopback. "Another
worker" is a second service on the same database behind a server of its own, as `charter
serve --workers 2` (or another node on PostgreSQL) runs it: its decisions reach this one's
waiting requests through the store's change feed."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from api.http.app import create_app
from tests.api.conftest import BOTH, Harness, LiveServer, expect, opened_again

STORES = BOTH  # each test on SQLite and on PostgreSQL (tests/api/conftest.py)

REFUND = {"agent": "a1", "tool": "billing.refund", "args": {"amount": 80}}


@pytest.fixture
def second(harness: Harness) -> Iterator[httpx.Client]:
    """Another worker: a service of its own on the harness's database, served."""
    with (
        opened_again(harness.db, harness.key_file) as service,
        LiveServer(create_app(service)) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        yield client


def _pause(live: httpx.Client, harness: Harness) -> str:
    paused = live.post("/v1/decisions", json=REFUND, headers=harness.auth(harness.agent_token))
    assert paused.json()["effect"] == "pause", paused.text
    return str(paused.json()["approval_id"])


def _in_background(live: httpx.Client, path: str, headers: dict[str, str]) -> Future[Any]:
    """`GET path` on a connection of its own, from another thread: (its answer, seconds)."""

    def get() -> tuple[httpx.Response, float]:
        with httpx.Client(base_url=str(live.base_url), timeout=30) as client:
            began = time.monotonic()
            answer = client.get(path, headers=headers)
            return answer, time.monotonic() - began

    pool = ThreadPoolExecutor(1)
    future = pool.submit(get)
    pool.shutdown(wait=False)
    return future


def test_a_long_poll_answers_when_another_worker_decides(
    live: httpx.Client, second: httpx.Client, harness: Harness
) -> None:
    approval = _pause(live, harness)
    waiting = _in_background(live, f"/v1/approvals/{approval}?wait=20", harness.auth())
    time.sleep(0.3)  # (it waits meanwhile)
    assert not waiting.done()
    approved = second.post(f"/v1/approvals/{approval}/approve", headers=harness.auth())
    assert approved.status_code == 200, approved.text
    answer, took = waiting.result(10)
    assert answer.status_code == 200
    assert answer.json()["status"] == "approved"
    assert answer.json()["final"]["effect"] == "allow"
    assert took < 5  # (well before its 20 s: at most a look or two of the watch after)


def test_a_long_poll_answers_when_this_worker_decides(live: httpx.Client, harness: Harness) -> None:
    approval = _pause(live, harness)
    # an agent's token reads it as its `approvals.get` allows (decided and logged once)
    agent = harness.auth(harness.agent_token)
    logged = harness.service.store.last_seq()
    waiting = _in_background(live, f"/v1/approvals/{approval}?wait=20", agent)
    time.sleep(0.3)
    rejected = live.post(
        f"/v1/approvals/{approval}/reject", json={"reason": "no"}, headers=harness.auth()
    )
    assert rejected.status_code == 200, rejected.text
    answer, took = waiting.result(10)
    assert (answer.status_code, answer.json()["status"]) == (200, "rejected")
    assert answer.json()["reason"] == "no"
    assert took < 5
    # the get, then the reject's nothing (an admin's): one decision logged for the wait
    assert harness.service.store.last_seq() == logged + 1


def test_a_long_poll_ends_at_its_wait_with_the_approval_pending(
    live: httpx.Client, harness: Harness
) -> None:
    approval = _pause(live, harness)
    began = time.monotonic()
    answer = live.get(f"/v1/approvals/{approval}?wait=1", headers=harness.auth())
    took = time.monotonic() - began
    assert (answer.status_code, answer.json()["status"]) == (200, "pending")
    assert 0.9 < took < 5
    # a decided one answers at once, whatever its wait
    live.post(f"/v1/approvals/{approval}/approve", headers=harness.auth())
    began = time.monotonic()
    answer = live.get(f"/v1/approvals/{approval}?wait=60", headers=harness.auth())
    assert answer.json()["status"] == "approved"
    assert time.monotonic() - began < 1


def test_a_wait_out_of_bounds_is_refused(live: httpx.Client, harness: Harness) -> None:
    approval = _pause(live, harness)
    for wait in ("61", "-1", "1.5", "x", "１", ""):
        answer = live.get(f"/v1/approvals/{approval}?wait={wait}", headers=harness.auth())
        if wait == "":  # (no wait: answered at once)
            assert answer.json()["status"] == "pending"
        else:
            expect(answer, 400, "bad-wait")
    expect(live.get("/v1/approvals/nope?wait=1", headers=harness.auth()), 404,
           "approval-not-found")  # fmt: skip


# ---- the event stream ---------------------------------------------------------------------


class Stream:
    """An open event stream, read on a thread of its own: its events as (type, id, data)."""

    def __init__(self, base: str, headers: dict[str, str]) -> None:
        self.client = httpx.Client(base_url=base, timeout=30)
        self.events: list[tuple[str, str, str]] = []
        self.ids: list[str] = []  # every `id:` it gave, events' and bare ones
        self.status = 0
        self.ended = threading.Event()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(headers,), daemon=True)
        self._thread.start()
        assert self._started.wait(10)

    def _read(self, headers: dict[str, str]) -> None:
        try:
            with self.client.stream("GET", "/v1/approvals/events", headers=headers) as answer:
                self.status = answer.status_code
                self._started.set()
                fields: dict[str, str] = {}
                for line in answer.iter_lines():
                    if line == "":
                        if "data" in fields:
                            self.events.append((fields.get("event", "message"),
                                                fields.get("id", ""), fields["data"]))  # fmt: skip
                        fields = {}
                    elif not line.startswith(":"):
                        name, _, value = line.partition(":")
                        fields[name] = value.removeprefix(" ")
                        if name == "id":
                            self.ids.append(fields[name])
        except httpx.HTTPError:
            pass
        finally:
            self._started.set()
            self.ended.set()

    def until(self, count: int, within: float = 5) -> list[tuple[str, str, str]]:
        deadline = time.monotonic() + within
        while len(self.events) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(self.events) >= count, self.events
        return self.events

    def close(self) -> None:
        self.client.close()


def test_the_stream_tells_approvals_opened_and_decided_and_resumes(
    live: httpx.Client, second: httpx.Client, harness: Harness
) -> None:
    stream = Stream(str(live.base_url), harness.auth())
    try:
        assert stream.status == 200
        ready = stream.until(1)[0]
        assert ready[0] == "ready"
        approval = _pause(second, harness)  # (opened by the other worker)
        second.post(f"/v1/approvals/{approval}/approve", headers=harness.auth())
        events = stream.until(3)
    finally:
        stream.close()
    kinds = [(kind, json.loads(data)["id"]) for kind, _, data in events[1:3]]
    assert kinds == [("approval.opened", approval), ("approval.decided", approval)]
    assert json.loads(events[2][2])["status"] == "approved"
    opened_id = events[1][1]
    assert int(ready[1]) < int(opened_id) < int(events[2][1])
    # resumed after the opened one: the decided one again, and nothing before
    resumed = Stream(str(live.base_url), {**harness.auth(), "Last-Event-ID": opened_id})
    try:
        again = resumed.until(1)
    finally:
        resumed.close()
    assert [(kind, event_id) for kind, event_id, _ in again] == [("approval.decided", events[2][1])]


def test_the_stream_shows_an_agent_what_its_policy_lets_it_read(
    live: httpx.Client, harness: Harness
) -> None:
    # a1's `manager` role allows `approvals.*`; an agent on `narrow` may not list them
    harness.add_agent("n1", "narrow")
    refused = live.get("/v1/approvals/events", headers=harness.auth(harness.token_for("n1")))
    expect(refused, 403, "denied-by-policy")
    expect(live.get("/v1/approvals/events", headers=harness.auth(harness.decide)), 403,
           "insufficient-scope")  # fmt: skip
    expect(live.get("/v1/approvals/events", headers={**harness.auth(), "Last-Event-ID": "x"}),
           400, "bad-last-event-id")  # fmt: skip
    stream = Stream(str(live.base_url), harness.auth(harness.agent_token))
    try:
        assert stream.status == 200
        approval = _pause(live, harness)
        events = stream.until(2)
    finally:
        stream.close()
    assert events[1][0] == "approval.opened" and approval in events[1][2]


def test_a_server_shutting_down_ends_its_streams_and_long_polls(harness: Harness) -> None:
    server = LiveServer(create_app(harness.service))
    with server as url, httpx.Client(base_url=url, timeout=30) as client:
        approval = _pause(client, harness)
        stream = Stream(url, harness.auth())
        waiting = _in_background(client, f"/v1/approvals/{approval}?wait=60", harness.auth())
        stream.until(1)
        time.sleep(0.2)
        began = time.monotonic()
        server.server.should_exit = True
        server.thread.join(10)
        assert not server.thread.is_alive()
        assert time.monotonic() - began < 3  # (not the long poll's 60 s, nor for ever)
        assert stream.ended.wait(3)
        answer, _ = waiting.result(3)
        assert answer.json()["status"] == "pending"
        stream.close()


def test_approvals_opened_elsewhere_drop_nothing_cached_here(
    live: httpx.Client, second: httpx.Client, harness: Harness
) -> None:
    service = harness.service
    service.sync()
    moves = service.read.moves
    _pause(second, harness)
    deadline = time.monotonic() + 2
    while service.store.data_version() == service.read._version and time.monotonic() < deadline:
        time.sleep(0.002)
    assert service.sync() is False
    assert service.read.moves == moves
