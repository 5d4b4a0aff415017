"""/readyz over a real server: not ready while the database file the store writes is no
longer the one at its path (removed, renamed or replaced), ready again once it is; not
ready while the latest revision is not compiled in the serving process (its compile
started in the background, once) or does not check with this version of charter."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import Any

import httpx

from api.http.app import create_app
from api.service.core import Service
from tests.api.conftest import POLICY, Harness, LiveServer, opened_again

CALL = {"agent": "a1", "tool": "mail.send",
        "args": {"to": "b@example.com", "subject": "s", "body": "b"}}  # fmt: skip


def test_readyz_is_not_ready_while_the_database_file_is_moved_or_removed(
    live: httpx.Client, harness: Harness
) -> None:
    assert live.get("/readyz").json() == {"status": "ready", "revision": 1}
    moved = harness.file.with_name("moved.db")
    os.rename(harness.file, moved)
    # SQLite still commits to the file it opened, which a restart at the path never reads.
    assert live.post("/v1/decisions", json=CALL, headers=harness.auth()).status_code == 200
    answer = live.get("/readyz")
    assert answer.status_code == 503
    assert answer.json() == {
        "status": "unavailable",
        "reason": "the database file was removed or replaced since it was opened",
    }
    assert live.get("/healthz").status_code == 200  # alive all the same
    os.rename(moved, harness.file)  # put back: the same file, ready again
    assert live.get("/readyz").status_code == 200
    copy = harness.file.with_name("copy.db")
    copy.write_bytes(harness.file.read_bytes())
    os.replace(copy, harness.file)  # a copy in its place: another file
    assert live.get("/readyz").status_code == 503
    harness.file.unlink()  # removed
    assert live.get("/readyz").status_code == 503


def ready_after(live: httpx.Client, compiling: str) -> httpx.Response:
    """Probes until /readyz says something else than `compiling` (each probe answers at
    once; the compile runs on a thread of its own): that answer."""
    deadline = time.monotonic() + 30
    while True:
        answer = live.get("/readyz")
        if answer.json().get("reason") != compiling:
            return answer
        assert time.monotonic() < deadline, "the revision never finished compiling"
        time.sleep(0.01)


def test_readyz_is_not_ready_until_another_process_upload_is_compiled_here(
    live: httpx.Client, harness: Harness, other: Service
) -> None:
    """Ready means this process can decide now: a revision uploaded elsewhere is 503
    "compiling" until the probe's own compile is done, without any decision made."""
    seq = harness.service.store.last_seq()
    revision = other.upload([("policy.charter", POLICY + "\nrole spare {\n}\n")], "t").revision
    compiling = {"status": "unavailable", "reason": f"compiling revision {revision}"}
    first = live.get("/readyz")
    assert (first.status_code, first.json()) == (503, compiling)
    answer = ready_after(live, compiling["reason"])
    assert (answer.status_code, answer.json()) == (200, {"status": "ready", "revision": revision})
    assert harness.service.store.last_seq() == seq  # no decision made (nor logged)


def test_many_probes_start_one_compile(
    live: httpx.Client, harness: Harness, other: Service
) -> None:
    """Probes that come while the revision compiles all answer 503 at once (the compile is
    held up here until they have), and start no compile of their own."""
    revision = other.upload([("policy.charter", POLICY + "\nrole spare {\n}\n")], "t").revision
    started: list[int] = []
    released: list[bool] = []  # (False: a probe waited for the compile it held up)
    release = threading.Event()

    def held(compiling: int) -> None:
        started.append(compiling)
        released.append(release.wait(30))

    harness.service.snapshots.on_background_compile.append(held)
    try:
        answers = [live.get("/readyz") for _ in range(20)]
    finally:
        release.set()
    assert {(a.status_code, a.json()["reason"]) for a in answers} == {
        (503, f"compiling revision {revision}")
    }
    assert ready_after(live, f"compiling revision {revision}").status_code == 200
    assert started == [revision] and released == [True]


def test_readyz_says_the_latest_revision_does_not_check(
    live: httpx.Client, harness: Harness, other: Service
) -> None:
    """A stored revision this charter reads otherwise (simulated: text that does not check,
    stored as it was): every decision on it would fail, so the process is not ready."""
    body = {"files": [["policy.charter", POLICY + "\nrole broken {\n  allow nope.nothing\n}\n"]],
            "author": "old charter", "note": "", "created_at": 0, "summary": {}}  # fmt: skip
    revision = other.store.add_revision(body)
    answer = ready_after(live, f"compiling revision {revision}")
    assert answer.status_code == 503
    assert answer.json() == {
        "status": "unavailable",
        "reason": f"revision {revision} does not check with this version of charter",
    }
    assert live.get("/readyz").json() == answer.json()  # known: not compiled again


def test_a_serving_process_compiles_the_latest_revision_as_its_app_is_built(
    harness: Harness,
) -> None:
    """`charter serve` (create_app) and each of `--workers N` (app_from_env, which calls
    it) start compiling the latest revision before any request, so a worker is usually
    ready by the time it is probed."""
    with opened_again(
        harness.db, harness.key_file
    ) as service:  # (nothing compiled in this process yet)
        begun = threading.Event()
        service.snapshots.on_background_compile.append(lambda revision: begun.set())
        app = create_app(service)
        assert begun.wait(30)  # no request made
        with LiveServer(app) as url, httpx.Client(base_url=url, timeout=30) as live:
            answer = ready_after(live, "compiling revision 1")
            assert answer.json() == {"status": "ready", "revision": 1}


class _Disk:
    """The store's cursor, but every COMMIT fails as SQLite's does on a full disk while
    `full` (its transaction rolled back), or as on another writer's lock while `busy`."""

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor
        self.full = self.busy = False

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "COMMIT" and (self.full or self.busy):
            name, code = ("SQLITE_FULL", 13) if self.full else ("SQLITE_BUSY", 5)
            failed = sqlite3.OperationalError(name)
            failed.sqlite_errorcode = code
            failed.sqlite_errorname = name
            raise failed
        return self.cursor.execute(sql, *args)


def test_readyz_says_the_store_cannot_write_until_a_write_succeeds(
    client: Any, harness: Harness
) -> None:
    """Without a disk to fill (tests/api/test_start_safety.py fills a real tmpfs): commits
    that fail as on a full disk make /readyz 503 `store-cannot-write`, and its own write
    fails too while they do; once commits succeed, the next probe's write succeeds and it
    is 200, no decision needed. A busy lock is not a store that cannot write."""
    store = harness.sqlite  # (its cursor or its timeout is set here)
    disk = _Disk(store._cursor)
    store._cursor = disk  # type: ignore[assignment]
    try:
        assert client.get("/readyz").status_code == 200
        disk.busy = True
        busy = client.post("/v1/decisions", json=CALL, headers=harness.auth())
        assert (busy.status_code, busy.json()["code"]) == (503, "store-unavailable")
        assert client.get("/readyz").status_code == 200
        disk.busy, disk.full = False, True
        full = client.post("/v1/decisions", json=CALL, headers=harness.auth())
        assert (full.status_code, full.json()["code"]) == (503, "store-unavailable")
        for _ in range(2):  # (the probe's own write fails as well)
            answer = client.get("/readyz")
            assert (answer.status_code, answer.json()) == (503, {
                "status": "unavailable", "code": "store-cannot-write",
                "reason": "the last write failed: the disk is full (SQLITE_FULL)",
            })  # fmt: skip
        seq = store.last_seq()
        disk.full = False
        assert client.get("/readyz").json() == {"status": "ready", "revision": 1}
        assert store.last_seq() == seq  # (its write is no decision)
        decided = client.post("/v1/decisions", json=CALL, headers=harness.auth())
        assert (decided.status_code, decided.json()["seq"]) == (200, seq + 1)
    finally:
        store._cursor = disk.cursor
