"""/readyz over a real server: not ready while the database file the store writes is no
longer the one at its path (removed, renamed or replaced), ready again once it is."""

from __future__ import annotations

import os

import httpx

from tests.api.conftest import Harness

CALL = {"agent": "a1", "tool": "mail.send",
        "args": {"to": "b@example.com", "subject": "s", "body": "b"}}  # fmt: skip


def test_readyz_is_not_ready_while_the_database_file_is_moved_or_removed(
    live: httpx.Client, harness: Harness
) -> None:
    assert live.get("/readyz").json() == {"status": "ready", "revision": 1}
    moved = harness.db.with_name("moved.db")
    os.rename(harness.db, moved)
    # SQLite still commits to the file it opened, which a restart at the path never reads.
    assert live.post("/v1/decisions", json=CALL, headers=harness.auth()).status_code == 200
    answer = live.get("/readyz")
    assert answer.status_code == 503
    assert answer.json() == {
        "status": "unavailable",
        "reason": "the database file was removed or replaced since it was opened",
    }
    assert live.get("/healthz").status_code == 200  # alive all the same
    os.rename(moved, harness.db)  # put back: the same file, ready again
    assert live.get("/readyz").status_code == 200
    copy = harness.db.with_name("copy.db")
    copy.write_bytes(harness.db.read_bytes())
    os.replace(copy, harness.db)  # a copy in its place: another file
    assert live.get("/readyz").status_code == 503
    harness.db.unlink()  # removed
    assert live.get("/readyz").status_code == 503
