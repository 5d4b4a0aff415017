"""Who may decide an approval, and what a request to decide one writes when it can only
be refused. The approval flow itself (approve, reject, re-check) is in test_flows.py."""

from __future__ import annotations

from typing import Any

import pytest

from api import commands as c
from api.service.core import Service
from api.service.errors import ServiceError
from api.service.threads import threads_delete
from api.service.tokens import Principal
from tests.api.conftest import BOTH, POLICY, Harness, code_of

STORES = BOTH  # each test on SQLite and on PostgreSQL (tests/api/conftest.py)

# Agents whose own approving and rejecting a human reviews: such a request is an approval
# of its own, which decides the approval it names once approved.
GATED = """
hook review-approvals on approvals.approve, approvals.reject {
  pause "a human reviews what an agent approves"
}
profile gated {
  roles manager
  hooks review-approvals
}
"""
REFUND = {"agent": "a1", "tool": "billing.refund", "args": {"amount": 80}}


def _reviewers(live: Any, harness: Harness, *names: str) -> list[dict[str, str]]:
    """Agents on `gated`, each the root of a tree of its own, with an identity of its own."""
    admin = harness.auth()
    assert live.put("/v1/policy", content=POLICY + GATED, headers=admin).status_code == 201
    made = []
    for name in names:
        identity = live.post("/v1/identities", json={}, headers=admin).json()["id"]
        made.append(
            harness.auth(harness.token_for(harness.add_agent(name, "gated", identity=identity)))
        )
    return made


def _asks(live: Any, approval: str, verb: str, token: dict[str, str]) -> str:
    """The approval that `token`'s paused request to `verb` `approval` opened."""
    paused = live.post(f"/v1/approvals/{approval}/{verb}", json={}, headers=token)
    assert paused.status_code == 202, paused.text
    return str(paused.json()["approval_id"])


def test_an_agent_never_decides_its_own_pause_through_another_agents_request(
    live: Any, harness: Harness
) -> None:
    """`rev`'s paused `approvals.approve` of a1's pause runs, once approved, as `rev`,
    which may decide it: approving that request was a1 approving its own refund. Whoever
    decides a request to decide an approval decides that approval too, however long the
    chain of such requests."""
    store = harness.service.store
    rev, rev2 = _reviewers(live, harness, "rev", "rev2")
    a1 = harness.auth(harness.agent_token)
    refund = live.post("/v1/decisions", json=REFUND, headers=a1).json()["approval_id"]
    approve = _asks(live, refund, "approve", rev)
    reject = _asks(live, refund, "reject", rev)
    further = _asks(live, approve, "approve", rev2)  # rev2 asks to approve rev's request
    logged = store.last_seq()
    for asked in (approve, reject, further):
        for verb in ("approve", "reject"):
            refused = live.post(f"/v1/approvals/{asked}/{verb}", json={}, headers=a1)
            assert code_of(refused) == (403, "self-approval"), refused.text
            assert f"it decides approval `{refund}`, raised by agent `a1`" in refused.text
    # nor may rev decide rev2's request to approve its own
    assert code_of(live.post(f"/v1/approvals/{further}/approve", headers=rev)) == (
        403, "self-approval",
    )  # fmt: skip
    assert store.last_seq() == logged
    opened = (refund, approve, reject, further)
    assert {(store.get("approvals", i) or {})["status"] for i in opened} == {"pending"}
    # a human decides rev2's request, which approves rev's, which approves the refund
    approved = live.post(f"/v1/approvals/{further}/approve", headers=harness.auth())
    assert approved.status_code == 200, approved.text
    assert (store.get("approvals", refund) or {})["decided_by"] == "rev"
    assert (store.get("approvals", refund) or {})["final"]["effect"] == "allow"


def test_a_request_to_decide_an_approval_already_decided_is_refused_before_it_is_decided(
    live: Any, harness: Harness
) -> None:
    """Whatever its policy says, the request can only be refused: it is, at once, so it
    neither logs a decision nor opens an approval that no one could approve."""
    store = harness.service.store
    (rev,) = _reviewers(live, harness, "rev")
    refund = live.post("/v1/decisions", json=REFUND, headers=harness.auth()).json()
    rejected = live.post(f"/v1/approvals/{refund['approval_id']}/reject", headers=harness.auth())
    assert rejected.status_code == 200, rejected.text
    logged = store.last_seq()
    for verb in ("approve", "reject"):
        refused = live.post(f"/v1/approvals/{refund['approval_id']}/{verb}", json={}, headers=rev)
        assert code_of(refused) == (409, "approval-not-pending"), refused.text
    assert store.last_seq() == logged
    assert [a["id"] for a in live.get("/v1/approvals", headers=harness.auth()).json()["items"]] == [
        refund["approval_id"]
    ]


def test_a_key_that_does_not_open_the_sealed_call_is_a_503_and_changes_nothing(
    live: Any, harness: Harness
) -> None:
    """A worker serving with another key than the one that sealed an approval's call: a
    503 that says so (it was an internal error), the approval still pending."""
    from policy.secrets import Sealer

    refund = live.post("/v1/decisions", json=REFUND, headers=harness.auth()).json()
    harness.service.sealer = Sealer(bytes(32))
    approved = live.post(f"/v1/approvals/{refund['approval_id']}/approve", headers=harness.auth())
    assert code_of(approved) == (503, "secret-key-mismatch")
    assert "help" in approved.json()
    shown = live.get(f"/v1/approvals/{refund['approval_id']}", headers=harness.auth()).json()
    assert shown["status"] == "pending"


def test_deleting_an_agent_or_a_thread_rejects_its_pending_approvals(
    live: Any, harness: Harness
) -> None:
    """Approving them could only fail (their agent or thread is gone): they are rejected,
    saying why, and nobody else's approvals are touched."""
    admin = harness.auth()
    harness.add_agent("a2", "support")
    thread = live.post("/v1/threads", json={"agent": "a2"}, headers=admin).json()["id"]
    in_thread = live.post("/v1/decisions", json={**REFUND, "agent": "a2", "thread": thread},
                          headers=admin).json()["approval_id"]  # fmt: skip
    outside = live.post("/v1/decisions", json={**REFUND, "agent": "a2"}, headers=admin)
    of_a1 = live.post("/v1/decisions", json=REFUND, headers=admin).json()["approval_id"]
    assert live.delete(f"/v1/threads/{thread}", headers=admin).status_code == 204
    assert live.delete("/v1/agents/a1", headers=admin).status_code == 204

    def shown(approval: str) -> dict[str, Any]:
        found: dict[str, Any] = live.get(f"/v1/approvals/{approval}", headers=admin).json()
        return found

    assert shown(in_thread)["status"] == "rejected"
    assert shown(in_thread)["reason"] == f"thread `{thread}` was deleted"
    assert (shown(of_a1)["status"], shown(of_a1)["reason"]) == (
        "rejected",
        "agent `a1` was deleted",
    )
    assert shown(of_a1)["decided_by"] == "charter"
    assert shown(outside.json()["approval_id"])["status"] == "pending"
    again = live.post(f"/v1/approvals/{of_a1}/approve", headers=admin)
    assert code_of(again) == (409, "approval-not-pending")
    pending = live.get("/v1/approvals?status=pending", headers=admin).json()["items"]
    assert [item["id"] for item in pending] == [outside.json()["approval_id"]]


def _deleted_before_the_transaction(
    harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch, thread: str
) -> list[Any]:
    """Another worker deletes `thread` as the next write transaction here begins (the
    list empties once it has)."""
    store = harness.service.store
    real = store.atomic
    pending = [lambda: threads_delete(other, Principal("t", "admin"), c.DeleteThread(id=thread))]

    def atomic() -> Any:
        if pending:
            pending.pop()()
        return real()

    monkeypatch.setattr(store, "atomic", atomic)
    return pending


def test_a_call_whose_thread_was_deleted_before_its_group_commits_is_not_found(
    live: Any, harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call in a thread, prepared before another worker deleted the thread: its group's
    write transaction reads the deletion in the change feed and prepares it again, so it
    is `thread-not-found`, with nothing logged and no approval opened."""
    admin = harness.auth()
    thread = live.post("/v1/threads", json={"agent": "a1"}, headers=admin).json()["id"]
    last = harness.service.store.last_seq()
    pending = _deleted_before_the_transaction(harness, other, monkeypatch, thread)
    refused = live.post("/v1/decisions", json={**REFUND, "thread": thread}, headers=admin)
    assert pending == []
    assert code_of(refused) == (404, "thread-not-found")
    assert harness.service.store.last_seq() == last
    assert live.get("/v1/approvals", headers=admin).json()["items"] == []


def test_a_call_decided_in_process_whose_thread_was_deleted_is_not_found(
    harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same in process (`decide_calls`, the in-process gateway's path): prepared
    before another worker deleted its thread, its write transaction reads the deletion
    and prepares it again, so it is `thread-not-found`. No approval is opened that no
    one could approve, nothing is logged, and no event is written for a thread gone."""
    from api.service.calls import Call
    from api.service.decide import decide_calls
    from api.service.threads import threads_create

    admin = Principal("t", "admin")
    thread = threads_create(harness.service, admin, c.CreateThread(agent="a1")).body.id
    last = harness.service.store.last_seq()
    pending = _deleted_before_the_transaction(harness, other, monkeypatch, thread)
    with pytest.raises(ServiceError) as refused:
        decide_calls(harness.service, [Call("a1", "billing.refund", {"amount": 80}, thread=thread)])
    assert pending == []
    assert refused.value.code == "thread-not-found"
    assert harness.service.store.last_seq() == last
    assert list(harness.service.store.scan("approvals")) == []
    assert list(harness.service.store.scan("thread-events", tag=thread)) == []


def test_an_approval_lifts_only_the_pauses_it_was_asked_about(live: Any, harness: Harness) -> None:
    """A hook added after the pause, which the approving human never saw, pauses the
    re-check again: a new approval, which then decides. The original hook alone is
    lifted, as before."""
    admin = harness.auth()
    first = live.post("/v1/decisions", json=REFUND, headers=admin).json()["approval_id"]
    stricter = (
        POLICY.replace(
            "hooks approve-big\n  budget 10 usd per 24h",
            "hooks approve-big, cfo\n  budget 10 usd per 24h",
            1,
        )
        + 'hook cfo on billing.refund where args.amount > 70 {\n  pause "the CFO approves"\n}\n'
    )
    assert live.put("/v1/policy", content=stricter, headers=admin).status_code == 201
    approved = live.post(f"/v1/approvals/{first}/approve", headers=admin).json()
    again = approved["decision"]
    assert approved["approval"]["status"] == "approved" and again["effect"] == "pause"
    assert {r.get("hook") for r in again["reasons"]} >= {"cfo"}
    second = again["approval_id"]
    assert second != first
    final = live.post(f"/v1/approvals/{second}/approve", headers=admin).json()["decision"]
    assert final["effect"] == "allow"
    assert any(r["kind"] == "approved" and second in r["message"] for r in final["reasons"])


def test_a_policy_can_let_an_agent_decide_some_approvals_only(live: Any, harness: Harness) -> None:
    """An agent's request to decide an approval is decided with the approval's facts as
    `context.approval` (read by the service, not taken from the request), so a reviewer
    can be granted the refunds of others and nothing else."""
    admin = harness.auth()
    scoped = (
        POLICY
        + """
hook approve-mail on mail.send {
  pause "a human approves mail"
}
profile mail-support {
  roles mailer
  hooks approve-mail
}
role refund-reviewer {
  allow approvals.approve where context.approval.tool == "billing.refund"
}
profile reviewer {
  roles refund-reviewer
  hooks none
}
"""
    )
    assert live.put("/v1/policy", content=scoped, headers=admin).status_code == 201
    identity = live.post("/v1/identities", json={}, headers=admin).json()["id"]
    reviewer = harness.auth(
        harness.token_for(harness.add_agent("rev", "reviewer", identity=identity))
    )
    harness.add_agent("m1", "mail-support")
    refund = live.post("/v1/decisions", json=REFUND, headers=admin).json()["approval_id"]
    mail = {"agent": "m1", "tool": "mail.send",
            "args": {"to": "bob@example.com", "subject": "hi", "body": "x"}}  # fmt: skip
    mailed = live.post("/v1/decisions", json=mail, headers=admin).json()["approval_id"]
    refused = live.post(f"/v1/approvals/{mailed}/approve", headers=reviewer)
    assert code_of(refused) == (403, "denied-by-policy")
    approved = live.post(f"/v1/approvals/{refund}/approve", headers=reviewer)
    assert approved.status_code == 200 and approved.json()["decision"]["effect"] == "allow"
    shown = live.get(f"/v1/approvals/{mailed}", headers=admin).json()
    assert shown["status"] == "pending"


def test_an_approval_does_not_lift_its_hook_changed_since(live: Any, harness: Harness) -> None:
    """The hook the human approved for, changed since under the same name (a wider
    condition, another message), is not the one that human saw: the re-check's pause by
    it opens a new approval. The same hook only moved in its file (a comment above it)
    is still lifted. Neither view shows the digests the re-check compares."""
    admin = harness.auth()
    first = live.post("/v1/decisions", json=REFUND, headers=admin).json()["approval_id"]
    second = live.post("/v1/decisions", json=REFUND, headers=admin).json()["approval_id"]
    shown = live.get(f"/v1/approvals/{first}", headers=admin).json()
    assert "hook_digests" not in shown and "sealed_call" not in shown
    changed = POLICY.replace(
        "hook approve-big on billing.refund where args.amount > 50 {\n"
        '  pause "a human approves refunds over 50"',
        "hook approve-big on billing.refund where args.amount > 10 {\n"
        '  pause "a human approves refunds over 10"',
    )
    assert changed != POLICY
    assert live.put("/v1/policy", content=changed, headers=admin).status_code == 201
    approved = live.post(f"/v1/approvals/{first}/approve", headers=admin).json()
    again = approved["decision"]
    assert approved["approval"]["status"] == "approved" and again["effect"] == "pause"
    assert again["approval_id"] != first
    moved = "# the same hook, on a later line\n\n" + POLICY
    assert live.put("/v1/policy", content=moved, headers=admin).status_code == 201
    approved = live.post(f"/v1/approvals/{second}/approve", headers=admin).json()
    assert approved["decision"]["effect"] == "allow", approved
