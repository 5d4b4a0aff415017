"""A thread's events over a real server (`GET /v1/threads/{id}/events`): what happened on
it in order (created, a turn, calls decided with their log seq and cost, an approval asked
and answered, a cost reported, its status), read by pages, by the tokens that reach the
thread, as the built-in tool `threads.events`; written in the transaction of what they
tell (a rolled-back one leaves none), and gone with their thread."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api import commands as c
from api.service import threadevents
from api.service.calls import Call
from api.service.decide import decide_calls
from api.service.manage import manage
from api.service.resources import admit_turn
from api.service.threads import threads_create, threads_update
from api.service.tokens import Principal
from tests.api.conftest import BOTH, Harness, expect

STORES = BOTH
READER = """
role thread-reader {
  allow threads.get, threads.events
}
profile reader {
  roles mailer, thread-reader
  hooks none
}
"""


def _events(live: httpx.Client, thread: str, headers: dict[str, str], limit: int = 2) -> list[Any]:
    """Every event of `thread`, read `limit` at a time."""
    seen: list[Any] = []
    cursor = None
    while True:
        params = {"limit": str(limit), **({"cursor": cursor} if cursor else {})}
        page = live.get(f"/v1/threads/{thread}/events", params=params, headers=headers)
        assert page.status_code == 200, page.text
        assert len(page.json()["items"]) <= limit
        seen += page.json()["items"]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            return seen


def _decide(live: httpx.Client, harness: Harness, thread: str, **call: Any) -> dict[str, Any]:
    answer = live.post(
        "/v1/decisions", headers=harness.auth(harness.decide),
        json={"agent": "a1", "thread": thread, **call},
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def test_a_threads_history_in_order(live: httpx.Client, harness: Harness) -> None:
    admin = harness.auth()
    made = live.post("/v1/threads", json={"agent": "a1", "max_cost": "3"}, headers=admin)
    assert made.status_code == 201, made.text
    thread = made.json()["id"]
    turn = live.post("/v1/turns", json={"agent": "a1", "thread": thread}, headers=admin)
    assert turn.status_code in (200, 201), turn.text
    mail = {"to": "bob@example.com", "subject": "s", "body": "b"}
    sent = _decide(live, harness, thread, tool="mail.send", args=mail, expected_cost="0.25",
                   turn=turn.json()["id"])  # fmt: skip
    denied = _decide(live, harness, thread, tool="mail.send", args={**mail, "to": "x@evil.test"})
    paused = _decide(live, harness, thread, tool="billing.refund", args={"amount": 80})
    assert (sent["effect"], denied["effect"], paused["effect"]) == ("allow", "deny", "pause")
    approved = live.post(f"/v1/approvals/{paused['approval_id']}/approve", headers=admin)
    assert approved.status_code == 200, approved.text
    after = approved.json()["decision"]
    cost = live.post(f"/v1/decisions/{sent['id']}/cost", headers=harness.auth(harness.decide),
                     json={"seq": sent["seq"], "amount": "0.5"})  # fmt: skip
    assert cost.status_code in (200, 201), cost.text
    for status in ("running", "waiting", "done"):
        changed = live.patch(f"/v1/threads/{thread}", json={"status": status}, headers=admin)
        assert changed.status_code == 200, changed.text
    unchanged = live.patch(f"/v1/threads/{thread}", json={"status": "done"}, headers=admin)
    assert unchanged.status_code == 200  # (no change: no event)

    events = _events(live, thread, admin)
    assert [e["event"] for e in events] == [
        "created", "turn", "call", "call", "call", "approval", "call", "cost",
        "status", "status", "status",
    ]  # fmt: skip
    assert all(e["thread"] == thread for e in events)
    ats = [e["at"] for e in events]
    assert ats == sorted(ats)
    created, admitted, c1, c2, c3, answer, c4, charged, *statuses = events
    assert created["agent"] == "a1" and created["max_cost"] == "3"
    assert created["by"].startswith("token:")
    assert admitted["turn"] == turn.json()["id"]
    assert admitted["revision"] == turn.json()["revision"]
    assert admitted["profile"] == "support"
    assert (c1["tool"], c1["effect"], c1["seq"], c1["decision"], c1["charged"]) == (
        "mail.send", "allow", sent["seq"], sent["id"], "0.25"
    )  # fmt: skip
    assert c1["turn"] == turn.json()["id"]
    assert (c2["effect"], c2["seq"], "charged" in c2) == ("deny", denied["seq"], False)
    assert (c3["effect"], c3["approval"], c3["seq"]) == (
        "pause",
        paused["approval_id"],
        paused["seq"],
    )
    assert (answer["approval"], answer["status"], answer["tool"]) == (
        paused["approval_id"], "approved", "billing.refund"
    )  # fmt: skip
    assert (c4["effect"], c4["seq"], c4["approval"]) == (
        "allow",
        after["seq"],
        paused["approval_id"],
    )
    assert (charged["decision"], charged["seq"], charged["charged"]) == (
        sent["id"],
        sent["seq"],
        "0.5",
    )
    assert [(s["was"], s["status"]) for s in statuses] == [
        ("open", "running"), ("running", "waiting"), ("waiting", "done")
    ]  # fmt: skip
    # a call event's seq opens its row of the log
    row = live.get("/v1/decisions", params={"after_seq": c1["seq"] - 1, "limit": "1"},
                   headers=admin).json()["decisions"][0]  # fmt: skip
    assert row["id"] == sent["id"] and row["thread"] == thread
    # one page of all, the same events
    path = f"/v1/threads/{thread}/events"
    whole = live.get(path, params={"limit": "200"}, headers=admin).json()
    assert whole["items"] == events and whole["next_cursor"] is None
    # following the thread: its tail reads nothing until something happens, then just that
    tail = whole["tail_cursor"]
    caught_up = live.get(path, params={"cursor": tail}, headers=admin).json()
    assert caught_up == {"items": [], "next_cursor": None, "tail_cursor": tail}
    assert live.patch(f"/v1/threads/{thread}", json={"status": "failed"},
                      headers=admin).status_code == 200  # fmt: skip
    since = live.get(path, params={"cursor": tail}, headers=admin).json()
    assert [(e["event"], e["status"]) for e in since["items"]] == [("status", "failed")]
    assert since["next_cursor"] is None and since["tail_cursor"] not in (None, tail)


def test_a_batch_gives_each_of_its_calls_an_event_on_its_thread(
    live: httpx.Client, harness: Harness
) -> None:
    """A batch's calls in two threads, interleaved: each thread has one `call` event per
    call of its own, in the batch's order, each naming its decision and seq."""
    admin = harness.auth()
    threads = []
    for _ in range(2):
        made = live.post("/v1/threads", json={"agent": "a1"}, headers=admin)
        assert made.status_code == 201, made.text
        threads.append(made.json()["id"])
    mail = {"to": "bob@example.com", "subject": "s", "body": "b"}
    calls = [
        {"agent": "a1", "tool": "mail.send", "thread": threads[i % 2],
         "args": mail if i % 3 else {**mail, "to": "x@evil.test"}}
        for i in range(7)
    ]  # fmt: skip
    answer = live.post(
        "/v1/decisions/batch", json={"calls": calls}, headers=harness.auth(harness.decide)
    )
    assert answer.status_code == 200, answer.text
    decisions = answer.json()["decisions"]
    for n, thread in enumerate(threads):
        events = [e for e in _events(live, thread, admin, limit=3) if e["event"] == "call"]
        mine = decisions[n::2]
        assert [(e["decision"], e["seq"], e["effect"]) for e in events] == [
            (d["id"], d["seq"], d["effect"]) for d in mine
        ]
        assert {e["effect"] for e in events} == {"allow", "deny"}
    assert len({d["id"] for d in decisions}) == 7


def test_who_reads_a_threads_events(live: httpx.Client, harness: Harness) -> None:
    from tests.api.conftest import POLICY

    with harness.service.store.atomic():
        harness.service.upload([("policy.charter", POLICY), ("reader.charter", READER)], "t")
    harness.add_agent("r1", "reader")
    harness.add_agent("r2", "reader")
    r1, r2 = harness.auth(harness.token_for("r1")), harness.auth(harness.token_for("r2"))
    own = live.post("/v1/threads", json={}, headers=r1)
    assert own.status_code == 403  # (threads.create is not granted: denied, logged)
    thread = live.post("/v1/threads", json={"agent": "r1"}, headers=harness.auth()).json()["id"]
    path = f"/v1/threads/{thread}/events"
    read = live.get(path, headers=r1)
    assert read.status_code == 200, read.text
    assert [e["event"] for e in read.json()["items"]] == ["created"]
    expect(live.get(path, headers=r2), 403, "not-managed-agent")
    # a1's profile grants threads.* (`manager`) but r1's thread is not a1's
    expect(live.get(path, headers=harness.auth(harness.agent_token)), 403, "not-managed-agent")
    expect(live.get("/v1/threads/nope/events", headers=r1), 404, "thread-not-found")
    expect(live.get(path, headers=harness.auth(harness.decide)), 403, "insufficient-scope")
    # decided as the tool, and logged
    log = live.get("/v1/decisions", params={"limit": "1000"}, headers=harness.auth()).json()
    assert any(row["tool"] == "threads.events" and row["agent"] == "r1" for row in log["decisions"])
    # an agent whose policy does not grant it is denied
    a1_thread = live.post("/v1/threads", json={}, headers=harness.auth(harness.agent_token))
    assert a1_thread.status_code == 201, a1_thread.text
    a1_path = f"/v1/threads/{a1_thread.json()['id']}/events"
    assert live.get(a1_path, headers=harness.auth(harness.agent_token)).status_code == 200
    # bad cursors and limits; another thread's cursor is another list's
    expect(live.get(path, params={"cursor": "x!"}, headers=r1), 400, "bad-cursor")
    expect(live.get(path, params={"limit": "0"}, headers=r1), 400, "bad-limit")
    expect(live.get(path, params={"limit": "201"}, headers=r1), 400, "bad-limit")
    for n in range(3):
        live.patch(f"/v1/threads/{a1_thread.json()['id']}",
                   json={"status": ("running", "done", "failed")[n]}, headers=harness.auth())  # fmt: skip
    first = live.get(a1_path, params={"limit": "1"}, headers=harness.auth()).json()
    assert first["next_cursor"] is not None
    expect(live.get(path, params={"cursor": first["next_cursor"]}, headers=harness.auth()),
           400, "bad-cursor")  # fmt: skip


def test_events_commit_with_what_they_tell(live: httpx.Client, harness: Harness) -> None:
    admin = harness.auth()
    thread = live.post("/v1/threads", json={"agent": "a1"}, headers=admin).json()["id"]
    service = harness.service
    with pytest.raises(RuntimeError), service.store.atomic():
        threads_update(service, Principal("t", "admin"), c.UpdateThread(id=thread, status="done"))
        raise RuntimeError("rolled back")
    assert live.get(f"/v1/threads/{thread}", headers=admin).json()["status"] == "open"
    assert [e["event"] for e in _events(live, thread, admin)] == ["created"]
    # deleted with its thread
    assert live.delete(f"/v1/threads/{thread}", headers=admin).status_code == 204
    assert list(service.store.scan(threadevents.KIND, tag=thread)) == []
    expect(live.get(f"/v1/threads/{thread}/events", headers=admin), 404, "thread-not-found")


# ---- a property: whatever happens on threads, in whatever order, each thread's pages give
# its events exactly once, in the order committed, and a rolled-back change gives none
ADMIN = Principal("t", "admin")
STEPS = st.lists(
    st.tuples(
        st.sampled_from(("status", "call", "pause", "turn", "rollback", "delete", "read")),
        st.integers(0, 5),
        st.sampled_from(("running", "waiting", "done", "failed", "cancelled", "open")),
    ),
    max_size=25,
)  # fmt: skip
MAIL = {"to": "bob@example.com", "subject": "s", "body": "b"}


def _all(harness: Harness, thread: str, limits: list[int], cursor: str | None = None) -> list[Any]:
    """Every event of `thread` after `cursor`, by pages of `limits` (then 200 each)."""
    got: list[Any] = []
    for limit in [*limits, *[200] * 50]:
        page = manage(
            harness.service, ADMIN, c.ThreadEvents(id=thread, cursor=cursor, limit=limit)
        ).body
        assert len(page["items"]) <= limit
        got += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return got
    raise AssertionError("the pages never end")


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=STEPS, limits=st.lists(st.integers(1, 3), min_size=1, max_size=4))
def test_pages_give_each_event_once_in_commit_order(
    harness: Harness, steps: list[tuple[str, int, str]], limits: list[int]
) -> None:
    service = harness.service
    threads = [threads_create(service, ADMIN, c.CreateThread(agent="a1")).body.id for _ in range(3)]
    expected: dict[str, list[str]] = {thread: ["created"] for thread in threads}
    status = dict.fromkeys(threads, "open")
    gone: set[str] = set()
    kept: dict[str, tuple[list[Any], str | None]] = {}  # a reader's pages so far, its cursor
    for action, index, to in steps:
        thread = threads[index % len(threads)]
        if thread in gone:
            continue
        if action == "status":
            threads_update(service, ADMIN, c.UpdateThread(id=thread, status=to))  # type: ignore[arg-type]
            if to != status[thread]:
                expected[thread].append(f"status:{to}")
                status[thread] = to
        elif action in ("call", "pause"):
            args = MAIL if action == "call" else {"amount": 80}
            tool = "mail.send" if action == "call" else "billing.refund"
            effect = decide_calls(service, [Call("a1", tool, args, thread=thread)])[0]["effect"]
            assert effect == ("allow" if action == "call" else "pause")
            expected[thread].append(f"call:{effect}")
        elif action == "turn":
            admit_turn(service, "a1", thread, service.current())
            expected[thread].append("turn")
        elif action == "rollback":
            with pytest.raises(RuntimeError), service.store.atomic():
                threads_update(service, ADMIN, c.UpdateThread(id=thread, status="done"))
                decide_calls(service, [Call("a1", "mail.send", MAIL, thread=thread)])
                raise RuntimeError("rolled back")
        elif action == "delete":
            manage(service, ADMIN, c.DeleteThread(id=thread))
            gone.add(thread)
        else:  # a reader follows the thread: a page now, the next later from its tail
            seen, cursor = kept.get(thread, ([], None))
            page = manage(service, ADMIN, c.ThreadEvents(id=thread, cursor=cursor, limit=1)).body
            assert page["tail_cursor"] == (page["next_cursor"] or page["tail_cursor"])
            assert page["items"] or page["tail_cursor"] == cursor
            kept[thread] = (seen + page["items"], page["tail_cursor"])
    for thread in threads:
        if thread in gone:
            assert list(service.store.scan(threadevents.KIND, tag=thread)) == []
            continue
        got = _all(harness, thread, limits)
        told = [e["event"] + (f":{e.get('status') or e.get('effect')}" if e["event"] in ("status", "call") else "")
                for e in got]  # fmt: skip
        assert told == expected[thread]
        assert len({e["id"] for e in got}) == len(got)
        seen, cursor = kept.get(thread, ([], None))
        assert seen + _all(harness, thread, limits, cursor) == got  # (a kept tail goes on)
