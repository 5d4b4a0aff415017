"""Decisions, batches, the log, budgets, connections, listing and turns."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from api import commands as c
from api.service.core import Service
from api.service.resources import agents_delete, agents_update
from api.service.tokens import Principal
from tests.api.conftest import POLICY, Harness, code_of, opened_again, slow_compiles

MAIL = {"to": "bob@example.com", "subject": "hi", "body": "hello"}


def decide(client: Any, harness: Harness, token: str | None = None, **body: Any) -> Any:
    body.setdefault("agent", "a1")
    return client.post("/v1/decisions", json=body, headers=harness.auth(token))


def test_allow_deny_and_the_log(client: Any, harness: Harness) -> None:
    allowed = decide(client, harness, tool="mail.send", args=MAIL)
    assert allowed.status_code == 200
    body = allowed.json()
    assert body["effect"] == "allow"
    assert body["args"] == MAIL
    assert body["reasons"][0]["role"] == "mailer"
    assert body["revision"] == 1
    denied = decide(client, harness, tool="mail.send", args={**MAIL, "to": "eve@evil.net"})
    assert denied.json()["effect"] == "deny"
    assert denied.json()["seq"] == body["seq"] + 1
    shape = decide(client, harness, tool="mail.send", args={"to": 3})
    assert shape.json()["effect"] == "deny"
    assert shape.json()["reasons"][0]["kind"] == "shape"
    log = client.get("/v1/decisions", params={"after_seq": 0}, headers=harness.auth()).json()
    assert [d["seq"] for d in log["decisions"]] == [1, 2, 3]
    assert [d["effect"] for d in log["decisions"]] == ["allow", "deny", "deny"]
    assert log["decisions"][0]["id"] == body["id"]
    assert log["next_after_seq"] == 3
    page = client.get("/v1/decisions?after_seq=1&limit=1", headers=harness.auth()).json()
    assert [d["seq"] for d in page["decisions"]] == [2]


def test_batch_logs_each_call_once(client: Any, harness: Harness) -> None:
    calls = [{"agent": "a1", "tool": "mail.send", "args": MAIL} for _ in range(100)]
    calls[7]["args"] = {**MAIL, "to": "x@evil.net"}
    response = client.post("/v1/decisions/batch", json={"calls": calls}, headers=harness.auth())
    assert response.status_code == 200
    decisions = response.json()["decisions"]
    assert [d["seq"] for d in decisions] == list(range(1, 101))
    assert decisions[7]["effect"] == "deny"
    assert sum(d["effect"] == "allow" for d in decisions) == 99
    assert harness.service.store.last_seq() == 100


def test_budget_caps_and_ancestors_are_charged(client: Any, harness: Harness) -> None:
    harness.add_agent("child", "wide", budget={"amount": "100", "period": "total"})
    refund: dict[str, Any] = {"tool": "billing.refund", "args": {"amount": 5}}
    first = decide(client, harness, **refund, expected_cost="6")
    assert first.json()["effect"] == "allow"
    # the profile `support` caps a1 at 10 USD per 24h: 6 spent, 5 more is over
    over = decide(client, harness, **refund, expected_cost="5")
    assert over.json()["effect"] == "deny"
    assert over.json()["reasons"][-1]["kind"] == "budget"
    assert "10 USD per 24h" in over.json()["reasons"][-1]["message"]
    assert decide(client, harness, **refund, expected_cost="4").json()["effect"] == "allow"


def test_child_spending_counts_against_the_parent(harness: Harness, live: Any) -> None:
    store = harness.service.store
    doc = dict(store.get("agents", "a1") or {})
    harness.add_agent("kid", "wide")
    kid = dict(store.get("agents", "kid") or {})
    kid["parent"] = doc["id"]
    store.update("agents", "kid", kid, tag=kid["parent"])  # as every agent write tags it
    harness.service.read.forget_agent("kid")
    call: dict[str, Any] = {"agent": "kid", "tool": "billing.refund", "args": {"amount": 1}}
    assert decide(live, harness, **call, expected_cost="9").json()["effect"] == "allow"
    # the kid's own profile has no budget, but its parent's (10/24h) already holds 9
    blocked = decide(live, harness, **call, expected_cost="2").json()
    assert blocked["effect"] == "deny"
    assert "profile `support`" in blocked["reasons"][-1]["message"]


def test_a_parents_new_budget_reaches_a_child_decided_before(harness: Harness, live: Any) -> None:
    """What step 6 keeps between requests (caps, connections) is dropped when an agent
    changes: the child's next call sees its parent's new cap."""
    store = harness.service.store
    harness.add_agent("kid", "wide")
    kid = dict(store.get("agents", "kid") or {})
    kid["parent"] = "a1"
    store.update("agents", "kid", kid, tag=kid["parent"])  # as every agent write tags it
    harness.service.read.forget_agent("kid")
    call: dict[str, Any] = {"agent": "kid", "tool": "billing.refund", "args": {"amount": 1}}
    assert decide(live, harness, **call, expected_cost="2").json()["effect"] == "allow"
    assert decide(live, harness, **call, expected_cost="2").json()["effect"] == "allow"
    parent = dict(store.get("agents", "a1") or {})
    parent["budget"] = {"amount": "5", "period": "total"}
    store.update("agents", "a1", parent)
    harness.service.read.forget_agent("a1")
    blocked = decide(live, harness, **call, expected_cost="2").json()
    assert blocked["effect"] == "deny"  # 4 spent of the parent's new 5
    assert blocked["reasons"][-1]["kind"] == "budget"


def test_thread_max_cost(live: Any, harness: Harness) -> None:
    thread = live.post(
        "/v1/threads", json={"agent": "a1", "max_cost": "1.5"}, headers=harness.auth()
    ).json()
    refund: dict[str, Any] = {
        "tool": "billing.refund",
        "args": {"amount": 1},
        "thread": thread["id"],
    }
    assert decide(live, harness, **refund, expected_cost="1").json()["effect"] == "allow"
    assert decide(live, harness, **refund, expected_cost="1").json()["effect"] == "deny"
    # each thread its own cap, call after call (what step 6 keeps of like calls is the
    # thread's: api.service.decisionlog._static)
    wide = live.post("/v1/threads", json={"agent": "a1"}, headers=harness.auth()).json()
    narrow = live.post(
        "/v1/threads", json={"agent": "a1", "max_cost": "0.5"}, headers=harness.auth()
    ).json()
    for _ in range(2):
        for other, effect in ((wide, "allow"), (narrow, "deny"), (thread, "deny")):
            answer = decide(live, harness, **{**refund, "thread": other["id"]}, expected_cost="1")
            assert answer.json()["effect"] == effect, other


def test_a_turns_calls_are_in_its_thread(live: Any, harness: Harness) -> None:
    """A call naming a turn admitted in a thread is in that thread even when it leaves the
    thread out (its `max_cost` applied only to calls naming it), and never in another."""
    auth = harness.auth()
    thread = live.post("/v1/threads", json={"agent": "a1", "max_cost": "1.5"}, headers=auth)
    turn = live.post("/v1/turns", json={"agent": "a1", "thread": thread.json()["id"]},
                     headers=auth).json()  # fmt: skip
    refund: dict[str, Any] = {"tool": "billing.refund", "args": {"amount": 1}, "turn": turn["id"]}
    first = decide(live, harness, **refund, expected_cost="1").json()
    assert first["effect"] == "allow"
    assert harness.service.store.spent(f"thread:{thread.json()['id']}", 0) == 1_000_000
    assert decide(live, harness, **refund, expected_cost="1").json()["effect"] == "deny"
    other = live.post("/v1/threads", json={"agent": "a1"}, headers=auth).json()
    seq = harness.service.store.last_seq()
    mismatch = decide(live, harness, **refund, thread=other["id"], expected_cost="0")
    assert (mismatch.status_code, mismatch.json()["code"]) == (409, "turn-thread-mismatch")
    assert harness.service.store.last_seq() == seq


def test_connection_eligibility(live: Any, harness: Harness) -> None:
    read: dict[str, Any] = {"tool": "vault.read", "args": {"key": "k"}}
    none = decide(live, harness, **read).json()
    assert none["effect"] == "deny"
    assert "none is eligible" in none["reasons"][-1]["message"]
    other = live.post("/v1/identities", json={"label": "other"}, headers=harness.auth()).json()
    owned = live.post(
        "/v1/connections",
        json={"name": "c", "toolset": "vault", "credential": "s3cret", "owner": other["id"]},
        headers=harness.auth(),
    )
    assert owned.status_code == 201
    assert "s3cret" not in owned.text
    assert decide(live, harness, **read).json()["effect"] == "deny"  # not its identity
    mine = live.post(
        "/v1/connections",
        json={"name": "c2", "toolset": "vault", "credential": "s3cret2", "owner": harness.identity},
        headers=harness.auth(),
    ).json()
    assert decide(live, harness, **read).json()["effect"] == "allow"
    named = decide(live, harness, **read, connection=owned.json()["id"]).json()
    assert named["effect"] == "deny"
    assert decide(live, harness, **read, connection=mine["id"]).json()["effect"] == "allow"
    listing = live.get("/v1/connections", headers=harness.auth()).text
    assert "s3cret" not in listing and "sealed" not in listing


def test_tool_listing(client: Any, harness: Harness) -> None:
    response = client.get("/v1/agents/a1/tools", headers=harness.auth(harness.decide))
    assert response.status_code == 200
    tools = {t["tool"] if "tool" in t else t["name"]: t for t in response.json()["tools"]}
    assert "mail.send" in tools
    assert client.get("/v1/agents/nope/tools", headers=harness.auth()).status_code == 404


def test_listing_and_fit_compile_another_process_upload_off_the_event_loop(
    client: Any, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    with opened_again(harness.db, harness.key_file) as other:
        revision = other.upload([("policy.charter", POLICY_WITHOUT_MAIL)], "t").revision
    on_a_loop = slow_compiles(monkeypatch, 0)
    listing = client.get("/v1/agents/a1/tools", headers=harness.auth(harness.decide))
    assert listing.status_code == 200 and listing.json()["revision"] == revision
    fit = client.post("/v1/fit", json={"agent": "a1", "profile": "narrow"}, headers=harness.auth())
    assert fit.status_code == 200 and fit.json()["revision"] == revision
    assert on_a_loop == [False]  # compiled once, on a worker thread


def test_turn_pinning_across_a_policy_upload(client: Any, harness: Harness) -> None:
    turn = client.post("/v1/turns", json={"agent": "a1"}, headers=harness.auth()).json()
    assert turn["revision"] == 1
    stricter = POLICY_WITHOUT_MAIL
    upload = client.put(
        "/v1/policy", content=stricter, headers={**harness.auth(), "content-type": "text/plain"}
    )
    assert upload.status_code == 201, upload.text
    assert upload.json()["revision"] == 2
    pinned = decide(client, harness, tool="mail.send", args=MAIL, turn=turn["id"]).json()
    assert pinned["effect"] == "allow" and pinned["revision"] == 1
    fresh = decide(client, harness, tool="mail.send", args=MAIL).json()
    assert fresh["effect"] == "deny" and fresh["revision"] == 2
    new_turn = client.post("/v1/turns", json={"agent": "a1"}, headers=harness.auth()).json()
    assert new_turn["revision"] == 2
    other = decide(client, harness, tool="mail.send", args=MAIL, turn=new_turn["id"]).json()
    assert other["effect"] == "deny"


def test_a_turn_ends_and_then_grants_nothing_old(client: Any, harness: Harness) -> None:
    """A turn keeps its revision until `ends_at`; after that a call naming it is 409
    `turn-ended` and writes nothing, so no turn keeps a grant a later upload took away
    (an agent admitting turns ahead of time kept one for ever). A turn written before
    turns ended has an hour from its start."""
    harness.service.turn_lifetime_ms = 60_000
    turn = client.post("/v1/turns", json={"agent": "a1"}, headers=harness.auth()).json()
    assert turn["ends_at"] == turn["created_at"] + 60_000
    upload = client.put("/v1/policy", content=POLICY_WITHOUT_MAIL, headers=harness.auth())
    assert upload.status_code == 201, upload.text
    assert (
        decide(client, harness, tool="mail.send", args=MAIL, turn=turn["id"]).json()["effect"]
        == "allow"
    )
    seq = harness.service.store.last_seq()
    store = harness.service.store
    # (turns never change: ended ones are stored as such, under ids of their own)
    for n, ends in enumerate(
        ({"ends_at": turn["created_at"]}, {"created_at": turn["created_at"] - 3_600_000})
    ):
        doc = {k: v for k, v in (store.get("turns", turn["id"]) or {}).items() if k != "ends_at"}
        ended_turn = f"{turn['id']}-ended-{n}"
        assert store.insert("turns", ended_turn, {**doc, "id": ended_turn, **ends}, tag="a1")
        for path, body in (
            ("/v1/decisions", {"agent": "a1", "tool": "mail.send", "args": MAIL, "turn": ended_turn}),
            ("/v1/decisions/batch", {"calls": [{"agent": "a1", "tool": "mail.send", "args": MAIL,
                                                "turn": ended_turn}]}),
        ):  # fmt: skip
            ended = client.post(path, json=body, headers=harness.auth())
            assert (ended.status_code, ended.json()["code"]) == (409, "turn-ended"), ended.text
            assert "admit a new turn" in ended.json()["help"]
    assert store.last_seq() == seq


def _without_mail() -> str:
    from tests.api.conftest import POLICY

    return POLICY.replace('allow mail.send where args.to endswith "@example.com"', "")


POLICY_WITHOUT_MAIL = _without_mail()


def test_a_childs_turn_is_capped_by_a_profile_its_revision_does_not_declare(
    harness: Harness, live: Any
) -> None:
    """A turn decides on its revision, and so reads the profile budgets of its agent's
    chain there; a parent moved meanwhile to a profile that revision does not declare was
    left without that profile's cap, and its child spent past it for the rest of its turn.
    Such a profile's budget is read from the latest revision, as it is now."""
    admin = harness.auth()
    store = harness.service.store
    harness.add_agent("p", "wide")
    harness.add_agent("kid", "wide")
    kid = dict(store.get("agents", "kid") or {})
    kid["parent"] = "p"
    store.update("agents", "kid", kid, tag=kid["parent"])  # as every agent write tags it
    harness.service.read.forget_agent("kid")
    turn = live.post("/v1/turns", json={"agent": "kid"}, headers=admin).json()
    thread = live.post("/v1/threads", json={"agent": "kid"}, headers=admin).json()["id"]

    def capped(amount: int) -> None:
        profile = f"profile capped {{\n  roles mailer\n  hooks none\n  budget {amount} usd per total\n}}\n"
        assert live.put("/v1/policy", content=POLICY + profile, headers=admin).status_code == 201

    capped(2)
    moved = live.patch("/v1/agents/p", json={"profile": "capped"}, headers=admin)
    assert moved.status_code == 200, moved.text
    call: dict[str, Any] = {"agent": "kid", "tool": "billing.refund", "args": {"amount": 1},
                            "turn": turn["id"], "expected_cost": "1"}  # fmt: skip
    effects = [decide(live, harness, **call).json()["effect"] for _ in range(2)]
    batch = {"calls": [{**call, "thread": thread}] * 2}  # (in a thread: caps not kept)
    answer = live.post("/v1/decisions/batch", json=batch, headers=admin).json()
    effects += [d["effect"] for d in answer["decisions"]]
    assert effects == ["allow", "allow", "deny", "deny"]
    denied = answer["decisions"][0]["reasons"][-1]
    assert denied["kind"] == "budget" and "profile `capped` budget 2 USD" in denied["message"]
    capped(3)  # the latest revision's budget, not one kept from an earlier call
    assert [decide(live, harness, **call).json()["effect"] for _ in range(2)] == ["allow", "deny"]
    assert store.spent("agent:p", 0) == 3_000_000


def test_a_deleted_agents_turns_do_not_decide_for_an_agent_made_under_its_id(
    client: Any, harness: Harness
) -> None:
    """An agent made later under a deleted agent's id is another agent (its tokens are
    revoked with it: docs/http.md, "Agents, threads and identities"), and so are its
    turns: a turn admitted for the old one pinned the old one's profile, and a call naming
    it was decided for the new agent on that profile (its roles, hooks and budget) until
    the turn ended."""
    admin = harness.auth()
    harness.add_agent("old", "wide")
    turn = client.post("/v1/turns", json={"agent": "old"}, headers=admin).json()
    assert client.delete("/v1/agents/old", headers=admin).status_code == 204
    harness.add_agent("old", "narrow")  # another agent, without refunds
    refund: dict[str, Any] = {"agent": "old", "tool": "billing.refund", "args": {"amount": 5}}
    assert decide(client, harness, **refund).json()["effect"] == "deny"
    seq = harness.service.store.last_seq()
    for path, body in (
        ("/v1/decisions", {**refund, "turn": turn["id"]}),
        ("/v1/decisions/batch", {"calls": [{**refund, "turn": turn["id"]}]}),
    ):
        answer = client.post(path, json=body, headers=admin)
        assert (answer.status_code, answer.json()["code"]) == (404, "turn-not-found"), answer.text
    assert harness.service.store.last_seq() == seq
    assert harness.service.store.get("turns", turn["id"]) is None


def _narrowed(other: Service) -> None:
    agents_update(other, Principal("t", "admin"), c.UpdateAgent(id="a1", profile="narrow"))


def _uploaded(other: Service) -> None:
    with other.store.atomic():
        other.upload([("policy.charter", POLICY_WITHOUT_MAIL)], "t")


def _deleted(other: Service) -> None:
    agents_delete(other, Principal("t", "admin"), c.DeleteAgent(id="a1"))


# (what another process commits, a call of the turn, its effect or status, what is pinned)
MEANWHILE: dict[str, tuple[Callable[[Service], None], dict[str, Any], Any, dict[str, Any]]] = {
    "agent narrowed": (_narrowed, {"tool": "billing.refund", "args": {"amount": 5}}, "deny",
                       {"profile": "narrow", "revision": 1}),
    "policy uploaded": (_uploaded, {"tool": "mail.send", "args": MAIL}, "deny",
                        {"profile": "support", "revision": 2}),
    "agent deleted": (_deleted, {}, 404, {}),
}  # fmt: skip


@pytest.mark.parametrize("change", MEANWHILE)
def test_a_turn_is_pinned_to_what_was_committed_when_it_was_admitted(
    live: Any, harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """A turn pins the agent's profile and the latest revision as committed when it is
    admitted: read inside the transaction that writes it, as a thread's agent is. Another
    process's change committed after this one's last look (its token check) and before
    the turn was written went unseen: an agent moved to a narrower profile got a turn on
    its old one, a new policy a turn on the revision it replaced (each deciding so for
    the turn's whole lifetime), a deleted agent a turn of its own. A revision this
    process has not compiled is compiled off the event loop."""
    act, call, outcome, pinned = MEANWHILE[change]
    service = harness.service
    service.agent("a1")  # cached here
    other.current()  # (compiled there before compiles are watched)
    on_a_loop = slow_compiles(monkeypatch, 0)
    real = service.snapshots.current
    pending = [lambda: act(other)]

    def looked(*args: Any, **kwargs: Any) -> Any:  # the handler's look, then the change
        found = real(*args, **kwargs)
        if pending:
            pending.pop()()
        return found

    monkeypatch.setattr(service.snapshots, "current", looked)
    admitted = live.post("/v1/turns", json={"agent": "a1"}, headers=harness.auth(harness.decide))
    assert pending == []
    if outcome == 404:
        assert code_of(admitted) == (404, "agent-not-found")
        assert list(service.store.scan("turns")) == []
        return
    assert admitted.status_code == 201, admitted.text
    turn = admitted.json()
    assert {key: turn[key] for key in pinned} == pinned
    decided = decide(live, harness, **call, turn=turn["id"]).json()
    assert decided["effect"] == outcome
    assert on_a_loop == ([False] if change == "policy uploaded" else [])
