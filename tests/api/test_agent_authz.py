"""What an agent's own token may manage: never more than its caller could (docs/design.md
section 3), never another identity's credential, never its own pause."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Harness


def test_an_agent_changes_only_connections_of_its_own_identity(live: Any, harness: Harness) -> None:
    admin = harness.auth()
    agent = harness.auth(harness.agent_token)
    other = live.post("/v1/identities", json={}, headers=admin).json()["id"]
    made = {"name": "x", "toolset": "vault", "credential": "theirs"}
    foreign = live.post("/v1/connections", json={**made, "owner": other}, headers=admin).json()
    workspace = live.post("/v1/connections", json=made, headers=admin).json()
    sealed = harness.service.store.get("connections", foreign["id"])
    for target in (foreign["id"], workspace["id"]):
        patched = live.patch(f"/v1/connections/{target}", json={"credential": "attacker"},
                             headers=agent)  # fmt: skip
        assert (patched.status_code, patched.json()["code"]) == (403, "not-own-identity")
        assert f"`{target}`" in patched.json()["detail"]
        deleted = live.delete(f"/v1/connections/{target}", headers=agent)
        assert (deleted.status_code, deleted.json()["code"]) == (403, "not-own-identity")
    assert harness.service.store.get("connections", foreign["id"]) == sealed
    assert harness.service.store.get("connections", workspace["id"]) is not None
    # its own identity's connection: it may replace the credential and remove it
    mine = live.post("/v1/connections", json=made, headers=agent).json()
    assert mine["owner"] == harness.identity
    patched = live.patch(f"/v1/connections/{mine['id']}", json={"credential": "new"},
                         headers=agent)  # fmt: skip
    assert patched.status_code == 200, patched.text
    assert live.delete(f"/v1/connections/{mine['id']}", headers=agent).status_code == 204


MAIL = {"to": "bob@example.com", "subject": "hi", "body": "hello"}


def test_a_running_turn_keeps_the_profile_it_was_admitted_with(
    client: Any, harness: Harness
) -> None:
    """docs/design.md section 1: a change of profile applies from the agent's next admitted
    turn; a turn already running keeps its snapshot (roles, hooks and budget caps), in
    a single decision and in a batch."""
    admin = harness.auth()
    harness.add_agent("t1", "narrow")
    harness.add_agent("t2", "support-child")
    old = {
        a: client.post("/v1/turns", json={"agent": a}, headers=admin).json() for a in ("t1", "t2")
    }
    for agent, profile in (("t1", "wide"), ("t2", "support")):
        patched = client.patch(f"/v1/agents/{agent}", json={"profile": profile}, headers=admin)
        assert patched.status_code == 200, patched.text
    new = {
        a: client.post("/v1/turns", json={"agent": a}, headers=admin).json() for a in ("t1", "t2")
    }
    assert old["t1"]["profile"] == "narrow" and new["t1"]["profile"] == "wide"
    refund = {"agent": "t1", "tool": "billing.refund", "args": {"amount": 5}}
    costly = {"agent": "t2", "tool": "mail.send", "args": MAIL, "expected_cost": "7"}

    def effects(turns: dict[str, Any] | None, *calls: dict[str, Any]) -> list[str]:
        calls = tuple({**c, "turn": turns[c["agent"]]["id"]} if turns else c for c in calls)
        single = [client.post("/v1/decisions", json=c, headers=admin).json() for c in calls]
        batch = client.post("/v1/decisions/batch", json={"calls": calls}, headers=admin)
        assert batch.status_code == 200, batch.text
        return [d["effect"] for d in single + batch.json()["decisions"]]

    # narrow has no refunds; support-child's 5 USD cap refuses a 7 USD call (nothing charged)
    assert effects(old, refund, costly) == ["deny"] * 4
    assert effects(new, refund) == effects(None, refund) == ["allow"] * 2
    on_new = client.post("/v1/decisions", json={**costly, "turn": new["t2"]["id"]}, headers=admin)
    assert on_new.json()["effect"] == "allow"  # under support's 10 USD cap


def test_a_refused_management_request_writes_no_decision(live: Any, harness: Harness) -> None:
    """docs/http.md, Errors: a refused request writes nothing, so the decision of an
    agent's management request is logged only with the operation it allowed; a policy
    deny (403) and a pause (202) are the request's outcome and stay logged."""
    agent = harness.auth(harness.agent_token)
    other = live.post("/v1/identities", json={}, headers=harness.auth()).json()["id"]
    assert (
        live.post("/v1/identities/import", json={"seed": "33" * 32}, headers=agent).status_code
        == 201
    )
    store = harness.service.store
    logged = store.last_seq()
    counted = dict(harness.service.metrics.decisions)
    wide = {"name": "team-any", "source": "role team-any {\n  allow mail.send\n}\n"}
    conn = {"name": "c", "toolset": "vault", "credential": "x"}
    refused = [
        ("POST", "/v1/connections", {**conn, "toolset": "nope"}, 400, "unknown-toolset"),
        ("POST", "/v1/connections", {**conn, "owner": other}, 403, "not-own-identity"),
        ("POST", "/v1/identities/import", {"seed": "zz"}, 400, "invalid-seed"),
        ("POST", "/v1/identities/import", {"seed": "33" * 32}, 409, "identity-exists"),
        ("PATCH", "/v1/connections/nope", {"name": "n"}, 404, "connection-not-found"),
        ("POST", "/v1/roles", wide, 403, "does-not-fit"),
        ("POST", "/v1/agents", {"name": "k", "profile": "nope"}, 400, "unknown-profile"),
        ("GET", "/v1/agents?cursor=junk", None, 400, "bad-cursor"),
    ]
    for method, path, body, status, code in refused:
        response = live.request(method, path, json=body, headers=agent)
        assert (response.status_code, response.json()["code"]) == (status, code), response.text
        assert store.last_seq() == logged, (method, path)
    assert harness.service.metrics.decisions == counted  # nor counted as decided
    # a policy deny is logged (manager denies agents.delete), an allow, and a pause
    denied = live.delete("/v1/agents/a1", headers=agent)
    assert (denied.status_code, denied.json()["code"]) == (403, "denied-by-policy")
    assert store.last_seq() == logged + 1
    assert live.get("/v1/agents", headers=agent).status_code == 200
    assert store.last_seq() == logged + 2
    harness.add_agent("m1", "careful")  # default hooks: roles.create pauses
    source = 'role team-x {\n  allow mail.send where args.to == "a@example.com"\n}\n'
    paused = live.post("/v1/roles", json={"name": "team-x", "source": source},
                       headers=harness.auth(harness.token_for("m1")))  # fmt: skip
    assert paused.status_code == 202 and store.last_seq() == logged + 3


def test_an_agent_never_decides_a_pause_of_its_own_tree_or_identity(
    live: Any, harness: Harness
) -> None:
    """A pause asks a human: the agent that raised it, its parent, its children and any
    agent of its identity get 403 `self-approval`; an agent of another identity and
    tree may decide it (when its roles allow `approvals.*`), as may an admin."""
    a1 = harness.auth(harness.agent_token)
    kid = live.post("/v1/agents", json={"name": "kid", "profile": "support-child"}, headers=a1)
    assert kid.status_code == 201, kid.text
    harness.add_agent("m1", "careful")  # the same identity, another tree
    stranger = live.post("/v1/identities", json={}, headers=harness.auth()).json()["id"]
    harness.add_agent("rev", "support", identity=stranger)

    def pause() -> str:
        body = {"agent": "a1", "tool": "billing.refund", "args": {"amount": 60}}
        decided = live.post("/v1/decisions", json=body, headers=a1).json()
        assert decided["effect"] == "pause"
        return str(decided["approval_id"])

    approval = pause()
    logged = harness.service.store.last_seq()
    for who in ("a1", kid.json()["id"], "m1"):
        token = harness.auth(harness.agent_token if who == "a1" else harness.token_for(who))
        for verb in ("approve", "reject"):
            refused = live.post(f"/v1/approvals/{approval}/{verb}", json={}, headers=token)
            assert (refused.status_code, refused.json()["code"]) == (403, "self-approval")
            assert f"`{approval}`" in refused.json()["detail"]
    assert (harness.service.store.get("approvals", approval) or {})["status"] == "pending"
    assert harness.service.store.last_seq() == logged
    # an agent outside the tree and the identity, and an admin, may decide
    rev = harness.auth(harness.token_for("rev"))
    approved = live.post(f"/v1/approvals/{approval}/approve", headers=rev)
    assert approved.status_code == 200, approved.text
    assert approved.json()["decision"]["effect"] == "allow"
    rejected = live.post(f"/v1/approvals/{pause()}/reject", json={}, headers=harness.auth())
    assert rejected.status_code == 200, rejected.text


GUARDED = {
    "main.charter": """
role ops {
  allow roles.*, agents.*
}
profile ops {
  roles ops, guard
  hooks none
}
profile ops-child {
  roles ops, guard-child
  hooks none
}
""",
    "api/roles/guard.charter": "role guard {\n  deny agents.delete\n}\n",
    "api/roles/guard-child.charter": "role guard-child {\n  deny agents.delete\n}\n",
}


def _deletes(live: Any, harness: Harness, agent: str) -> str:
    call = {"agent": agent, "tool": "agents.delete", "args": {"id": "x"}}
    effect: str = live.post("/v1/decisions", json=call, headers=harness.auth()).json()["effect"]
    return effect


def test_an_agent_cannot_lift_a_deny_by_rewriting_a_role(live: Any, harness: Harness) -> None:
    """The new role fits its writer's access (it only allows `agents.get`), but the
    profiles that name the role held its deny: its own (agents.delete went from deny to
    allow) and its child's (which then could do what its parent may not). Every profile
    naming a role an agent changes must narrow at most (docs/design.md section 3)."""
    files = [{"path": path, "text": text} for path, text in GUARDED.items()]
    # (a1's profile goes with the harness's policy: meant)
    put = live.put("/v1/policy?remove_in_use=true", json={"files": files}, headers=harness.auth())
    assert put.status_code == 201, put.text
    harness.add_agent("ops", "ops")
    token = harness.auth(harness.token_for("ops"))
    child = live.post("/v1/agents", json={"name": "kid", "profile": "ops-child"}, headers=token)
    assert child.status_code == 201, child.text
    kid = child.json()["id"]
    revision = harness.service.store.latest_revision()
    lifted = {"source": "role {name} {{\n  allow agents.get\n}}\n"}
    for role, agent in (("guard", "ops"), ("guard-child", kid)):
        source = {"source": lifted["source"].format(name=role)}
        refused = live.patch(f"/v1/roles/{role}", json=source, headers=token)
        assert (refused.status_code, refused.json()["code"]) == (403, "does-not-fit"), role
        assert f"the change to role `{role}` would widen profile" in refused.json()["detail"]
        deleted = live.delete(f"/v1/roles/{role}", headers=token)  # (a profile names it: no policy)
        assert (deleted.status_code, deleted.json()["code"]) == (422, "policy-invalid")
        assert _deletes(live, harness, agent) == "deny"
    assert harness.service.store.latest_revision() == revision
    # a change that keeps the deny and adds one narrows: it is written
    narrower = "role guard {\n  deny agents.delete\n  deny agents.update\n}\n"
    changed = live.patch("/v1/roles/guard", json={"source": narrower}, headers=token)
    assert changed.status_code == 200, changed.text
    assert harness.service.store.latest_revision() == revision + 1
