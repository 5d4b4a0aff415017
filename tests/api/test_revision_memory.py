"""No memory kept per policy revision: a serving process holds a bounded number of them.

Over a real server (uvicorn on loopback, in this process) every kind of request that
reaches a snapshot is made on each of many revisions: decisions (singles, batches, with
and without a thread), a turn, listings of an agent's tools, log pages, revisions. The
snapshots of revisions that left the snapshot cache must then be freed, by reference
counting alone (the collector is off: a serving process runs its full collection rarely,
see `api.http.app.tune_gc`), so whatever cache or list still held one fails the test.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from api.http.app import create_app
from api.service.snapshots import CACHE_SIZE
from engine.collector import collector_paused
from tests.api.conftest import POLICY, Harness, LiveServer

UPLOADS = CACHE_SIZE * 3


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    with collector_paused():
        yield


def _use(client: httpx.Client, harness: Harness, revision: int) -> None:
    """Every request of the mix that reaches the latest snapshot, each answered."""
    admin = harness.auth()
    call: dict[str, Any] = {"agent": "a1", "tool": "mail.send",
                            "args": {"to": "b@example.com", "subject": "s", "body": "b"}}  # fmt: skip
    tool = {**call, "tool": "billing.refund", "args": {"amount": revision}}
    thread = client.post("/v1/threads", json={"agent": "a1"}, headers=admin).json()["id"]
    turn = client.post("/v1/turns", json={"agent": "a1"}, headers=admin).json()["id"]
    # (a call naming a connection made once: a key of the service's step-6 cache that no
    # later call reuses)
    once = {**call, "connection": f"c{revision}"}
    for body in (call, tool, once, {**call, "thread": thread}, {**call, "turn": turn}):
        answer = client.post("/v1/decisions", json=body, headers=harness.auth(harness.decide))
        assert answer.status_code == 200, answer.text
        assert answer.json()["revision"] == revision
    batch = client.post("/v1/decisions/batch", json={"calls": [call, tool] * 5}, headers=admin)
    assert batch.status_code == 200, batch.text
    for path in ("/v1/agents/a1/tools", "/v1/decisions?limit=20", "/v1/revisions",
                 "/v1/roles", "/v1/profiles"):  # fmt: skip
        assert client.get(path, headers=admin).status_code == 200, path


def test_old_revisions_are_freed_by_reference_counting(
    harness: Harness, collector_off: None
) -> None:
    service = harness.service
    watched: dict[int, weakref.ref[Any]] = {}
    with (
        LiveServer(create_app(service)) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        for number in range(UPLOADS):
            text = f"{POLICY}\n# revision {number}\n"
            put = client.put("/v1/policy", content=text, headers=harness.auth())
            assert put.status_code == 201, put.text
            revision = put.json()["revision"]
            _use(client, harness, revision)
            watched[revision] = weakref.ref(service.snapshots.get(revision))
        alive = sorted(revision for revision, ref in watched.items() if ref() is not None)
    # The snapshot cache's revisions, and at most a few the last requests still held.
    assert len(alive) <= CACHE_SIZE + 2, alive
    assert alive[0] > UPLOADS - CACHE_SIZE - 2, alive
