"""Threads and identities an agent's token reaches: the threads of itself and its
descendants, and its own identity; another root agent's, even with `allow threads.*,
identities.*`, are refused before the call is decided (nothing logged, nothing paused),
and the operations refuse them again (a paused call runs later, when a human approves)."""

from __future__ import annotations

from typing import Any

import pytest

from api import commands as c
from api.http.errors import status_of
from api.service import threads
from api.service.errors import ServiceError
from api.service.manage import OPERATIONS
from api.service.tokens import Principal
from policy import identities
from tests.api.conftest import POLICY, Harness, code_of


def _two_roots(live: Any, harness: Harness) -> tuple[dict[str, str], dict[str, str], str]:
    """alice (a1, the harness's identity) and bob, a root agent of another identity, both
    on `support` (whose role `manager` allows `threads.*` and `identities.*`)."""
    other = live.post("/v1/identities", json={"label": "bob's"}, headers=harness.auth()).json()
    harness.add_agent("bob", "support", identity=other["id"])
    return harness.auth(harness.agent_token), harness.auth(harness.token_for("bob")), other["id"]


def test_an_agent_reaches_only_the_threads_of_itself_and_its_descendants(
    live: Any, harness: Harness
) -> None:
    alice, bob, _ = _two_roots(live, harness)
    made = live.post("/v1/threads", json={"prompt": "alice's secret plan"}, headers=alice)
    assert made.status_code == 201, made.text
    theirs = made.json()["id"]
    mine = live.post("/v1/threads", json={"prompt": "bob's"}, headers=bob).json()["id"]
    store = harness.service.store
    before = store.get("threads", theirs)
    logged = store.last_seq()
    refused = [
        live.get(f"/v1/threads/{theirs}", headers=bob),
        live.patch(f"/v1/threads/{theirs}", json={"status": "cancelled"}, headers=bob),
        live.delete(f"/v1/threads/{theirs}", headers=bob),
        live.get("/v1/threads", params={"agent": "a1"}, headers=bob),
    ]
    for response in refused:
        assert code_of(response) == (403, "not-managed-agent"), response.text
        assert "`a1`" in response.json()["detail"] and "`bob`" in response.json()["detail"]
    assert f"thread `{theirs}`" in refused[0].json()["detail"]
    assert store.get("threads", theirs) == before  # not cancelled, not deleted
    assert store.last_seq() == logged  # refused before the decision: nothing logged
    # its own list is its own threads (the prompt of another's never shows)
    listed = live.get("/v1/threads", headers=bob)
    assert listed.status_code == 200, listed.text
    assert [t["id"] for t in listed.json()["items"]] == [mine]
    assert "secret plan" not in listed.text
    assert live.get(f"/v1/threads/{mine}", headers=bob).json()["prompt"] == "bob's"
    # the admin still sees every thread
    everything = live.get("/v1/threads", headers=harness.auth()).json()["items"]
    assert {t["id"] for t in everything} == {theirs, mine}


def test_a_parent_reaches_its_descendants_threads_and_a_child_not_its_parents(
    live: Any, harness: Harness
) -> None:
    alice = harness.auth(harness.agent_token)
    made = live.post("/v1/agents", json={"name": "kid", "profile": "support-child"}, headers=alice)
    assert made.status_code == 201, made.text
    kid_id = made.json()["id"]
    kid = harness.auth(harness.token_for(kid_id))
    kids = live.post("/v1/threads", json={"prompt": "kid's"}, headers=kid).json()["id"]
    parents = live.post("/v1/threads", json={"prompt": "alice's"}, headers=alice).json()["id"]
    # the parent: the child's thread, by id and by the child's list
    assert live.get(f"/v1/threads/{kids}", headers=alice).json()["prompt"] == "kid's"
    listed = live.get("/v1/threads", params={"agent": kid_id}, headers=alice)
    assert listed.status_code == 200, listed.text
    assert [t["id"] for t in listed.json()["items"]] == [kids]
    assert [t["id"] for t in live.get("/v1/threads", headers=alice).json()["items"]] == [parents]
    patched = live.patch(f"/v1/threads/{kids}", json={"status": "done"}, headers=alice)
    assert (patched.status_code, patched.json()["status"]) == (200, "done")
    # the child: not its parent's
    for response in (
        live.get(f"/v1/threads/{parents}", headers=kid),
        live.delete(f"/v1/threads/{parents}", headers=kid),
        live.get("/v1/threads", params={"agent": "a1"}, headers=kid),
    ):
        assert code_of(response) == (403, "not-managed-agent"), response.text
    assert live.delete(f"/v1/threads/{kids}", headers=alice).status_code == 204
    assert harness.service.store.get("threads", kids) is None


def test_an_agent_reaches_only_its_own_identity(live: Any, harness: Harness) -> None:
    alice, bob, bobs = _two_roots(live, harness)
    store = harness.service.store
    sealed = store.get(identities.SECRETS, identities.secret_name(harness.identity))
    assert sealed is not None
    logged = store.last_seq()
    for response in (
        live.get(f"/v1/identities/{harness.identity}", headers=bob),
        live.patch(f"/v1/identities/{harness.identity}", json={"label": "pwned"}, headers=bob),
        live.delete(f"/v1/identities/{harness.identity}", headers=bob),
        live.get(f"/v1/identities/{bobs}", headers=alice),
        live.get("/v1/identities/z6Mknope", headers=bob),  # says nothing of what exists
    ):
        assert code_of(response) == (403, "not-own-identity"), response.text
        assert "help" in response.json()
    assert store.get(identities.SECRETS, identities.secret_name(harness.identity)) == sealed
    assert store.last_seq() == logged  # refused before the decision: nothing logged
    # its list is its own identity; its own it reads and relabels
    listed = live.get("/v1/identities", headers=bob)
    assert listed.status_code == 200, listed.text
    assert [i["id"] for i in listed.json()["items"]] == [bobs]
    assert listed.json()["next_cursor"] is None
    assert live.get(f"/v1/identities/{bobs}", headers=bob).json()["label"] == "bob's"
    relabelled = live.patch(f"/v1/identities/{bobs}", json={"label": "bob"}, headers=bob)
    assert (relabelled.status_code, relabelled.json()["label"]) == (200, "bob"), relabelled.text
    everything = live.get("/v1/identities", headers=harness.auth()).json()["items"]
    assert {i["id"] for i in everything} == {harness.identity, bobs}


def test_an_agents_request_id_never_replays_anothers_identity(live: Any, harness: Harness) -> None:
    """An idempotent create's `request_id` is the caller's: replaying the admin's (or
    another agent's) makes a new identity, never hands back theirs."""
    _, bob, _ = _two_roots(live, harness)
    admins = live.post("/v1/identities", json={"request_id": "setup-1", "label": "ops"},
                       headers=harness.auth())  # fmt: skip
    assert admins.status_code == 201, admins.text
    first = live.post("/v1/identities", json={"request_id": "setup-1"}, headers=bob)
    assert first.status_code == 201, first.text
    assert first.json()["id"] != admins.json()["id"] and first.json()["label"] is None
    again = live.post("/v1/identities", json={"request_id": "setup-1"}, headers=bob)
    assert (again.status_code, again.json()["id"]) == (200, first.json()["id"])
    alice = live.post("/v1/identities", json={"request_id": "setup-1"},
                      headers=harness.auth(harness.agent_token))  # fmt: skip
    assert alice.status_code == 201 and alice.json()["id"] != first.json()["id"]


@pytest.mark.parametrize(
    ("operation", "code"),
    [
        ("threads_get", "not-managed-agent"),
        ("threads_update", "not-managed-agent"),
        ("threads_delete", "not-managed-agent"),
        ("identities_get", "not-own-identity"),
        ("identities_update", "not-own-identity"),
        ("identities_delete", "not-own-identity"),
    ],
)
def test_the_operations_check_again(harness: Harness, operation: str, code: str) -> None:
    """What runs when a human approves a paused call: no pre-check ran just before it."""
    service = harness.service
    thread = threads.threads_create(
        service, Principal("t", "agent", "a1"), c.CreateThread(prompt="x")
    )
    other, _ = identities.create(service.store, service.sealer, "bob's")
    harness.add_agent("bob", "support", identity=other["id"])
    target = thread.body.id if operation.startswith("threads") else harness.identity
    tool = operation.replace("_", ".")
    changes = {"status": "cancelled"} if tool == "threads.update" else {}
    command = c.COMMANDS[tool].model_validate({"id": target, **changes})
    with pytest.raises(ServiceError) as refused:
        OPERATIONS[tool](service, Principal("t", "agent", "bob"), command)
    assert (status_of(refused.value.code), refused.value.code) == (403, code)
    assert service.store.get("threads", thread.body.id) == thread.body.stored()
    assert identities.get(service.store, harness.identity)["label"] == "test identity"


HELD = """
hook hold-threads on threads.create, threads.delete, identities.delete, connections.create, agents.create {
  pause "a human approves opening or deleting a thread, deleting an identity, or making a connection or an agent"
}
profile held {
  roles mailer, manager
  hooks hold-threads
}
"""


def test_a_thread_it_may_not_reach_is_refused_before_it_pauses(live: Any, harness: Harness) -> None:
    """Its hooks pause every `threads.create`, `threads.delete`, `identities.delete`,
    `connections.create` and `agents.create`: one for another agent, of another agent's
    thread, of or for another identity is refused at once, so no human is asked about a
    call that could only fail once approved."""
    admin = harness.auth()
    assert live.put("/v1/policy", content=POLICY + HELD, headers=admin).status_code == 201
    own = live.post("/v1/identities", json={}, headers=admin).json()["id"]
    harness.add_agent("held", "held", identity=own)
    held = harness.auth(harness.token_for("held"))
    theirs = live.post("/v1/threads", json={"agent": "a1"}, headers=admin).json()["id"]
    logged = harness.service.store.last_seq()
    opened = live.post("/v1/threads", json={"agent": "a1"}, headers=held)
    assert code_of(opened) == (403, "not-own-agent"), opened.text
    assert "`a1`" in opened.json()["detail"]
    deleted = live.delete(f"/v1/threads/{theirs}", headers=held)
    assert code_of(deleted) == (403, "not-managed-agent"), deleted.text
    erased = live.delete(f"/v1/identities/{harness.identity}", headers=held)
    assert code_of(erased) == (403, "not-own-identity"), erased.text
    connection = {"name": "c", "toolset": "vault", "credential": "x", "owner": harness.identity}
    foreign = live.post("/v1/connections", json=connection, headers=held)
    assert code_of(foreign) == (403, "not-own-identity"), foreign.text
    child = {"name": "kid", "profile": "narrow", "identity": harness.identity}
    adopted = live.post("/v1/agents", json=child, headers=held)
    assert code_of(adopted) == (403, "identity-not-inherited"), adopted.text
    assert harness.service.store.last_seq() == logged
    assert live.get("/v1/approvals", headers=admin).json()["items"] == []
    # its own: the pause, which a human approves
    paused = live.post("/v1/threads", json={"prompt": "mine"}, headers=held)
    assert paused.status_code == 202, paused.text
    approved = live.post(f"/v1/approvals/{paused.json()['approval_id']}/approve", headers=admin)
    assert approved.status_code == 200, approved.text
    assert approved.json()["result"]["agent"] == "held"
