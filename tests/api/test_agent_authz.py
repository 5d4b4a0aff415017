"""What an agent's own token may manage: never more than its caller could (DESIGN.md
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
