"""Lost updates: identities, agents, threads, connections, schedules and feeds answer with
an `ETag`, and a `PATCH` or `DELETE` with it as `If-Match` writes only while the resource
is still that (else 412 `resource-moved`, nothing written), compared inside the write's
transaction so that of two writes made from one state exactly one wins (docs/http.md,
"Lost updates")."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from api import commands as c
from api.http.app import create_app
from api.service import connections, feeds, resources, schedules, threads
from api.service.core import Service
from api.service.tokens import Principal
from policy import identities
from tests.api.conftest import POLICY, REVIEWED, Harness, expect, paused_self_patch
from tests.api.races import overtake_approval_check, race, two_workers, writes_meet

# kind -> (a create's body, two different changes); `{identity}` is the harness's
KINDS: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "identities": ({"label": "l"}, {"label": "m", "metadata": {"n": 0.1}}, {"name": "n"}),
    "agents": (
        {
            "name": "b1",
            "profile": "narrow",
            "identity": "{identity}",
            "metadata": {"team": {"size": 3}, "limit": 0.1},
        },
        {"name": "b2"},
        {"status": "running"},
    ),
    "threads": ({"agent": "a1", "max_cost": "2.5"}, {"status": "done"}, {"status": "running"}),
    "connections": (
        {"toolset": "vault", "name": "c", "credential": "s1"},
        {"name": "d"},
        {"name": "e"},
    ),
    "schedules": (
        {"agent": "a1", "name": "s", "cron": "0 9 * * 1", "prompt": "p"},
        {"prompt": "q"},
        {"cron": "30 9 * * 1"},
    ),
    "feeds": ({"name": "f"}, {"name": "g"}, {"name": "h"}),
}


def _create(client: Any, harness: Harness, kind: str) -> tuple[str, str]:
    body = {k: (harness.identity if v == "{identity}" else v) for k, v in KINDS[kind][0].items()}
    made = client.post(f"/v1/{kind}", json=body, headers=harness.auth())
    assert made.status_code == 201, made.text
    return f"/v1/{kind}/{made.json()['id']}", made.headers["etag"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_write_names_the_state_it_was_made_from(client: Any, harness: Harness, kind: str) -> None:
    admin = harness.auth()
    path, created = _create(client, harness, kind)
    read = client.get(path, headers=admin)
    assert read.headers["etag"] == created  # the document as written is the one read back
    assert created.startswith('"') and created.endswith('"') and len(created) == 34
    _, first, second = KINDS[kind]
    changed = client.patch(path, json=first, headers={**admin, "if-match": created})
    assert changed.status_code == 200, changed.text
    now = changed.headers["etag"]
    assert now != created and client.get(path, headers=admin).headers["etag"] == now
    # another client, which read it before that change, writes from what it read
    for stale in (
        client.patch(path, json=second, headers={**admin, "if-match": created}),
        client.delete(path, headers={**admin, "if-match": created}),
        client.patch(path, json=second, headers={**admin, "if-match": '"not-its-etag"'}),
    ):
        expect(stale, 412, "resource-moved")
    after = client.get(path, headers=admin)
    assert after.json() == changed.json() and after.headers["etag"] == now  # nothing written
    # `*`: it exists; no header: as before any of this
    assert client.patch(path, json=second, headers={**admin, "if-match": "*"}).status_code == 200
    assert client.patch(path, json=first, headers=admin).status_code == 200
    current = client.get(path, headers=admin).headers["etag"]
    assert client.delete(path, headers={**admin, "if-match": current}).status_code == 204
    what = {"identities": "identity"}.get(kind, kind[:-1])
    for gone in (
        client.patch(path, json=first, headers={**admin, "if-match": "*"}),
        client.delete(path, headers={**admin, "if-match": current}),
    ):
        expect(gone, 404, f"{what}-not-found")


@pytest.mark.parametrize("bad", ["abc", 'W/"x"', '"a", "b"', '"a', "\"a'", '"a b"', "**"])
def test_a_malformed_if_match_is_refused_and_writes_nothing(
    client: Any, harness: Harness, bad: str
) -> None:
    admin = harness.auth()
    path, _ = _create(client, harness, "agents")
    before = client.get(path, headers=admin).json()
    expect(client.patch(path, json={"name": "x"}, headers={**admin, "if-match": bad}),
           400, "bad-if-match")  # fmt: skip
    refused = client.delete(path, headers={**admin, "if-match": bad})
    expect(refused, 400, "bad-if-match")
    assert "GET /v1/agents/{id}" in refused.json()["help"]
    assert client.get(path, headers=admin).json() == before


def _frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every write in the same millisecond (as two quick ones are)."""
    for module in (resources, threads, connections, schedules, feeds):
        monkeypatch.setattr(module, "now_ms", lambda: 1_700_000_000_000)
    monkeypatch.setattr(identities, "_now", lambda: 1_700_000_000_000)


def test_two_changes_in_one_millisecond_have_two_etags(
    client: Any, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An `updated_at` stamp would give both the same tag, and a client holding the first
    would overwrite the second. A connection's credential is in no answer at all: a
    change of it alone changes no field shown, but the stored document, and its tag."""
    _frozen_clock(monkeypatch)
    admin = harness.auth()
    for kind in KINDS:
        path, created = _create(client, harness, kind)
        _, first, second = KINDS[kind]
        one = client.patch(path, json=first, headers={**admin, "if-match": created})
        two = client.patch(path, json=second, headers={**admin, "if-match": one.headers["etag"]})
        assert two.status_code == 200 and two.headers["etag"] != one.headers["etag"], kind
        expect(client.patch(path, json=first, headers={**admin, "if-match": one.headers["etag"]}),
               412, "resource-moved")  # fmt: skip
    path, _ = _create(client, harness, "connections")
    before = client.get(path, headers=admin)
    sealed = client.patch(path, json={"credential": "s2"}, headers=admin)
    assert sealed.json() == before.json()  # the same answer, as far as it shows
    assert sealed.headers["etag"] != before.headers["etag"]
    expect(client.patch(path, json={"credential": "s3"},
                        headers={**admin, "if-match": before.headers["etag"]}),
           412, "resource-moved")  # fmt: skip


def test_of_two_writes_from_one_state_one_wins(harness: Harness, other: Service) -> None:
    """Two workers (`--workers 2`) each get a `PATCH` made from the same `GET`: one is
    written, the other is a 412, whichever comes first; the loser's name is nowhere."""
    barrier = threading.Barrier(2)
    writes_meet(harness.service, "update", barrier)
    writes_meet(other, "update", barrier)
    admin = harness.auth()
    with two_workers(harness, other) as (first, second):
        etag = first.get("/v1/agents/a1", headers=admin).headers["etag"]
        answers = race(first, second, lambda client, name: client.patch(
            "/v1/agents/a1", json={"name": name}, headers={**admin, "if-match": etag}))  # fmt: skip
        statuses = sorted(r.status_code for r in answers.values())
        assert statuses == [200, 412], {n: r.text for n, r in answers.items()}
        (winner,) = (n for n, r in answers.items() if r.status_code == 200)
        expect(next(r for r in answers.values() if r.status_code == 412), 412, "resource-moved")
        for client in (first, second):  # each worker reads what won
            read = client.get("/v1/agents/a1", headers=admin)
            assert read.json()["name"] == winner
            assert read.headers["etag"] == answers[winner].headers["etag"]


def _logged(harness: Harness) -> int:
    return harness.service.store.last_seq()


def test_an_agents_token_gets_the_same_answers(client: Any, harness: Harness) -> None:
    """An agent's management request goes through the same operations: its `ETag`s, and
    a stale `If-Match` refused before it is decided (nothing logged)."""
    agent = harness.auth(harness.agent_token)
    read = client.get("/v1/agents/a1", headers=agent)
    assert read.status_code == 200 and read.headers["etag"]
    assert (
        read.headers["etag"] == client.get("/v1/agents/a1", headers=harness.auth()).headers["etag"]
    )
    changed = client.patch("/v1/agents/a1", json={"status": "running"},
                           headers={**agent, "if-match": read.headers["etag"]})  # fmt: skip
    assert changed.status_code == 200, changed.text
    logged = _logged(harness)
    stale = client.patch("/v1/agents/a1", json={"status": "idle"},
                         headers={**agent, "if-match": read.headers["etag"]})  # fmt: skip
    expect(stale, 412, "resource-moved")
    assert _logged(harness) == logged
    assert client.get("/v1/agents/a1", headers=agent).json()["status"] == "running"
    thread = client.post("/v1/threads", json={}, headers=agent)
    assert thread.status_code == 201, thread.text
    path = f"/v1/threads/{thread.json()['id']}"
    logged = _logged(harness)
    expect(client.delete(path, headers={**agent, "if-match": '"0"'}), 412, "resource-moved")
    assert _logged(harness) == logged
    assert client.delete(path, headers={**agent, "if-match": thread.headers["etag"]}).status_code \
        == 204  # fmt: skip
    assert _logged(harness) == logged + 1
    assert harness.service.store.get("threads", thread.json()["id"]) is None


def test_a_stale_request_is_not_paused(client: Any, harness: Harness) -> None:
    """A request its policy would pause is checked before it is decided: a stale one
    leaves no approval for a human to approve over a change it never saw."""
    admin = harness.auth()
    assert client.put("/v1/policy", content=POLICY + REVIEWED, headers=admin).status_code == 201
    harness.add_agent("rev", "reviewed")
    rev = harness.auth(harness.token_for("rev"))
    etag = client.get("/v1/agents/rev", headers=admin).headers["etag"]
    assert client.patch("/v1/agents/rev", json={"name": "renamed"}, headers=admin).status_code \
        == 200  # fmt: skip
    logged = _logged(harness)
    expect(client.patch("/v1/agents/rev", json={"status": "running"},
                        headers={**rev, "if-match": etag}), 412, "resource-moved")  # fmt: skip
    assert _logged(harness) == logged
    assert client.get("/v1/approvals?status=pending", headers=admin).json()["items"] == []
    fresh = client.get("/v1/agents/rev", headers=admin).headers["etag"]
    paused = client.patch("/v1/agents/rev", json={"status": "running"},
                          headers={**rev, "if-match": fresh})  # fmt: skip
    assert paused.status_code == 202 and "etag" not in paused.headers


def test_a_paused_request_keeps_its_if_match(client: Any, harness: Harness) -> None:
    """A request its policy pauses runs, once approved, only while the resource is still
    what its `If-Match` named: approved after another change, it was written over that
    change (the lost update `If-Match` was sent to prevent) hours after the 202. Now the
    approval is a 412 `resource-moved` that writes nothing and leaves it pending (to be
    rejected); approved with nothing changed meanwhile, it runs as before."""
    admin = harness.auth()
    etag, paused = paused_self_patch(client, harness, POLICY + REVIEWED, {"name": "by-the-agent"})
    rev = harness.auth(harness.token_for("rev"))
    approval = paused.json()["approval_id"]
    shown = client.get(f"/v1/approvals/{approval}", headers=admin).json()
    assert shown["if_match"] == etag  # (the approver sees what it is conditional on)
    # meanwhile, someone else changes the agent
    assert client.patch("/v1/agents/rev", json={"status": "running"}, headers=admin).status_code \
        == 200  # fmt: skip
    before = client.get("/v1/agents/rev", headers=admin)
    logged = _logged(harness)
    expect(client.post(f"/v1/approvals/{approval}/approve", headers=admin), 412, "resource-moved")
    after = client.get("/v1/agents/rev", headers=admin)
    assert after.json() == before.json() and after.headers["etag"] == before.headers["etag"]
    assert _logged(harness) == logged
    assert client.get(f"/v1/approvals/{approval}", headers=admin).json()["status"] == "pending"
    assert client.post(f"/v1/approvals/{approval}/reject", json={}, headers=admin).status_code \
        == 200  # fmt: skip
    # the same request, approved with nothing changed meanwhile, runs
    etag = after.headers["etag"]
    paused = client.patch("/v1/agents/rev", json={"name": "by-the-agent"},
                          headers={**rev, "if-match": etag})  # fmt: skip
    approved = client.post(f"/v1/approvals/{paused.json()['approval_id']}/approve", headers=admin)
    assert approved.status_code == 200, approved.text
    assert approved.json()["result"]["name"] == "by-the-agent"
    # a request paused without `If-Match` runs on the resource as it is then, as before
    paused = client.patch("/v1/agents/rev", json={"name": "unconditional"}, headers=rev)
    assert "if_match" not in paused.json()
    assert client.patch("/v1/agents/rev", json={"status": "idle"}, headers=admin).status_code \
        == 200  # fmt: skip
    approved = client.post(f"/v1/approvals/{paused.json()['approval_id']}/approve", headers=admin)
    assert approved.status_code == 200 and approved.json()["result"]["name"] == "unconditional"


def test_an_approval_compares_inside_its_transaction(
    harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The look before the approval's transaction can be overtaken (another worker's
    change right after it): the comparison that counts is the one the write joins."""
    from starlette.testclient import TestClient

    admin = harness.auth()

    def meanwhile() -> None:
        with other.store.atomic():  # another worker, between the look and the write
            renamed = c.UpdateAgent(id="rev", name="b")
            resources.agents_update(other, Principal("t", "admin"), renamed)

    with TestClient(create_app(harness.service), raise_server_exceptions=False) as client:
        _, paused = paused_self_patch(client, harness, POLICY + REVIEWED, {"status": "running"})
        overtake_approval_check(monkeypatch, meanwhile)
        approval = paused.json()["approval_id"]
        expect(client.post(f"/v1/approvals/{approval}/approve", headers=admin),
               412, "resource-moved")  # fmt: skip
        agent = client.get("/v1/agents/rev", headers=admin).json()
        assert (agent["name"], agent["status"]) == ("b", "idle")


def test_the_document_names_the_header_and_the_tag(client: Any) -> None:
    spec = client.get("/openapi.json").json()
    for kind in KINDS:
        item = spec["paths"][f"/v1/{kind}/{{id}}"]
        for method in ("patch", "delete"):
            names = [p["name"] for p in item[method]["parameters"] if p["in"] == "header"]
            assert names == ["If-Match"], (kind, method)
            assert "412" in item[method]["responses"], (kind, method)
        assert "ETag" in item["get"]["responses"]["200"]["headers"]
        assert "ETag" in item["patch"]["responses"]["200"]["headers"]
        assert "ETag" in spec["paths"][f"/v1/{kind}"]["post"]["responses"]["201"]["headers"]
        assert "headers" not in spec["paths"][f"/v1/{kind}"]["get"]["responses"]["200"]
    assert "ETag" in spec["paths"]["/v1/policy"]["get"]["responses"]["200"]["headers"]


def test_a_pause_that_an_approval_opens_again_keeps_the_if_match(
    client: Any, harness: Harness
) -> None:
    """Approving re-checks the call: a pause by a hook added since opens an approval of
    its own, which runs the call once approved. That approval kept the call but not its
    `If-Match`, so approving it wrote over whatever had changed meanwhile, the lost update
    the header was sent to prevent; now it keeps it, and is a 412 as the first was."""
    admin = harness.auth()
    etag, paused = paused_self_patch(client, harness, POLICY + REVIEWED, {"name": "by-the-agent"})
    second = REVIEWED.replace("hooks review-updates", "hooks review-updates, second-look") + (
        'hook second-look on agents.update {\n  pause "a second human looks"\n}\n'
    )
    assert client.put("/v1/policy", content=POLICY + second, headers=admin).status_code == 201
    again = client.post(f"/v1/approvals/{paused.json()['approval_id']}/approve", headers=admin)
    assert again.status_code == 200, again.text
    assert again.json()["decision"]["effect"] == "pause"
    reopened = again.json()["decision"]["approval_id"]
    shown = client.get(f"/v1/approvals/{reopened}", headers=admin).json()
    assert shown["if_match"] == etag
    # meanwhile, someone else changes the agent
    assert client.patch("/v1/agents/rev", json={"status": "running"}, headers=admin).status_code \
        == 200  # fmt: skip
    before = client.get("/v1/agents/rev", headers=admin).json()
    expect(client.post(f"/v1/approvals/{reopened}/approve", headers=admin), 412, "resource-moved")
    assert client.get("/v1/agents/rev", headers=admin).json() == before


def test_a_schedules_run_and_a_feeds_message_move_their_tags(client: Any, harness: Harness) -> None:
    """A run changes the schedule (`next_run`, `last_run`), a message the feed
    (`last_seq`): a write made from the state before is refused, as any other change."""
    admin = harness.auth()
    path, before = _create(client, harness, "schedules")
    ran = client.post(f"{path}/run", headers=admin)
    assert ran.status_code == 201, ran.text
    expect(client.patch(path, json={"prompt": "x"}, headers={**admin, "if-match": before}),
           412, "resource-moved")  # fmt: skip
    now = client.get(path, headers=admin).headers["etag"]
    assert now != before
    assert (
        client.patch(path, json={"prompt": "x"}, headers={**admin, "if-match": now}).status_code
        == 200
    )
    path, before = _create(client, harness, "feeds")
    posted = client.post(f"{path}/messages", json={"message": "m"}, headers=admin)
    assert posted.status_code == 201, posted.text
    expect(client.delete(path, headers={**admin, "if-match": before}), 412, "resource-moved")
    now = client.get(path, headers=admin).headers["etag"]
    assert client.delete(path, headers={**admin, "if-match": now}).status_code == 204
