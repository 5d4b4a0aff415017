"""`POST /v1/threads/{id}/wait` over a real server: answers at once for a thread that is
not running, when another request ends a running one, and with the running thread at its
timeout; an agent's token waits as the built-in tool `threads.wait`, decided and logged."""

from __future__ import annotations

import threading
import time

import httpx

from tests.api.conftest import BOTH, Harness, expect

STORES = BOTH


def _running(live: httpx.Client, harness: Harness) -> str:
    admin = harness.auth()
    thread: str = live.post("/v1/threads", json={"agent": "a1"}, headers=admin).json()["id"]
    patched = live.patch(f"/v1/threads/{thread}", json={"status": "running"}, headers=admin)
    assert patched.status_code == 200, patched.text
    return thread


def test_an_ended_thread_answers_at_once(live: httpx.Client, harness: Harness) -> None:
    admin = harness.auth()
    thread = live.post("/v1/threads", json={"agent": "a1"}, headers=admin).json()["id"]
    started = time.monotonic()
    waited = live.post(f"/v1/threads/{thread}/wait", json={"timeout": 30}, headers=admin)
    assert waited.status_code == 200, waited.text
    assert waited.json()["status"] == "open" and time.monotonic() - started < 5


def test_a_wait_ends_when_another_request_ends_the_thread(
    live: httpx.Client, harness: Harness
) -> None:
    thread = _running(live, harness)
    own = harness.auth(harness.agent_token)  # `a1`: its role `manager` allows `threads.*`

    def finish() -> None:
        time.sleep(0.5)
        live.patch(f"/v1/threads/{thread}", json={"status": "done"}, headers=harness.auth())

    ender = threading.Thread(target=finish)
    started = time.monotonic()
    ender.start()
    waited = live.post(f"/v1/threads/{thread}/wait", json={"timeout": 30}, headers=own)
    took = time.monotonic() - started
    ender.join()
    assert waited.status_code == 200, waited.text
    assert waited.json()["status"] == "done"
    assert 0.4 < took < 10, took
    logged = live.get("/v1/decisions", headers=harness.auth()).json()["decisions"]
    assert [(d["tool"], d["effect"]) for d in logged] == [("threads.wait", "allow")]


def test_a_wait_times_out_with_the_running_thread(live: httpx.Client, harness: Harness) -> None:
    thread = _running(live, harness)
    started = time.monotonic()
    waited = live.post(f"/v1/threads/{thread}/wait", json={"timeout": 1}, headers=harness.auth())
    assert waited.status_code == 200, waited.text
    assert waited.json()["status"] == "running"
    assert 0.9 < time.monotonic() - started < 10


def test_refusals(live: httpx.Client, harness: Harness) -> None:
    admin = harness.auth()
    thread = _running(live, harness)
    for timeout in (-1, 61, "5", 1.5):
        expect(live.post(f"/v1/threads/{thread}/wait", json={"timeout": timeout}, headers=admin),
               422, "invalid-body")  # fmt: skip
    expect(live.post("/v1/threads/nope/wait", json={"timeout": 0}, headers=admin), 404,
           "thread-not-found")  # fmt: skip
    harness.add_agent("n1", "narrow")  # (its policy grants no `threads.*`)
    mine = live.post("/v1/threads", json={"agent": "n1"}, headers=admin).json()["id"]
    narrow = harness.auth(harness.token_for("n1"))
    expect(live.post(f"/v1/threads/{mine}/wait", json={"timeout": 0}, headers=narrow), 403,
           "denied-by-policy")  # fmt: skip
    expect(live.post(f"/v1/threads/{thread}/wait", json={"timeout": 0}, headers=narrow), 403,
           "not-managed-agent")  # fmt: skip
