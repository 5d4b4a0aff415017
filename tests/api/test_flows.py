"""The approval flow, resources with pagination, and 8 concurrent clients."""

from __future__ import annotations

import threading
from typing import Any

import httpx

from api.service.logrows import expand
from tests.api.conftest import POLICY, Harness
from tests.store.tables import sound

MAIL = {"to": "bob@example.com", "subject": "hi", "body": "hello"}


def test_approval_flow(client: Any, harness: Harness) -> None:
    auth = harness.auth()
    big = {"agent": "a1", "tool": "billing.refund", "args": {"amount": 80}}
    paused = client.post("/v1/decisions", json=big, headers=auth).json()
    assert paused["effect"] == "pause"
    approval = paused["approval_id"]
    pending = client.get("/v1/approvals?status=pending", headers=auth).json()["items"]
    assert [a["id"] for a in pending] == [approval]
    assert "sealed_call" not in pending[0]
    done = client.post(f"/v1/approvals/{approval}/approve", headers=auth)
    assert done.status_code == 200
    assert done.json()["decision"]["effect"] == "allow"
    assert done.json()["decision"]["args"] == {"amount": 80, "reason": ""}
    again = client.post(f"/v1/approvals/{approval}/approve", headers=auth)
    assert again.status_code == 409 and again.json()["code"] == "approval-not-pending"
    assert client.get("/v1/approvals?status=pending", headers=auth).json()["items"] == []
    # approving grants nothing by itself: a policy that drops the grant denies on approval
    second = client.post("/v1/decisions", json=big, headers=auth).json()["approval_id"]
    no_refunds = POLICY.replace("  allow billing.refund\n", "")
    assert client.put("/v1/policy", content=no_refunds, headers=auth).status_code == 201
    final = client.post(f"/v1/approvals/{second}/approve", headers=auth).json()["decision"]
    assert final["effect"] == "deny" and final["revision"] == 2
    third = client.post("/v1/decisions", json={**big, "tool": "mail.send", "args": MAIL},
                        headers=auth)  # fmt: skip
    assert third.json()["effect"] == "allow"
    log = [expand(e) for _, e in sound(harness.service.store.read_decisions(0, 100))]
    assert [e.get("approval") for e in log][:2] == [approval, approval]


def test_reject(live: Any, harness: Harness) -> None:
    big = {"agent": "a1", "tool": "billing.refund", "args": {"amount": 99}}
    approval = live.post("/v1/decisions", json=big, headers=harness.auth()).json()["approval_id"]
    rejected = live.post(f"/v1/approvals/{approval}/reject", json={"reason": "no"},
                         headers=harness.auth())  # fmt: skip
    assert rejected.json()["approval"]["status"] == "rejected"
    assert live.post(f"/v1/approvals/{approval}/approve", headers=harness.auth()).status_code == 409
    assert live.post("/v1/approvals/nope/reject", headers=harness.auth()).status_code == 404


def test_resources_crud_and_stable_pages(client: Any, harness: Harness) -> None:
    auth = harness.auth()
    ident = client.post("/v1/identities", json={"label": "ops"}, headers=auth).json()
    assert ident["id"].startswith("z6Mk") and ident["name"] == "ops"
    made = client.post("/v1/agents", json={"name": "b", "profile": "narrow",
                                            "identity": ident["id"]}, headers=auth)  # fmt: skip
    assert made.status_code == 201 and made.json()["status"] == "idle"
    agent_id = made.json()["id"]
    patched = client.patch(f"/v1/agents/{agent_id}", json={"status": "running"}, headers=auth)
    assert patched.json()["status"] == "running"
    bad = client.patch(f"/v1/agents/{agent_id}", json={"profile": "nope"}, headers=auth)
    assert bad.status_code == 400 and bad.json()["code"] == "unknown-profile"
    no_id = client.post("/v1/agents", json={"name": "c", "profile": "narrow",
                                             "identity": "z6Mkxx"}, headers=auth)  # fmt: skip
    assert no_id.status_code == 400 and no_id.json()["detail"] == "Signing key not found"
    assert no_id.json()["code"] == "unknown-identity"
    # page through while adding rows: every row exactly once, in insertion order
    for n in range(5):
        harness.add_agent(f"p{n}", "narrow")
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = client.get("/v1/agents", params=params, headers=auth).json()
        seen.extend(a["id"] for a in page["items"])
        if len(seen) == 2:
            harness.add_agent("late", "narrow")
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ["a1", agent_id, "p0", "p1", "p2", "p3", "p4", "late"]
    assert client.delete(f"/v1/agents/{agent_id}", headers=auth).status_code == 204
    assert client.get(f"/v1/agents/{agent_id}", headers=auth).status_code == 404
    roles = client.get("/v1/roles?limit=2", headers=auth).json()
    assert [r["name"] for r in roles["items"]] == ["manager", "mailer"][::-1]
    profile = client.get("/v1/profiles/support", headers=auth).json()
    assert profile["budget"] == {"amount": "10", "period": "24h"}
    assert "profile support" in profile["source"]
    assert client.get("/v1/toolsets/vault", headers=auth).json()["connection_required"] is True
    assert client.get("/v1/hooks/nope", headers=auth).status_code == 404


def test_identity_import_and_conflict(live: Any, harness: Harness) -> None:
    seed = "11" * 32
    auth = harness.auth()
    made = live.post("/v1/identities/import", json={"seed": seed}, headers=auth)
    assert made.status_code == 201
    again = live.post("/v1/identities/import", json={"seed": seed}, headers=auth)
    assert again.status_code == 409
    assert (
        again.json()["detail"] == f"This account key is already on the server ({made.json()['id']})"
    )
    short = live.post("/v1/identities/import", json={"seed": "abcd"}, headers=auth)
    assert short.status_code == 400
    assert seed not in live.get("/v1/identities", headers=auth).text
    assert live.delete("/v1/identities/z6Mknope", headers=auth).json()["detail"] == (
        "Signing identity not found"
    )


def test_eight_clients_with_policy_uploads(live: Any, harness: Harness) -> None:
    url = str(live.base_url)
    errors: list[str] = []
    per_client = 500

    def worker(n: int) -> None:
        with httpx.Client(base_url=url, timeout=30) as client:
            for i in range(per_client):
                to = "bob@example.com" if i % 2 else "eve@evil.net"
                body = {"agent": "a1", "tool": "mail.send", "args": {**MAIL, "to": to}}
                response = client.post("/v1/decisions", json=body, headers=harness.auth())
                if response.status_code != 200:
                    errors.append(response.text)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    uploads = 0
    while any(t.is_alive() for t in threads):
        policy = POLICY + f"\n# upload {uploads}\n"
        response = live.put("/v1/policy", content=policy, headers=harness.auth())
        assert response.status_code == 201
        uploads += 1
        threads[0].join(0.2)
    for thread in threads:
        thread.join()
    assert errors == []
    assert uploads >= 2
    log = [(seq, expand(e)) for seq, e in sound(harness.service.store.read_decisions(0, 10_000))]
    assert [seq for seq, _ in log] == list(range(1, 8 * per_client + 1))
    assert len({e["id"] for _, e in log}) == 8 * per_client
    assert len({e["revision"] for _, e in log}) >= 2


def test_secrets_are_redacted_in_the_log_and_responses(live: Any, harness: Harness) -> None:
    seed = "22" * 32
    agent = harness.auth(harness.agent_token)
    made = live.post("/v1/identities/import", json={"seed": seed}, headers=agent)
    assert made.status_code == 201, made.text
    body = {"agent": "a1", "tool": "identities.import", "args": {"seed": seed}}
    decided = live.post("/v1/decisions", json=body, headers=harness.auth())
    assert seed not in decided.text
    log = live.get("/v1/decisions", headers=harness.auth()).text
    assert seed not in log and "[redacted]" in log


def test_roles_from_uploaded_files_are_not_changed_through_the_api(
    client: Any, harness: Harness
) -> None:
    """`PATCH` and `DELETE` answer alike: a role an uploaded file declares is 409 (upload
    the policy to change it), one that is nowhere is 404; neither makes a revision."""
    auth = harness.auth()
    before = harness.service.store.latest_revision()

    def send(method: str, name: str) -> Any:
        body = {"source": f"role {name} {{\n  allow mail.send\n}}\n"}
        kwargs = {"json": body} if method == "PATCH" else {}
        return client.request(method, f"/v1/roles/{name}", headers=auth, **kwargs)

    for method in ("PATCH", "DELETE"):
        declared = send(method, "mailer")
        assert (declared.status_code, declared.json()["code"]) == (409, "role-not-api-managed")
        assert "upload the policy" in declared.json()["detail"]
        absent = send(method, "nowhere")
        assert (absent.status_code, absent.json()["code"]) == (404, "role-not-found")
    assert harness.service.store.latest_revision() == before
