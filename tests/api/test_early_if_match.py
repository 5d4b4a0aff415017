"""A stale `If-Match` is compared before the work a write does ahead of its transaction (an
agent's fit check, compiling a role's change or an uploaded policy), as well as inside
the transaction: it was compared after that work, so it cost seconds of solving or
compiling for a write that could only be refused, and answered with that work's own
refusal (`does-not-fit`, `policy-invalid`) instead of the 412 (docs/http.md, "Lost
updates")."""

from __future__ import annotations

from typing import Any

import pytest

import api.service.core as core
from api.service import fitcheck
from engine.compile import compile_workspace
from tests.api.conftest import POLICY, REVIEWED, Harness, expect, paused_self_patch
from tests.api.test_role_if_match import OPS, _make, _source


def _solves(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many fit checks went to the solver (not found done)."""
    real = fitcheck._engine
    runs: list[int] = []

    def engine() -> Any:
        runs.append(1)
        return real()

    monkeypatch.setattr(fitcheck, "_engine", engine)
    return runs


def _compiles(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many policies were checked and compiled (a role's change, an upload)."""
    runs: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        runs.append(1)
        return compile_workspace(*args, **kwargs)

    monkeypatch.setattr(core, "compile_workspace", counted)
    return runs


def test_a_stale_agent_update_is_a_412_before_its_fit_check(
    client: Any, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`p1` moves its child to a wider profile (`wide`: no deny of `agents.delete`), which
    does not fit: with a tag of the child from before another change, the answer is the
    412, not the fit check's 403, and no solver runs; nothing is logged."""
    admin = harness.auth()
    harness.add_agent("p1", "support")
    p1 = harness.auth(harness.token_for("p1"))
    kid = client.post("/v1/agents", json={"name": "kid", "profile": "support-child"}, headers=p1)
    assert kid.status_code == 201, kid.text
    path = f"/v1/agents/{kid.json()['id']}"
    stale = kid.headers["etag"]
    assert client.patch(path, json={"name": "renamed"}, headers=admin).status_code == 200
    fresh = client.get(path, headers=admin).headers["etag"]
    solves = _solves(monkeypatch)
    logged = harness.service.store.last_seq()
    wider = {"profile": "wide"}
    expect(client.patch(path, json=wider, headers={**p1, "if-match": stale}), 412, "resource-moved")
    assert solves == [] and harness.service.store.last_seq() == logged
    # the same body with the current tag: the fit check's refusal, as without the header
    expect(client.patch(path, json=wider, headers={**p1, "if-match": fresh}), 403, "does-not-fit")
    assert solves != []
    # a change that fits, with the current tag, is written
    fits = {"profile": "support-child", "name": "kid-2"}
    written = client.patch(path, json=fits, headers={**p1, "if-match": fresh})
    assert written.status_code == 200, written.text
    assert client.get(path, headers=admin).json()["name"] == "kid-2"


def test_a_stale_role_change_is_a_412_before_its_fit_check_and_compile(
    client: Any, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent's `roles.update` to a source wider than its own access (`mail.send`),
    and an admin's `PATCH` and `DELETE`: a stale tag is the 412, with no solver run and
    no policy compiled; the current tag still works."""
    admin = harness.auth()
    assert client.put("/v1/policy", content=POLICY + OPS, headers=admin).status_code == 201
    harness.add_agent("ops", "automation")
    ops = harness.auth(harness.token_for("ops"))
    path, stale = _make(client, harness, "g")
    moved = client.patch(path, json={"source": _source("g", "allow agents.get")}, headers=admin)
    fresh = moved.headers["etag"]
    solves, compiles = _solves(monkeypatch), _compiles(monkeypatch)
    logged, revision = harness.service.store.last_seq(), harness.service.store.latest_revision()
    wider = {"source": _source("g", "allow mail.send")}
    for refused in (
        client.patch(path, json=wider, headers={**ops, "if-match": stale}),
        client.patch(path, json=wider, headers={**admin, "if-match": stale}),
        client.delete(path, headers={**ops, "if-match": stale}),
        client.delete(path, headers={**admin, "if-match": stale}),
    ):
        expect(refused, 412, "resource-moved")
    assert (solves, compiles) == ([], [])
    assert harness.service.store.last_seq() == logged
    assert harness.service.store.latest_revision() == revision
    expect(client.patch(path, json=wider, headers={**ops, "if-match": fresh}), 403, "does-not-fit")
    narrower = client.patch(path, json={"source": _source("g", "allow agents.list")},
                            headers={**ops, "if-match": fresh})  # fmt: skip
    assert narrower.status_code == 200, narrower.text
    deleted = client.delete(path, headers={**admin, "if-match": narrower.headers["etag"]})
    assert deleted.status_code == 204, deleted.text


# `later` fits its agents' `agents.update` to it as uploaded first; WIDER makes it grant
# refunds, which `reviewed` does not.
LATER = "profile later {\n  roles manager\n  hooks review-updates\n}\n"
WIDER = LATER.replace("roles manager", "roles manager, refunder")


def test_a_stale_approval_is_a_412_before_its_fit_check(
    client: Any, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent's paused `PATCH` with `If-Match`, approved after its agent changed and
    after its change stopped fitting: the 412, not the fit check's 403; it stays pending."""
    admin = harness.auth()
    _, paused = paused_self_patch(client, harness, POLICY + REVIEWED + LATER, {"profile": "later"})
    approval = f"/v1/approvals/{paused.json()['approval_id']}"
    assert client.put("/v1/policy", content=POLICY + REVIEWED + WIDER, headers=admin).status_code \
        == 201  # fmt: skip
    assert client.patch("/v1/agents/rev", json={"name": "moved"}, headers=admin).status_code == 200
    solves = _solves(monkeypatch)
    expect(client.post(f"{approval}/approve", headers=admin), 412, "resource-moved")
    assert solves == []
    assert client.get(approval, headers=admin).json()["status"] == "pending"
    assert client.get("/v1/agents/rev", headers=admin).json()["profile"] == "reviewed"


def test_a_stale_upload_is_a_412_before_the_policy_is_compiled(
    client: Any, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`PUT /v1/policy` with a revision that is no longer the latest: 412 `revision-moved`,
    for a policy that does not check too (it was the 422), and nothing compiled."""
    admin = harness.auth()
    assert client.put("/v1/policy", content=POLICY + "# 2\n", headers=admin).status_code == 201
    compiles = _compiles(monkeypatch)
    stale = {**admin, "if-match": '"1"'}
    for text in (POLICY + "# 3\n", POLICY + "role broken {\n  allow nope.nothing\n}\n"):
        refused = client.put("/v1/policy", content=text, headers=stale)
        expect(refused, 412, "revision-moved")
        assert refused.json()["latest"] == 2
    assert compiles == [] and harness.service.store.latest_revision() == 2
    broken = client.put("/v1/policy", content=POLICY + "role broken {\n  allow nope.x\n}\n",
                        headers={**admin, "if-match": '"2"'})  # fmt: skip
    expect(broken, 422, "policy-invalid")
    fresh = client.put("/v1/policy", content=POLICY + "# 3\n", headers={**admin, "if-match": '"2"'})
    assert fresh.status_code == 201 and fresh.json()["revision"] == 3
