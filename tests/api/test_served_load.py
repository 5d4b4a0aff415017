"""A process that loads a stored revision compiles what deciding reads of it
(engine/served.py, api/service/snapshots.py): its decisions, batches, approvals, tool
listings and explanations never load the rest, and what needs the rest (a role's view,
a change of the policy) gets the whole workspace, checked from the texts."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from api.http.app import create_app
from api.service.core import Service
from tests.api.conftest import BOTH, POLICY, Harness, opened_again, seen_elsewhere

STORES = BOTH  # each test on SQLite and on PostgreSQL (tests/api/conftest.py)

MAIL = {"to": "bob@example.com", "subject": "hi", "body": "hello"}
# A role no profile selects, in a file of its own, and a file of roles of which one is.
SPARE = "role spare {\n  allow mail.send\n}\n"


def _started(harness: Harness) -> Service:
    with harness.service.store.atomic():
        harness.service.upload([("policy.charter", POLICY), ("spare.charter", SPARE)], "t")
    return harness.service


def test_a_worker_decides_without_loading_the_whole_policy(harness: Harness) -> None:
    _started(harness)
    with opened_again(harness.db, harness.key_file) as other:
        snapshot = other.current()
        assert snapshot.served.partial and snapshot.whole_loaded() is None
        assert "spare" not in snapshot.served.roles and "mailer" in snapshot.served.roles
        admin = harness.auth()
        with TestClient(create_app(other), raise_server_exceptions=False) as client:
            call: dict[str, Any] = {"agent": "a1", "tool": "mail.send", "args": MAIL}
            single = client.post("/v1/decisions", json=call, headers=admin).json()
            assert single["effect"] == "allow" and single["reasons"][0]["role"] == "mailer"
            calls = [call, {**call, "tool": "billing.refund", "args": {"amount": 80}}]
            batch = client.post("/v1/decisions/batch", json={"calls": calls}, headers=admin)
            assert [d["effect"] for d in batch.json()["decisions"]] == ["allow", "pause"]
            approval = batch.json()["decisions"][1]["approval_id"]
            approved = client.post(f"/v1/approvals/{approval}/approve", headers=admin)
            assert approved.status_code == 200, approved.text
            listing = client.get("/v1/agents/a1/tools", headers=admin)
            assert listing.status_code == 200 and listing.json()
            profile = client.get("/v1/profiles/support", headers=admin)
            assert profile.json()["roles"] == ["mailer", "refunder", "manager", "vault-reader"]
            assert other.current() is snapshot and snapshot.whole_loaded() is None
            # A role's view reads the whole policy: a role no profile selects is there too.
            spare = client.get("/v1/roles/spare", headers=admin)
            assert spare.status_code == 200 and spare.json()["source"] == SPARE.strip()
            whole = snapshot.whole_loaded()
            assert whole is not None and not whole.partial and "spare" in whole.roles


def test_a_worker_changes_a_policy_it_loaded_in_part(harness: Harness) -> None:
    _started(harness)
    with opened_again(harness.db, harness.key_file) as other:
        assert other.current().whole_loaded() is None
        admin = harness.auth()
        with TestClient(create_app(other), raise_server_exceptions=False) as client:
            role = {"name": "auditor", "source": "role auditor {\n  allow mail.send\n}\n"}
            made = client.post("/v1/roles", json=role, headers=admin)
            assert made.status_code == 201, made.text
            after = other.current()
            assert after.revision == 3 and "auditor" in after.workspace.roles
            assert "spare" in after.workspace.roles  # (checked whole: nothing is lost)
            files = dict(other.files()[1])
            assert set(files) == {"policy.charter", "spare.charter", "api/roles/auditor.charter"}


def test_a_worker_follows_another_s_upload_in_part(harness: Harness) -> None:
    service = _started(harness)
    with opened_again(harness.db, harness.key_file) as other:
        before = other.current()
        assert before.whole_loaded() is None
        narrower = POLICY.replace('endswith "@example.com"', 'endswith "@example.org"')
        with service.store.atomic():
            service.upload([("policy.charter", narrower), ("spare.charter", SPARE)], "t")
        seen_elsewhere(other).sync()
        after = other.current()
        assert after.revision == 3 and after.whole_loaded() is None
        # (the file that did not change keeps its parse: a role no profile selects is
        # still not parsed)
        spare = next(f for f in after.served.files if f.path == "spare.charter")
        assert spare is next(f for f in before.served.files if f.path == "spare.charter")
        assert spare.declarations == ()
        decision = after.decide_call("narrow", "mail.send", MAIL)
        assert decision.effect == "deny"
