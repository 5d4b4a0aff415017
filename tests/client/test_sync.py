"""`Client` against a live server: decisions with their reasons, a batch, an agent's
tools, a turn, an approval waited on while another thread approves it over HTTP, a
thread waited on and followed by its events, the approvals' stream, AuthZEN, and
refusals raised with their codes."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import TypeVar

import pytest

from api.http.app import create_app
from charter.client import (
    ApprovalEvent,
    Client,
    NoAnswer,
    Paused,
    ProblemError,
    Ready,
    call,
)
from tests.api.conftest import POLICY, LiveServer, free_port, make_harness
from tests.client.conftest import ALLOWED, DENIED, PAUSED, Served

T = TypeVar("T")
# Agents on `reader` read approvals once a person has let them.
REVIEWED_READS = """
hook review-reads on approvals.get {
  pause "a human lets agents read approvals"
}
profile reader {
  roles manager
  hooks review-reads
}
"""


@pytest.fixture
def admin(served: Served) -> Iterator[Client]:
    with Client(served.url, served.harness.admin, timeout=10) as client:
        yield client


def test_a_call_is_allowed_denied_or_paused_with_its_reasons(served: Served) -> None:
    with Client(served.url, served.harness.decide) as client:
        allowed = client.decide("a1", *ALLOWED)
        denied = client.decide("a1", *DENIED)
        paused = client.decide("a1", *PAUSED, expected_cost=Decimal("0.25"))
    assert allowed.effect == "allow" and allowed.args == {**ALLOWED[1]}
    assert [r.role for r in allowed.reasons if r.kind == "allow"] == ["mailer"]
    assert denied.effect == "deny" and denied.approval_id is None
    assert denied.reasons and all(r.kind != "allow" for r in denied.reasons)
    assert paused.effect == "pause" and paused.approval_id
    assert [r.hook for r in paused.reasons if r.kind == "hook-pause"] == ["approve-big"]
    rows = served.harness.service.store.read_decisions(allowed.seq - 1, 3, 1 << 20)
    logged = [json.loads(row) for _, row in rows if isinstance(row, bytes)]
    assert [(row["id"], row["effect"]) for row in logged] == [
        (allowed.id, "allow"), (denied.id, "deny"), (paused.id, "pause")
    ]  # fmt: skip


def test_a_batch_is_decided_in_its_order(served: Served) -> None:
    calls = [call("a1", *ALLOWED), call("a1", *DENIED), call("a1", "billing.refund", {"amount": 5})]
    with Client(served.url, served.harness.decide) as client:
        decided = client.decide_batch(calls, receipt=True)
    assert [d.effect for d in decided] == ["allow", "deny", "allow"]
    assert all(d.receipt for d in decided)  # (each signed: `?receipt=true`)
    assert len({d.id for d in decided}) == 3


def test_an_agent_lists_its_tools_and_decides_on_its_turn(served: Served) -> None:
    with Client(served.url, served.harness.agent_token) as client:
        listing = client.list_tools("a1")
        turn = client.admit_turn("a1")
        decided = client.decide("a1", *ALLOWED, turn=turn.id)
        charged = client.report_cost(decided.id, decided.seq, "0.01")
        with pytest.raises(ProblemError) as again:
            client.report_cost(decided.id, decided.seq, 1)
    assert (charged.decision, charged.micros, charged.charged) == (decided.id, 10_000, ["agent:a1"])
    assert again.value.code == "cost-already-reported"
    status = {tool.tool: tool.status for tool in listing.tools}
    assert status["billing.refund"] == "allow" and status["mail.send"] == "narrow"
    refund = next(tool for tool in listing.tools if tool.tool == "billing.refund")
    assert [hook.name for hook in refund.hooks] == ["approve-big"]
    assert listing.agent == "a1" and listing.profile == "support"
    assert turn.agent == "a1" and turn.revision == listing.revision
    assert decided.effect == "allow" and decided.revision == turn.revision


def _meanwhile(
    served: Served, act: Callable[[Client], object], wait: Callable[[], T]
) -> tuple[T, float, list[object]]:
    """`wait()` while another client, on a thread of its own, does `act` 0.3 s in: what
    the wait answered, the seconds it took, and what `act` answered."""
    done: list[object] = []

    def other() -> None:
        time.sleep(0.3)
        with Client(served.url, served.harness.admin) as client:
            done.append(act(client))

    thread = threading.Thread(target=other)
    began = time.monotonic()
    thread.start()
    found = wait()
    took = time.monotonic() - began
    thread.join()
    return found, took, done


def test_an_approval_is_waited_for_while_another_thread_approves_it(
    served: Served, admin: Client
) -> None:
    paused = admin.decide("a1", *PAUSED)
    approval_id = paused.approval_id
    assert approval_id is not None
    found, took, approved = _meanwhile(
        served,
        lambda other: other.approve(approval_id),
        lambda: admin.wait_for_approval(approval_id, timeout=20),
    )
    assert found.status == "approved" and found.final is not None
    assert found.final.effect == "allow" and found.final.args == {**PAUSED[1], "reason": ""}
    assert 0.3 <= took < 5, took  # answered when approved, not at the end of the wait
    assert len(approved) == 1


def test_a_thread_is_waited_for_and_followed_by_its_events(served: Served, admin: Client) -> None:
    made = admin.create_thread("a1", "sort the tickets", max_cost="2.50")
    assert (made.agent, made.status, made.max_cost) == ("a1", "open", "2.5")
    assert admin.update_thread(made.id, "running").status == "running"
    page = admin.thread_events(made.id)
    assert [e.event for e in page.items] == ["created", "status"] and page.next_cursor is None
    tail = page.tail_cursor
    found, took, _ = _meanwhile(
        served,
        lambda other: other.update_thread(made.id, "done"),
        lambda: admin.wait_for_thread(made.id, timeout=20),
    )
    assert found.status == "done" and admin.thread(made.id).status == "done"
    assert 0.3 <= took < 5, took  # answered when it ended, not at the end of the wait
    since = admin.thread_events(made.id, tail)
    assert [(e.event, e.status, e.was) for e in since.items] == [("status", "done", "running")]
    assert admin.thread_events(made.id, since.tail_cursor).items == []
    assert admin.wait_for_thread(made.id, timeout=0).status == "done"
    with pytest.raises(ProblemError) as refused:
        admin.thread_events(made.id, limit=0)
    assert (refused.value.status, refused.value.code) == (400, "bad-limit")


def test_a_wait_ends_with_the_approval_pending_then_it_is_rejected(admin: Client) -> None:
    paused = admin.decide("a1", *PAUSED)
    assert paused.approval_id is not None
    began = time.monotonic()
    pending = admin.wait_for_approval(paused.approval_id, timeout=1)
    assert pending.status == "pending" and 1 <= time.monotonic() - began < 4
    assert admin.approval(paused.approval_id).status == "pending"
    rejected = admin.reject(paused.approval_id, "not today")
    assert rejected.approval.status == "rejected" and rejected.approval.reason == "not today"
    assert admin.wait_for_approval(paused.approval_id, timeout=0).status == "rejected"
    with pytest.raises(ProblemError) as refused:
        admin.approve(paused.approval_id)
    assert (refused.value.status, refused.value.code) == (409, "approval-not-pending")


def test_the_stream_tells_an_approval_opened_and_decided(served: Served, admin: Client) -> None:
    events = admin.approval_events()
    ready = next(events)
    assert ready.kind == "ready" and ready.data == {"after": ready.id}
    paused = admin.decide("a1", *PAUSED)
    assert paused.approval_id is not None
    opened = next(events)
    admin.reject(paused.approval_id)
    decided = next(events)
    events.close()  # (closes the stream's connection)
    assert (opened.kind, decided.kind) == ("approval.opened", "approval.decided")
    assert opened.approval is not None and opened.approval.id == paused.approval_id
    assert decided.approval is not None and decided.approval.status == "rejected"
    assert ready.id < opened.id < decided.id
    # Resumed after `opened`: what came after it, first.
    resumed = admin.approval_events(last_event_id=opened.id)
    again: ApprovalEvent = next(resumed)
    resumed.close()
    assert (again.kind, again.id) == ("approval.decided", decided.id)


def test_authzen_evaluations(served: Served) -> None:
    subject = {"type": "agent", "id": "a1"}
    with Client(served.url, served.harness.decide) as client:
        one = client.evaluate(
            {"subject": subject, "action": {"name": "refund"}, "resource": {"type": "billing"},
             "context": {"args": {"amount": 80}}},
            request_id="r-1",
        )  # fmt: skip
        many = client.evaluate_all(
            {"subject": subject, "resource": {"type": "mail"},
             "evaluations": [{"action": {"name": "send"}, "context": {"args": ALLOWED[1]}},
                             {"action": {"name": "send"}, "context": {"args": DENIED[1]}},
                             {"subject": {"type": "agent", "id": "nobody"},
                              "action": {"name": "send"}}]}
        )  # fmt: skip
    assert one.decision is False and one.context is not None
    assert one.context["effect"] == "pause" and one.context["approval_id"]
    assert many.evaluations is not None
    assert [e.decision for e in many.evaluations] == [True, False, False]
    assert [(e.context or {}).get("effect") for e in many.evaluations] == ["allow", "deny", None]
    assert (many.evaluations[2].context or {})["error"]["code"] == "agent-not-found"


def test_refusals_raise_their_problem(served: Served) -> None:
    harness = served.harness
    with Client(served.url, "chr_not-a-token") as stranger, pytest.raises(ProblemError) as bad:
        stranger.decide("a1", *ALLOWED)
    assert (bad.value.status, bad.value.code, bad.value.title) == (
        401,
        "unauthorized",
        "Unauthorized",
    )
    with Client(served.url, harness.admin) as admin:
        with pytest.raises(ProblemError) as unknown:
            admin.decide("nobody", *ALLOWED)
        with pytest.raises(ProblemError) as no_tools:
            admin.list_tools("no body?x")  # (quoted: its `?` starts no query)
        with pytest.raises(ProblemError) as no_approval:
            admin.approval("0193d9a3-1111-7000-8000-000000000001")
    assert (unknown.value.status, unknown.value.code) == (404, "agent-not-found")
    assert unknown.value.detail == "agent `nobody` not found"
    assert no_tools.value.detail == "agent `no body?x` not found"
    assert no_approval.value.code == "approval-not-found"
    with Client(served.url, harness.agent_token) as agent, pytest.raises(ProblemError) as other:
        agent.decide("a2", *ALLOWED)
    assert (other.value.status, other.value.code) == (403, "insufficient-scope")


def test_a_call_that_is_not_one_is_refused_before_it_is_sent(admin: Client) -> None:
    with pytest.raises(ValueError, match="tool"):
        admin.decide("a1", "", {})
    with pytest.raises(ValueError, match="calls"):
        admin.decide_batch([])


def test_no_answer(served: Served) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    with Client(nowhere, served.harness.admin) as client, pytest.raises(NoAnswer) as refused:
        client.readiness()
    assert isinstance(refused.value.__cause__, Exception)
    with Client(served.url, served.harness.admin) as client:
        ready = client.readiness()
    assert isinstance(ready, Ready) and ready.revision >= 1


def test_the_token_is_shown_nowhere(served: Served) -> None:
    token = served.harness.admin
    with Client(served.url + "/", token) as client:
        assert token not in str(client) and token not in repr(client)
        assert repr(client) == f"Client({served.url!r})"
        assert token not in repr(vars(client))
        with pytest.raises(ProblemError) as refused:
            client.decide("nobody", *ALLOWED)
    wrong = token + "x"
    with Client(served.url, wrong) as client, pytest.raises(ProblemError) as unknown:
        client.decide("a1", *ALLOWED)
    for error in (refused.value, unknown.value):
        shown = f"{error} {error!r} {error.args} {error.problem!r} {vars(error)}"
        assert token not in shown and wrong not in shown
    pasted = f"{token}\n"
    with pytest.raises(ValueError) as bad:
        Client(served.url, pasted)
    assert token not in str(bad.value) and token not in repr(bad.value)


def test_an_agents_request_its_policy_pauses_is_paused(tmp_path: Path) -> None:
    """An agent whose reads of approvals pause for a person: its `approval()` is Paused,
    with the approval that opened for it."""
    harness = make_harness(tmp_path)
    try:
        with harness.service.store.atomic():
            harness.service.upload([("policy.charter", POLICY + REVIEWED_READS)], "test")
        harness.add_agent("rd", "reader")
        with (
            LiveServer(create_app(harness.service)) as url,
            Client(url, harness.admin) as admin,
            Client(url, harness.token_for("rd")) as reader,
        ):
            paused = admin.decide("a1", *PAUSED)
            assert paused.approval_id is not None
            with pytest.raises(Paused) as held:
                reader.approval(paused.approval_id)
            opened = admin.approval(held.value.approval_id)
        assert held.value.pending.decision.effect == "pause"
        assert (opened.agent, opened.tool, opened.management) == ("rd", "approvals.get", True)
    finally:
        harness.service.store.close()
