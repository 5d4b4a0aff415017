"""What an agent's token reads of approvals: `approvals.get` is decided with the approval as
`context.approval`, and `approvals.list` shows the approvals that `approvals.get` would be
allowed for, in pages that never skip or repeat one and read a bounded number of rows."""

from __future__ import annotations

from typing import Any

import pytest

from api.service import approvals
from tests.api.conftest import POLICY, Harness, code_of, depth_spy, expect

# `watch`: lists, and reads x's approvals alone; `literal`: the same `where` on both tools
# (the list request has no approval: the condition errors, which never grants); `own`:
# reads the approvals of its own calls, and makes refunds that pause.
VIEWS = """
role watcher {
  allow approvals.list
  allow approvals.get where context.approval.agent == "x"
}
role literal-watcher {
  allow approvals.get, approvals.list where context.approval.agent == "x"
}
role own-approvals {
  allow approvals.list
  allow approvals.get where context.approval.agent == agent.id
}
hook clamp-list on approvals.list {
  rewrite args.limit = 500
}
profile watch {
  roles watcher
  hooks none
}
profile literal {
  roles literal-watcher
  hooks none
}
profile own {
  roles own-approvals, refunder
  hooks approve-big
}
profile clamped {
  roles watcher
  hooks clamp-list
}
"""


def _agent(live: Any, harness: Harness, name: str, profile: str) -> dict[str, str]:
    """A new agent's token headers; its identity its own, as a reviewer's would be."""
    identity = live.post("/v1/identities", json={}, headers=harness.auth()).json()["id"]
    return harness.auth(harness.token_for(harness.add_agent(name, profile, identity=identity)))


def _setup(live: Any, harness: Harness) -> None:
    put = live.put("/v1/policy", content=POLICY + VIEWS, headers=harness.auth())
    assert put.status_code == 201, put.text
    harness.add_agent("x", "support")


def _pauses(live: Any, harness: Harness, agents: list[str]) -> list[str]:
    """One paused refund for each of `agents`, in that order: their approvals' ids."""
    calls = [{"agent": a, "tool": "billing.refund", "args": {"amount": 80}} for a in agents]
    made = live.post("/v1/decisions/batch", json={"calls": calls}, headers=harness.auth())
    assert made.status_code == 200, made.text
    return [str(d["approval_id"]) for d in made.json()["decisions"]]


def _of(ids: list[str], agents: list[str], agent: str) -> list[str]:
    return [i for i, a in zip(ids, agents, strict=True) if a == agent]


def _read_all(
    live: Any, harness: Harness, token: dict[str, str], **query: Any
) -> tuple[list[str], list[int]]:
    """Every page of `GET /v1/approvals` with `query`: (the ids shown, each page's size);
    each page logs exactly one decision, the list request's own."""
    shown: list[str] = []
    sizes: list[int] = []
    cursor = None
    while True:
        logged = harness.service.store.last_seq()
        params = {**query, **({"cursor": cursor} if cursor else {})}
        page = live.get("/v1/approvals", params=params, headers=token)
        assert page.status_code == 200, page.text
        assert harness.service.store.last_seq() == logged + 1
        shown += [item["id"] for item in page.json()["items"]]
        sizes.append(len(page.json()["items"]))
        cursor = page.json()["next_cursor"]
        if cursor is None:
            return shown, sizes


def test_a_policy_narrows_which_approvals_an_agent_gets_and_lists(
    live: Any, harness: Harness
) -> None:
    """`approvals.get` is decided with the approval's facts, as approve and reject are; the
    list shows what it would allow. A `where` over `context.approval` on `approvals.list`
    itself does not grant the list (it reads no one approval), whatever it grants `get`."""
    _setup(live, harness)
    watch = _agent(live, harness, "w", "watch")
    literal = _agent(live, harness, "lit", "literal")
    agents = ["x", "a1", "x", "a1", "a1"]
    ids = _pauses(live, harness, agents)
    for token in (watch, literal):
        for approval, agent in zip(ids, agents, strict=True):
            got = live.get(f"/v1/approvals/{approval}", headers=token)
            if agent == "x":
                assert got.status_code == 200 and got.json()["id"] == approval, got.text
            else:
                assert code_of(got) == (403, "denied-by-policy"), got.text
    listed = live.get("/v1/approvals", headers=watch).json()
    assert [item["id"] for item in listed["items"]] == _of(ids, agents, "x")
    assert listed["next_cursor"] is None
    refused = live.get("/v1/approvals", headers=literal)
    assert code_of(refused) == (403, "denied-by-policy")
    assert "`context` is not available" in refused.text
    logged = harness.service.store.last_seq()
    expect(live.get("/v1/approvals/nope", headers=watch), 404, "approval-not-found")
    assert harness.service.store.last_seq() == logged  # refused before it is decided


def test_pages_never_skip_or_repeat_and_read_a_bounded_number_of_rows(
    live: Any, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filter that hides most rows: pages may be short, empty even, with a cursor past
    what they read; together they show each of x's approvals once, in order, those added
    while paging at the end. Each page decides at most SCANNED_PER_ITEM * limit of them,
    none logged."""
    _setup(live, harness)
    watch = _agent(live, harness, "w", "watch")
    agents = ["a1"] * 9 + ["x"] + ["a1"] * 20 + ["x", "x"] + ["a1"] * 30 + ["x"]
    ids = _pauses(live, harness, agents)
    decided: list[int] = []
    real = approvals.readable

    def counted(service: Any, agent: str, rows: list[Any]) -> list[bool]:
        decided.append(len(rows))
        return real(service, agent, rows)

    monkeypatch.setattr(approvals, "readable", counted)
    limit = 2
    shown: list[str] = []
    cursor = None
    sizes = []
    for turn in range(100):
        before = len(decided)
        params: dict[str, Any] = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        page = live.get("/v1/approvals", params=params, headers=watch).json()
        assert sum(decided[before:]) <= approvals.SCANNED_PER_ITEM * limit
        shown += [item["id"] for item in page["items"]]
        sizes.append(len(page["items"]))
        cursor = page["next_cursor"]
        if turn == 1:  # added while paging: after what was read so far
            later = ["a1", "x", "a1"]
            ids += _pauses(live, harness, later)
            agents += later
        if cursor is None:
            break
    assert shown == _of(ids, agents, "x")
    assert 0 in sizes[:-1]  # a page that read only hidden rows, and went on
    assert all(size <= limit for size in sizes)
    assert _read_all(live, harness, watch, limit=limit)[0] == shown  # one decision a page
    # `?status=` too: a list of its own, narrowed the same way
    first = _of(ids, agents, "x")[0]
    closed = live.post(f"/v1/approvals/{first}/reject", json={}, headers=harness.auth())
    assert closed.status_code == 200, closed.text
    pending, _ = _read_all(live, harness, watch, status="pending", limit=1)
    assert pending == _of(ids, agents, "x")[1:]
    assert _read_all(live, harness, watch, status="rejected", limit=1)[0] == [first]


def test_an_unrestricted_grant_lists_every_approval_as_before(live: Any, harness: Harness) -> None:
    """`allow approvals.*` (a1's `manager`): the same pages as an admin's, cursors too."""
    harness.add_agent("x", "support")
    agents = ["x", "a1"] * 4 + ["x"]
    ids = _pauses(live, harness, agents)
    agent = harness.auth(harness.agent_token)
    for query in ({"limit": 3}, {"limit": 1, "status": "pending"}, {}):
        cursor = None
        while True:
            params = {**query, **({"cursor": cursor} if cursor else {})}
            mine = live.get("/v1/approvals", params=params, headers=agent)
            theirs = live.get("/v1/approvals", params=params, headers=harness.auth())
            assert mine.status_code == 200 and mine.json() == theirs.json(), mine.text
            cursor = mine.json()["next_cursor"]
            if cursor is None:
                break
    assert _read_all(live, harness, agent, limit=4)[0] == ids


def test_an_agent_reads_its_own_pauses_only_where_its_policy_says_so(
    live: Any, harness: Harness
) -> None:
    """No built-in grant (roles are the only source of access): `own`'s role lets it poll
    the approval its own refund opened, and no other."""
    _setup(live, harness)
    own = _agent(live, harness, "o", "own")
    refund = {"agent": "o", "tool": "billing.refund", "args": {"amount": 80}}
    paused = live.post("/v1/decisions", json=refund, headers=own).json()
    mine = paused["approval_id"]
    (theirs,) = _pauses(live, harness, ["x"])
    assert live.get(f"/v1/approvals/{mine}", headers=own).json()["status"] == "pending"
    assert code_of(live.get(f"/v1/approvals/{theirs}", headers=own)) == (403, "denied-by-policy")
    approved = live.post(f"/v1/approvals/{mine}/approve", headers=harness.auth())
    assert approved.status_code == 200, approved.text
    polled = live.get(f"/v1/approvals/{mine}", headers=own).json()
    assert (polled["status"], polled["final"]["effect"]) == ("approved", "allow")
    assert [item["id"] for item in live.get("/v1/approvals", headers=own).json()["items"]] == [mine]


def test_an_agents_list_is_refused_before_it_is_decided_and_read_after_its_commit(
    live: Any, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A status, cursor or limit the list does not take is refused before the request is
    decided (nothing logged), a rewrite hook's too (before the COMMIT); an allowed page
    decides its rows outside the write transaction, which every decision waits on."""
    _setup(live, harness)
    watch = _agent(live, harness, "w", "watch")
    clamped = _agent(live, harness, "c", "clamped")
    _pauses(live, harness, ["x", "a1"])
    logged = harness.service.store.last_seq()
    for query, code in (({"status": "open"}, "invalid-status"), ({"cursor": "junk"}, "bad-cursor"),
                        ({"limit": 0}, "bad-limit")):  # fmt: skip
        expect(live.get("/v1/approvals", params=query, headers=watch), 400, code)
    expect(live.get("/v1/approvals", headers=clamped), 400, "bad-limit")
    assert harness.service.store.last_seq() == logged
    depths: list[int] = []
    monkeypatch.setattr(
        approvals, "readable", depth_spy(harness.service.store, approvals.readable, depths)
    )
    assert len(live.get("/v1/approvals", headers=watch).json()["items"]) == 1
    assert depths == [0]
