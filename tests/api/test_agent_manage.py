"""An agent's token manages only itself and its descendants, and only to narrow
(docs/design.md section 3): a child, or an agent it changes, can do nothing the caller could
not, decided with its own attributes (`agent.name`, `agent.metadata`, ...)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import POLICY, Harness, code_of, depth_spy

OPS = """
role ops-tools {
  allow agents.*
  deny agents.delete where agent.name != "ops-bot"
  allow billing.refund where agent.metadata.tier == "gold"
}
profile automation {
  roles ops-tools
  hooks none
}
"""


def test_a_child_or_a_rename_cannot_take_attributes_the_policy_reads(
    live: Any, harness: Harness
) -> None:
    """`deny agents.delete where agent.name != "ops-bot"`: an agent named `ops` must not
    get past it by naming a child (or itself) `ops-bot`; the fit check compares both
    sides on one agent, so a differing attribute that a condition reads is refused."""
    admin = harness.auth()
    assert live.put("/v1/policy", content=POLICY + OPS, headers=admin).status_code == 201
    harness.add_agent("ops", "automation", metadata={"tier": "gold"})
    ops = harness.auth(harness.token_for("ops"))
    same = {"name": "ops", "profile": "automation", "metadata": {"tier": "gold", "x": 1}}
    victim = live.post("/v1/agents", json=same, headers=ops).json()["id"]  # its own child
    assert code_of(live.delete(f"/v1/agents/{victim}", headers=ops)) == (403, "denied-by-policy")
    logged = harness.service.store.last_seq()
    for child in (
        {"name": "ops-bot", "profile": "automation", "metadata": {"tier": "gold"}},
        {"name": "ops", "profile": "automation"},  # metadata.tier absent
        {"name": "ops", "profile": "automation", "metadata": {"tier": 1}},
    ):
        refused = live.post("/v1/agents", json=child, headers=ops)
        assert code_of(refused) == (403, "agent-attribute-differs"), refused.text
        assert refused.json()["attributes"][0]["read_by"].startswith("role `ops-tools`")
    for change in ({"name": "ops-bot"}, {"metadata": {"tier": "silver"}}):
        refused = live.patch("/v1/agents/ops", json=change, headers=ops)
        assert code_of(refused) == (403, "agent-attribute-differs"), refused.text
        assert "`agent." in refused.json()["detail"]
    assert (harness.service.store.get("agents", "ops") or {})["name"] == "ops"
    assert harness.service.store.last_seq() == logged  # refused: nothing written
    # the same attributes (and metadata no condition reads) are fine, and change nothing
    assert live.patch("/v1/agents/ops", json={"metadata": {"x": 2}}, headers=ops).status_code == 200
    assert code_of(live.delete(f"/v1/agents/{victim}", headers=ops)) == (403, "denied-by-policy")
    assert harness.service.store.get("agents", victim) is not None


def test_an_agent_deletes_only_its_descendants_without_children(
    live: Any, harness: Harness
) -> None:
    admin = harness.auth()
    assert live.put("/v1/policy", content=POLICY + OPS, headers=admin).status_code == 201
    harness.add_agent("bot", "automation", name="ops-bot")
    harness.add_agent("victim", "narrow")
    bot = harness.auth(harness.token_for("bot"))
    child = live.post("/v1/agents", json={"name": "ops-bot", "profile": "automation"}, headers=bot)
    child_id = child.json()["id"]
    grandchild = live.post("/v1/agents", json={"name": "ops-bot", "profile": "automation"},
                           headers=harness.auth(harness.token_for(child_id)))  # fmt: skip
    assert grandchild.status_code == 201, grandchild.text
    refused = live.delete("/v1/agents/victim", headers=bot)
    assert code_of(refused) == (403, "not-managed-agent") and "`victim`" in refused.json()["detail"]
    # its children's spending would no longer reach the caps above it
    assert code_of(live.delete(f"/v1/agents/{child_id}", headers=bot)) == (
        409,
        "agent-has-children",
    )
    assert live.delete(f"/v1/agents/{grandchild.json()['id']}", headers=bot).status_code == 204
    assert live.delete(f"/v1/agents/{child_id}", headers=bot).status_code == 204
    assert harness.service.store.get("agents", "victim") is not None


def test_an_agent_updates_only_itself_and_its_descendants_and_only_to_narrow(
    live: Any, harness: Harness
) -> None:
    admin = harness.auth()
    total = {"amount": "1", "period": "total"}
    harness.add_agent("p1", "support", budget=total)
    p1 = harness.auth(harness.token_for("p1"))
    stranger = live.post("/v1/identities", json={}, headers=admin).json()["id"]
    harness.add_agent("v1", "narrow", identity=stranger)

    def patch(target: str, body: dict[str, Any], token: dict[str, str]) -> Any:
        return live.patch(f"/v1/agents/{target}", json=body, headers=token)

    # its own budget: never looser, not even back to what it was
    loose = {"budget": {"amount": "500", "period": "total"}}
    assert code_of(patch("p1", loose, p1)) == (403, "budget-looser")
    assert patch("p1", {"budget": {"amount": "0.5", "period": "total"}}, p1).status_code == 200
    assert code_of(patch("p1", {"budget": total}, p1)) == (403, "budget-looser")
    # another identity's agent, not its descendant: refused whatever the change
    assert code_of(patch("v1", {"profile": "support"}, p1)) == (403, "not-managed-agent")
    assert (harness.service.store.get("agents", "v1") or {})["profile"] == "narrow"
    # a child: within the parent's caps; it cannot touch its parent
    kid = live.post("/v1/agents", json={"name": "p1", "profile": "support-child",
                                        "budget": {"amount": "0.2", "period": "total"}},
                    headers=p1).json()  # fmt: skip
    kid_token = harness.auth(harness.token_for(kid["id"]))
    assert code_of(patch(kid["id"], {"budget": {"amount": "0.4", "period": "total"}}, kid_token)) == (
        403, "budget-looser")  # fmt: skip
    for change in (loose, {"name": "p1-renamed"}):
        assert code_of(patch("p1", change, kid_token)) == (403, "not-managed-agent")
    assert patch(kid["id"], {"budget": {"amount": "0.4", "period": "total"}}, p1).status_code == 200
    refused = patch(kid["id"], {"budget": {"amount": "0.9", "period": "total"}}, p1)
    assert code_of(refused) == (403, "budget-looser")
    # a wider profile for its child (no deny of agents.delete, no hook): does not fit
    assert code_of(patch(kid["id"], {"profile": "wide"}, p1)) == (403, "does-not-fit")
    assert (harness.service.store.get("agents", kid["id"]) or {})["profile"] == "support-child"
    # the budget that was allowed is what the decision uses: a 2 USD call is over it
    body = {"agent": "p1", "tool": "mail.send", "expected_cost": "2",
            "args": {"to": "a@example.com", "subject": "s", "body": "b"}}  # fmt: skip
    assert live.post("/v1/decisions", json=body, headers=p1).json()["effect"] == "deny"


def test_a_delete_it_may_not_make_is_refused_before_it_pauses(live: Any, harness: Harness) -> None:
    """The default hooks pause `agents.delete` for a human; a delete of an agent the
    caller does not manage is refused at once (no approval, nothing logged), and the
    pause of one it does manage is for a human, not the agent or its child, to decide."""
    careful = "role deleter {\n  allow agents.*\n}\nprofile careful-ops {\n  roles deleter\n}\n"
    admin = harness.auth()
    assert live.put("/v1/policy", content=POLICY + careful, headers=admin).status_code == 201
    harness.add_agent("oc", "careful-ops")
    oc = harness.auth(harness.token_for("oc"))
    kid = live.post("/v1/agents", json={"name": "oc", "profile": "careful-ops"}, headers=oc)
    assert kid.status_code == 201, kid.text
    logged = harness.service.store.last_seq()
    assert code_of(live.delete("/v1/agents/a1", headers=oc)) == (403, "not-managed-agent")
    assert harness.service.store.last_seq() == logged
    assert live.get("/v1/approvals", headers=admin).json()["items"] == []
    paused = live.delete(f"/v1/agents/{kid.json()['id']}", headers=oc)
    assert paused.status_code == 202, paused.text
    approval = paused.json()["approval_id"]
    for token in (oc, harness.auth(harness.token_for(kid.json()["id"]))):
        refused = live.post(f"/v1/approvals/{approval}/approve", headers=token)
        assert code_of(refused) == (403, "self-approval")
    assert live.post(f"/v1/approvals/{approval}/approve", headers=admin).status_code == 200
    assert harness.service.store.get("agents", kid.json()["id"]) is None


def test_the_solver_runs_before_the_write_transaction(
    live: Any, harness: Harness, monkeypatch: Any
) -> None:
    """An agent's `agents.create`, `agents.update` and `roles.create` are fit-checked
    before the transaction that logs their decision (z3 may take seconds, and every
    decision waits on that transaction's lock); the operation's own check inside it finds
    the fit remembered and asks the solver nothing."""
    from engine.fit import isolated

    store = harness.service.store
    depths: list[Any] = []  # the check asked and the store's transaction depth, each time
    # (spied where the service starts a check's process: the check itself runs in it)
    named = depth_spy(store, isolated.run, depths, key=lambda fn, *args, **kwargs: fn.__name__)
    monkeypatch.setattr(isolated, "run", named)
    admin = harness.auth()
    policy = POLICY + OPS.replace("  allow agents.*\n", "  allow agents.*\n  allow roles.*\n")
    assert live.put("/v1/policy", content=policy, headers=admin).status_code == 201
    harness.add_agent("ops", "automation", metadata={"tier": "gold"})
    ops = harness.auth(harness.token_for("ops"))
    child = {"name": "ops", "profile": "automation", "metadata": {"tier": "gold"}}
    made = live.post("/v1/agents", json=child, headers=ops)
    assert made.status_code == 201, made.text
    changed = live.patch(f"/v1/agents/{made.json()['id']}", json={"profile": "automation"},
                         headers=ops)  # fmt: skip
    assert changed.status_code == 200, changed.text
    role = {"name": "ops-narrow", "source": "role ops-narrow {\n  allow agents.list\n}\n"}
    created = live.post("/v1/roles", json=role, headers=ops)
    assert created.status_code == 201, created.text
    # one question of each kind (the update asks the create's profile question again:
    # remembered), both asked outside any transaction
    assert sorted(depths) == [("fit_profile", 0), ("fit_source", 0)], depths


def test_policies_compile_before_the_write_transaction(
    live: Any, harness: Harness, monkeypatch: Any
) -> None:
    """A policy upload, and a role's create, update or delete (an admin's, and an agent's,
    whose operation runs inside the transaction that logs its decision), check and compile
    the new policy before that transaction: seconds for a large policy, during which its
    lock held off every writer and every worker's decisions (a reviewer saw 40 s stalls
    and a 503). The upload inside it takes what was compiled."""
    import api.service.core as core
    from engine.compile import compile_workspace

    depths: list[int] = []  # the store's transaction depth at each compile
    spy = depth_spy(harness.service.store, compile_workspace, depths)
    monkeypatch.setattr(core, "compile_workspace", spy)
    admin = harness.auth()
    policy = POLICY + OPS.replace("  allow agents.*\n", "  allow agents.*\n  allow roles.*\n")
    assert live.put("/v1/policy", content=policy, headers=admin).status_code == 201
    harness.add_agent("ops", "automation", metadata={"tier": "gold"})
    ops = harness.auth(harness.token_for("ops"))
    for auth, name in ((admin, "by-admin"), (ops, "by-agent")):
        role = {"name": name, "source": f"role {name} {{\n  allow agents.list\n}}\n"}
        assert live.post("/v1/roles", json=role, headers=auth).status_code == 201
        narrower = {"source": f"role {name} {{\n  allow agents.get\n}}\n"}
        assert live.patch(f"/v1/roles/{name}", json=narrower, headers=auth).status_code == 200
        assert live.delete(f"/v1/roles/{name}", headers=auth).status_code == 204
    assert harness.service.store.latest_revision() == 8
    # one compile per new revision (7 here), each outside any transaction
    assert len(depths) == 7 and all(depth == 0 for depth in depths), depths


NAMES = """
role no-root {
  allow agents.*
  deny agents.create where args.name == "root"
  deny agents.update where args.name == "root"
}
profile rooted {
  roles no-root
  hooks none
}
"""


def test_an_agents_name_is_decided_as_it_is_stored(live: Any, harness: Harness) -> None:
    """The name is stored without its surrounding whitespace, so it is decided that way
    too: `" root "` must meet `deny agents.create where args.name == "root"`, and the
    logged arguments are the ones that were stored."""
    admin = harness.auth()
    assert live.put("/v1/policy", content=POLICY + NAMES, headers=admin).status_code == 201
    harness.add_agent("maker", "rooted")
    maker = harness.auth(harness.token_for("maker"))
    for name in (" root ", "root\n", "\x1croot\u3000"):  # what str.strip() takes off
        created = live.post("/v1/agents", json={"name": name, "profile": "rooted"}, headers=maker)
        assert code_of(created) == (403, "denied-by-policy"), (name, created.text)
        assert created.json()["decision"]["reasons"][0]["kind"] == "deny"
        renamed = live.patch("/v1/agents/maker", json={"name": name}, headers=maker)
        assert code_of(renamed) == (403, "denied-by-policy"), (name, renamed.text)
    agents = live.get("/v1/agents", headers=admin).json()["items"]
    assert "root" not in {a["name"] for a in agents}
    logged = harness.service.store.last_seq()
    blank = live.post("/v1/agents", json={"name": "  ", "profile": "rooted"}, headers=maker)
    assert code_of(blank) == (400, "invalid-name") and harness.service.store.last_seq() == logged
    made = live.post("/v1/agents", json={"name": "  kid ", "profile": "rooted"}, headers=maker)
    assert made.status_code == 201, made.text
    renamed = live.patch("/v1/agents/maker", json={"name": "\tmaker-2 "}, headers=maker)
    assert renamed.status_code == 200, renamed.text
    log = live.get("/v1/decisions", params={"after_seq": logged}, headers=admin).json()
    assert [d["args"]["name"] for d in log["decisions"]] == ["kid", "maker-2"]
    stored = harness.service.store
    assert (stored.get("agents", made.json()["id"]) or {})["name"] == "kid"
    assert (stored.get("agents", "maker") or {})["name"] == "maker-2"


@pytest.mark.parametrize("approver", ["admin", "agent"])
def test_an_approved_role_change_compiles_before_the_write_transaction(
    live: Any, harness: Harness, monkeypatch: Any, approver: str
) -> None:
    """A paused `roles.update` approved after the policy moved compiles the changed policy
    when approved: before the approval's transaction (the precheck runs as the agent, as
    when it was asked), not inside it with every writer held off. So too when an agent
    approves (its `approvals.approve` is decided in a transaction that then runs it)."""
    import api.service.core as core
    from engine.compile import compile_workspace

    admin = harness.auth()
    held = POLICY + OPS.replace("  allow agents.*\n", "  allow agents.*\n  allow roles.*\n")
    held += 'hook ask on roles.update {\n  pause "a human approves"\n}\n'
    held = held.replace("profile automation {\n  roles ops-tools\n  hooks none",
                        "profile automation {\n  roles ops-tools, guard\n  hooks ask")  # fmt: skip
    files = [{"path": "main.charter", "text": held},
             {"path": "api/roles/guard.charter", "text": "role guard {\n  deny agents.delete\n}\n"}]  # fmt: skip
    assert live.put("/v1/policy", json={"files": files}, headers=admin).status_code == 201
    harness.add_agent("ops", "automation", metadata={"tier": "gold"})
    ops = harness.auth(harness.token_for("ops"))
    narrower = {"source": "role guard {\n  deny agents.delete\n  deny agents.update\n}\n"}
    paused = live.patch("/v1/roles/guard", json=narrower, headers=ops)
    assert paused.status_code == 202, paused.text
    files[0]["text"] += "# moved\n"  # the policy moves: what was compiled ahead is stale
    assert live.put("/v1/policy", json={"files": files}, headers=admin).status_code == 201
    approving = admin
    if approver == "agent":  # of another identity and tree: it may decide the approval
        stranger = live.post("/v1/identities", json={}, headers=admin).json()["id"]
        rev = harness.add_agent("rev", "support", identity=stranger)
        approving = harness.auth(harness.token_for(rev))
    depths: list[int] = []
    spy = depth_spy(harness.service.store, compile_workspace, depths)
    monkeypatch.setattr(core, "compile_workspace", spy)
    approval = paused.json()["approval_id"]
    approved = live.post(f"/v1/approvals/{approval}/approve", headers=approving)
    assert approved.status_code == 200 and approved.json()["decision"]["effect"] == "allow"
    assert "deny agents.update" in approved.json()["result"]["source"]
    assert depths == [0], depths
