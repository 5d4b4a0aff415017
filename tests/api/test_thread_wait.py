"""`POST /v1/threads/{id}/wait` over a real server: answers at once for a thread that is
not running, when another request ends a running one, when another process does, and
with the running thread at its timeout; many waiters share one look at the store; an
agent's token waits as the built-in tool `threads.wait`, decided and logged."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from api import commands as c
from api.http.app import open_service
from api.http.threadwait import RECHECK
from api.http.versionwatch import POLL
from api.service.threads import threads_update
from api.service.tokens import Principal
from policy.store.sqlite import SqliteStore
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


def test_a_wait_ends_when_another_process_ends_the_thread(
    live: httpx.Client, harness: Harness
) -> None:
    """Another process (a service of its own on the same database) ends the thread: on
    SQLite the store's data version moves and the version watch wakes the wait within a
    look or two; on PostgreSQL, whose data version shows only the change feed's moves,
    the wait's own read every RECHECK seconds sees it."""
    thread = _running(live, harness)
    other = open_service(harness.db, key_file=harness.key_file)
    ended: list[float] = []

    def finish() -> None:
        time.sleep(0.5)
        threads_update(other, Principal("other", "admin"), c.UpdateThread(id=thread, status="done"))
        ended.append(time.monotonic())

    ender = threading.Thread(target=finish)
    try:
        ender.start()
        waited = live.post(f"/v1/threads/{thread}/wait", json={"timeout": 30},
                           headers=harness.auth())  # fmt: skip
        answered = time.monotonic()
        ender.join()
    finally:
        other.store.close()
    assert waited.status_code == 200, waited.text
    assert waited.json()["status"] == "done"
    bound = 6 * POLL if isinstance(harness.service.store, SqliteStore) else RECHECK + 0.5
    assert answered - ended[0] < bound, answered - ended[0]


def test_waiters_share_one_look_at_the_store(live: httpx.Client, harness: Harness) -> None:
    """40 waits of a running thread: while they wait, the store's data version is read
    about once a POLL for all of them, not once a POLL for each."""
    thread = _running(live, harness)
    store = harness.service.store
    reads = [0]
    read_version = store.data_version

    def counted() -> int:
        reads[0] += 1
        return read_version()

    store.data_version = counted  # type: ignore[method-assign]
    try:
        with ThreadPoolExecutor(40) as pool:
            path, body, admin = f"/v1/threads/{thread}/wait", {"timeout": 3}, harness.auth()
            waits = [pool.submit(live.post, path, json=body, headers=admin) for _ in range(40)]
            time.sleep(1.0)  # (every request decided and waiting)
            before, started = reads[0], time.monotonic()
            time.sleep(1.0)
            looks, took = reads[0] - before, time.monotonic() - started
            answers = [wait.result() for wait in waits]
    finally:
        del store.data_version
    assert all(a.status_code == 200 and a.json()["status"] == "running" for a in answers)
    assert looks <= took / POLL + 3, looks  # (40 waiters reading for themselves: ~400)


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
