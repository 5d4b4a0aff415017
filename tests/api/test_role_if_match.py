"""Lost updates of the roles made through the API: `GET`, `POST` and `PATCH` answer with the
role's `ETag` (a digest of its own file, `api/roles/<name>.charter`), and a `PATCH` or
`DELETE` with it as `If-Match` makes its new revision only while the file is still that
(else 412 `resource-moved`, nothing written), compared inside the write's transaction
(docs/http.md, "Lost updates"). They ignored the header: a client that sent one got an
unconditional write over whatever had changed since it read the role."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from api import commands as c
from api.http.app import create_app
from api.service import declwrites
from api.service.core import Service
from api.service.tokens import Principal
from tests.api.conftest import POLICY, Harness, depth_spy, expect
from tests.api.races import overtake_approval_check, race, two_workers, writes_meet

# A profile whose agents may manage roles; `ASK` pauses their role changes for a human.
OPS = """
role ops-tools {
  allow agents.*, roles.*
}
profile automation {
  roles ops-tools
  hooks none
}
"""
ASK = 'hook ask on roles.update, roles.delete {\n  pause "a human approves"\n}\n'


def _source(name: str, *lines: str) -> str:
    return f"role {name} {{\n" + "".join(f"  {line}\n" for line in lines) + "}\n"


def _make(client: Any, harness: Harness, name: str = "r1") -> tuple[str, str]:
    body = {"name": name, "source": _source(name, "allow agents.list")}
    made = client.post("/v1/roles", json=body, headers=harness.auth())
    assert made.status_code == 201, made.text
    return f"/v1/roles/{name}", made.headers["etag"]


def _latest(harness: Harness) -> int:
    return harness.service.store.latest_revision()


def _pending(client: Any, harness: Harness) -> list[Any]:
    found = client.get("/v1/approvals?status=pending", headers=harness.auth())
    return list(found.json()["items"])


def test_a_role_write_names_the_file_it_was_made_from(client: Any, harness: Harness) -> None:
    admin = harness.auth()
    path, created = _make(client, harness)
    read = client.get(path, headers=admin)
    assert read.headers["etag"] == created  # the file as written is the one read back
    assert created.startswith('"') and created.endswith('"') and len(created) == 34
    first = {"source": _source("r1", "allow agents.get")}
    second = {"source": _source("r1", "allow agents.create")}
    changed = client.patch(path, json=first, headers={**admin, "if-match": created})
    assert changed.status_code == 200, changed.text
    now = changed.headers["etag"]
    assert now != created and client.get(path, headers=admin).headers["etag"] == now
    # another client, which read it before that change, writes from what it read
    revision = _latest(harness)
    for stale in (
        client.patch(path, json=second, headers={**admin, "if-match": created}),
        client.delete(path, headers={**admin, "if-match": created}),
        client.patch(path, json=second, headers={**admin, "if-match": '"not-its-etag"'}),
    ):
        expect(stale, 412, "resource-moved")
        assert "role `r1` has changed" in stale.json()["detail"]
    assert _latest(harness) == revision  # no revision made
    after = client.get(path, headers=admin)
    assert after.json() == changed.json() and after.headers["etag"] == now
    # `*`: it exists; no header: as before any of this
    assert client.patch(path, json=second, headers={**admin, "if-match": "*"}).status_code == 200
    assert client.patch(path, json=first, headers=admin).status_code == 200
    current = client.get(path, headers=admin).headers["etag"]
    assert client.delete(path, headers={**admin, "if-match": current}).status_code == 204
    for gone in (
        client.patch(path, json=first, headers={**admin, "if-match": "*"}),
        client.delete(path, headers={**admin, "if-match": current}),
    ):
        expect(gone, 404, "role-not-found")


def test_a_roles_tag_is_its_own_file(client: Any, harness: Harness) -> None:
    """Not the revision's number: another role's change, or an upload that leaves the
    file as it is, makes a new revision but no change of this role, and its tag holds."""
    admin = harness.auth()
    path, tag = _make(client, harness, "r1")
    other, _ = _make(client, harness, "r2")
    assert client.delete(other, headers=admin).status_code == 204
    _, files = harness.service.files()
    upload = [{"path": p, "text": t + ("# moved\n" if p == "policy.charter" else "")}
              for p, t in files]  # fmt: skip
    assert client.put("/v1/policy", json={"files": upload}, headers=admin).status_code == 201
    assert client.get(path, headers=admin).headers["etag"] == tag
    changed = client.patch(path, json={"source": _source("r1", "allow agents.get")},
                           headers={**admin, "if-match": tag})  # fmt: skip
    assert changed.status_code == 200, changed.text
    # an upload that changes the file changes its tag, as a `PATCH` does
    now = changed.headers["etag"]
    upload = [{"path": p, "text": t + "# edited\n"} for p, t in harness.service.files()[1]]
    assert client.put("/v1/policy", json={"files": upload}, headers=admin).status_code == 201
    edited = client.get(path, headers=admin).headers["etag"]
    assert edited != now
    expect(client.delete(path, headers={**admin, "if-match": now}), 412, "resource-moved")
    assert client.delete(path, headers={**admin, "if-match": edited}).status_code == 204


def test_a_role_of_an_uploaded_file_has_no_tag(client: Any, harness: Harness) -> None:
    """`mailer` is declared in `policy.charter`: no write here changes it (409), whatever
    `If-Match` says; the upload that does takes the revision's tag."""
    admin = harness.auth()
    read = client.get("/v1/roles/mailer", headers=admin)
    assert read.status_code == 200 and "etag" not in read.headers
    revision = _latest(harness)
    change = {"source": _source("mailer", "allow mail.send")}
    for value in ("*", '"0123456789abcdef0123456789abcdef"'):
        expect(client.patch("/v1/roles/mailer", json=change, headers={**admin, "if-match": value}),
               409, "role-not-api-managed")  # fmt: skip
        expect(client.delete("/v1/roles/mailer", headers={**admin, "if-match": value}),
               409, "role-not-api-managed")  # fmt: skip
    assert _latest(harness) == revision
    assert "etag" not in client.get("/v1/roles", headers=admin).headers  # (nor a list page)


@pytest.mark.parametrize("bad", ["abc", 'W/"x"', '"a", "b"', '"a', "**", "\"a'"])
def test_a_malformed_if_match_is_refused_and_writes_nothing(
    client: Any, harness: Harness, bad: str
) -> None:
    admin = harness.auth()
    path, _ = _make(client, harness)
    before = client.get(path, headers=admin).json()
    revision = _latest(harness)
    refused = client.patch(path, json={"source": _source("r1", "allow agents.get")},
                           headers={**admin, "if-match": bad})  # fmt: skip
    expect(refused, 400, "bad-if-match")
    assert "GET /v1/roles/{name}" in refused.json()["help"]
    expect(client.delete(path, headers={**admin, "if-match": bad}), 400, "bad-if-match")
    assert client.get(path, headers=admin).json() == before and _latest(harness) == revision


def test_a_conditional_change_compiles_before_its_transaction(
    client: Any, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison is made inside the role's own write transaction, after the new policy
    is compiled outside it: around the whole operation, its compile (seconds for a large
    policy) held every writer and every worker's decisions off."""
    import api.service.core as core
    from engine.compile import compile_workspace

    path, tag = _make(client, harness)
    depths: list[int] = []
    monkeypatch.setattr(core, "compile_workspace",
                        depth_spy(harness.service.store, compile_workspace, depths))  # fmt: skip
    admin = harness.auth()
    changed = client.patch(path, json={"source": _source("r1", "allow agents.get")},
                           headers={**admin, "if-match": tag})  # fmt: skip
    assert changed.status_code == 200, changed.text
    deleted = client.delete(path, headers={**admin, "if-match": changed.headers["etag"]})
    assert deleted.status_code == 204, deleted.text
    assert depths == [0, 0], depths


def test_of_two_changes_from_one_state_one_wins(harness: Harness, other: Service) -> None:
    """Two workers each get a `PATCH` of the role made from the same `GET`: one makes its
    revision, the other is a 412, whichever comes first."""
    admin = harness.auth()
    with two_workers(harness, other) as (first, second):
        path, etag = _make(first, harness)
        barrier = threading.Barrier(2)
        writes_meet(harness.service, "add_revision", barrier)
        writes_meet(other, "add_revision", barrier)
        answers = race(first, second, lambda client, name: client.patch(
            path, json={"source": _source("r1", "allow agents.list", f"# {name}")},
            headers={**admin, "if-match": etag}))  # fmt: skip
        statuses = sorted(r.status_code for r in answers.values())
        assert statuses == [200, 412], {n: r.text for n, r in answers.items()}
        (winner,) = (n for n, r in answers.items() if r.status_code == 200)
        expect(next(r for r in answers.values() if r.status_code == 412), 412, "resource-moved")
        for client in (first, second):  # each worker reads what won
            read = client.get(path, headers=admin)
            assert f"# {winner}" in read.json()["source"]
            assert read.headers["etag"] == answers[winner].headers["etag"]


def _ops(client: Any, harness: Harness, policy: str) -> dict[str, str]:
    """An agent on `automation` (`policy` uploaded), and its token's headers."""
    assert client.put("/v1/policy", content=policy, headers=harness.auth()).status_code == 201
    harness.add_agent("ops", "automation")
    return harness.auth(harness.token_for("ops"))


def test_an_agents_token_gets_the_same_answers(client: Any, harness: Harness) -> None:
    """`roles.update` and `roles.delete` built-in tool calls: a stale `If-Match` refused
    before the request is decided (nothing logged), a current one written."""
    ops = _ops(client, harness, POLICY + OPS)
    made = client.post("/v1/roles", json={"name": "g", "source": _source("g", "allow agents.list")},
                       headers=ops)  # fmt: skip
    assert made.status_code == 201, made.text
    tag = made.headers["etag"]
    assert client.get("/v1/roles/g", headers=ops).headers["etag"] == tag
    narrower = {"source": _source("g", "allow agents.get")}
    changed = client.patch("/v1/roles/g", json=narrower, headers={**ops, "if-match": tag})
    assert changed.status_code == 200, changed.text
    logged, revision = harness.service.store.last_seq(), _latest(harness)
    for stale in (
        client.patch("/v1/roles/g", json=narrower, headers={**ops, "if-match": tag}),
        client.delete("/v1/roles/g", headers={**ops, "if-match": tag}),
    ):
        expect(stale, 412, "resource-moved")
    assert (harness.service.store.last_seq(), _latest(harness)) == (logged, revision)
    current = changed.headers["etag"]
    assert client.delete("/v1/roles/g", headers={**ops, "if-match": current}).status_code == 204
    assert harness.service.store.last_seq() == logged + 1
    assert "g" not in harness.service.current().workspace.roles


def test_a_paused_change_keeps_its_if_match(client: Any, harness: Harness) -> None:
    """A role change its policy pauses runs, once approved, only while the role's file is
    still what its `If-Match` named; approved after another change, it is a 412 that
    writes nothing and leaves the approval pending. Approved with nothing changed
    meanwhile, it runs."""
    admin = harness.auth()
    ops = _ops(client, harness, POLICY + OPS.replace("hooks none", "hooks ask") + ASK)
    path, tag = _make(client, harness, "g")
    narrower = {"source": _source("g", "allow agents.get")}
    for paused in (
        client.patch(path, json=narrower, headers={**ops, "if-match": tag}),
        client.delete(path, headers={**ops, "if-match": tag}),
    ):
        assert paused.status_code == 202 and "etag" not in paused.headers, paused.text
        shown = client.get(f"/v1/approvals/{paused.json()['approval_id']}", headers=admin)
        assert shown.json()["if_match"] == tag
    waiting = [a["id"] for a in _pending(client, harness)]
    assert len(waiting) == 2
    # meanwhile, someone else changes the role
    moved = client.patch(path, json={"source": _source("g", "allow agents.create")},
                         headers=admin)  # fmt: skip
    assert moved.status_code == 200
    logged, revision = harness.service.store.last_seq(), _latest(harness)
    for approval in waiting:
        expect(client.post(f"/v1/approvals/{approval}/approve", headers=admin),
               412, "resource-moved")  # fmt: skip
    assert (harness.service.store.last_seq(), _latest(harness)) == (logged, revision)
    assert client.get(path, headers=admin).json() == moved.json()
    assert [a["id"] for a in _pending(client, harness)] == waiting
    for approval in waiting:
        assert client.post(f"/v1/approvals/{approval}/reject", json={}, headers=admin) \
            .status_code == 200  # fmt: skip
    # the same requests, approved with nothing changed meanwhile, run
    tag = moved.headers["etag"]
    paused = client.patch(path, json=narrower, headers={**ops, "if-match": tag})
    approved = client.post(f"/v1/approvals/{paused.json()['approval_id']}/approve", headers=admin)
    assert approved.status_code == 200, approved.text
    assert approved.json()["result"]["source"] == narrower["source"].rstrip("\n")
    tag = client.get(path, headers=admin).headers["etag"]
    paused = client.delete(path, headers={**ops, "if-match": tag})
    approved = client.post(f"/v1/approvals/{paused.json()['approval_id']}/approve", headers=admin)
    assert approved.status_code == 200, approved.text
    expect(client.get(path, headers=admin), 404, "role-not-found")


def test_an_approval_compares_inside_its_transaction(
    harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The look before the approval's transaction can be overtaken (another worker's
    change right after it): the comparison that counts is the one the write joins."""
    from starlette.testclient import TestClient

    admin = harness.auth()

    def meanwhile() -> None:  # another worker, between the look and the write
        changed = c.UpdateRole(name="g", source=_source("g", "allow agents.list", "# by another"))
        declwrites.CONDITIONAL["roles.update"](other, Principal("t", "admin"), changed, None)

    with TestClient(create_app(harness.service), raise_server_exceptions=False) as client:
        ops = _ops(client, harness, POLICY + OPS.replace("hooks none", "hooks ask") + ASK)
        path, tag = _make(client, harness, "g")
        paused = client.delete(path, headers={**ops, "if-match": tag})
        assert paused.status_code == 202, paused.text
        overtake_approval_check(monkeypatch, meanwhile)
        expect(client.post(f"/v1/approvals/{paused.json()['approval_id']}/approve",
                           headers=admin), 412, "resource-moved")  # fmt: skip
        assert "# by another" in client.get(path, headers=admin).json()["source"]


def test_the_document_names_the_header_and_the_tag(client: Any) -> None:
    spec = client.get("/openapi.json").json()
    item = spec["paths"]["/v1/roles/{name}"]
    for method in ("patch", "delete"):
        names = [p["name"] for p in item[method]["parameters"] if p["in"] == "header"]
        assert names == ["If-Match"] and "412" in item[method]["responses"], method
    assert "ETag" in item["get"]["responses"]["200"]["headers"]
    assert "ETag" in item["patch"]["responses"]["200"]["headers"]
    assert "ETag" in spec["paths"]["/v1/roles"]["post"]["responses"]["201"]["headers"]
    assert "headers" not in spec["paths"]["/v1/roles"]["get"]["responses"]["200"]
