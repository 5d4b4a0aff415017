"""What a request reads does not grow with what the database holds.

A serving process answers on one event loop, so a request whose cost grew with the
decision log or the revision history would slow every other one as the service ages
(`bench/soak.py`). Each request of the soak's mix is counted here in SQLite
virtual-machine steps (the store's one connection serves the in-process server, so its
progress handler sees every statement a request runs) on a database, then again once the
log holds ten times the decisions, the history ten times the revisions and the service
ten times the agents: the same
requests take about the same steps. A seek that became a scan, an OFFSET, a COUNT or a
read of every revision would take ten times as many.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from api.service import pages
from api.service.encoding import loads
from policy.store.logread import unpack as _unpack
from policy.store.sqlite import SqliteStore
from tests.api.conftest import Harness

MAIL = {
    "agent": "a1",
    "tool": "mail.send",
    "args": {"to": "bob@example.com", "subject": "hi", "body": "b"},
}
DECISIONS = 2_000  # the log at first; then ten times as many
REVISIONS = 60  # the history at first (more than a page of 50); then ten times as many
AGENTS = 100  # the agents at first; then ten times as many
# A deeper B-tree takes a few more steps per seek: about 20 a level, a level per ~100x.
SLACK = 60


def _store(harness: Harness) -> SqliteStore:
    return harness.sqlite  # (SQLite's VM steps)


def _steps(harness: Harness, request: Callable[[], httpx.Response]) -> int:
    """SQLite VM steps the store's connection takes while `request` is answered (the
    second time it is sent: caches filled by the first)."""
    assert request().status_code in (200, 201)
    count = 0

    def step() -> int:
        nonlocal count
        count += 1
        return 0

    db = _store(harness)._db
    db.set_progress_handler(step, 1)
    try:
        response = request()
    finally:
        db.set_progress_handler(None, 1)
    assert response.status_code in (200, 201), response.text[:300]
    return count


def _grow(
    harness: Harness, runs: list[list[bytes]], decisions: int, revisions: int, agents: int
) -> None:
    """The log, the history and the agents grown to these sizes, written by another
    connection (as another worker writes them): the log by copies of `runs`, the history
    by uploads of the first revision's files with one file changed each time, the agents
    by copies of `a1` under other names."""
    other = SqliteStore(harness.db)
    try:
        first = other.get_revision(1)
        agent = other.get("agents", "a1")
        assert first is not None and agent is not None
        (tag,) = other._db.execute("SELECT tag FROM documents WHERE id = 'a1'").fetchone()
        with other.atomic():
            for n in range(sum(1 for _ in other.scan("agents")), agents):
                other.insert("agents", f"copy-{n}", {**agent, "id": f"copy-{n}"}, tag=tag)
            at = 0
            while other.last_seq() < decisions:
                other.append_decisions(runs[at % len(runs)])
                at += 1
            for n in range(other.latest_revision(), revisions):
                files = [*first["files"], ["extra.charter", f"# upload {n}\n"]]
                other.add_revision({**first, "files": files, "note": f"upload {n}"})
    finally:
        other.close()


def _requests(live: httpx.Client, harness: Harness) -> dict[str, Callable[[], httpx.Response]]:
    admin = harness.auth()
    last = harness.service.store.last_seq()
    latest = harness.service.store.latest_revision()

    def get(path: str) -> Callable[[], httpx.Response]:
        return lambda: live.get(path, headers=admin)

    cursor = pages.encode("revisions", latest - 50)  # (what the page before says)
    return {
        "single": lambda: live.post("/v1/decisions", json=MAIL, headers=admin),
        "batch": lambda: live.post(
            "/v1/decisions/batch", json={"calls": [MAIL] * 20}, headers=admin
        ),
        "log page at the start": get("/v1/decisions?after_seq=0&limit=100"),
        "log page near the end": get(f"/v1/decisions?after_seq={last - 1_000}&limit=100"),
        "agents": get("/v1/agents?limit=50"),
        "revisions, first page": get("/v1/revisions?limit=50"),
        "revisions, last page": get(f"/v1/revisions?limit=50&cursor={cursor}"),
        "tools": get("/v1/agents/a1/tools"),
    }


def test_no_request_reads_more_as_the_log_history_and_agents_grow(
    live: httpx.Client, harness: Harness
) -> None:
    admin = harness.auth()
    for _ in range(5):  # real rows: singles, and a batch's run of 20
        assert live.post("/v1/decisions", json=MAIL, headers=admin).status_code == 200
    batch = {"calls": [MAIL] * 20}
    assert live.post("/v1/decisions/batch", json=batch, headers=admin).status_code == 200
    store = _store(harness)
    runs = [
        _unpack(count, body, 0, count)
        for count, body in store._db.execute("SELECT count, body FROM decisions ORDER BY seq")
    ]
    assert [len(run) for run in runs] == [1] * 5 + [20]
    assert all(loads(row)["effect"] == "allow" for run in runs for row in run)

    _grow(harness, runs, DECISIONS, REVISIONS, AGENTS)
    before = {name: _steps(harness, request) for name, request in _requests(live, harness).items()}
    _grow(harness, runs, 10 * DECISIONS, 10 * REVISIONS, 10 * AGENTS)
    after = {name: _steps(harness, request) for name, request in _requests(live, harness).items()}

    assert store.last_seq() >= 10 * DECISIONS and store.latest_revision() == 10 * REVISIONS
    grew = {
        name: (before[name], after[name]) for name in before if after[name] > before[name] + SLACK
    }
    assert not grew, f"steps (before, after) of the requests that read more: {grew}"
