"""Token scopes: admin, decide, and an agent's own token (never more than its roles)."""

from __future__ import annotations

from typing import Any

import pytest

from api.http.errors import status_of
from api.service.core import Service
from api.service.logrows import expand
from tests.api.conftest import Harness
from tests.store.tables import sound

MAIL = {"to": "bob@example.com", "subject": "hi", "body": "hello"}


def test_missing_and_bad_tokens(client: Any, harness: Harness) -> None:
    body = {"agent": "a1", "tool": "mail.send", "args": MAIL}
    assert client.post("/v1/decisions", json=body).status_code == 401
    bad = client.post("/v1/decisions", json=body, headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401 and bad.json()["code"] == "unauthorized"
    assert client.get("/healthz").status_code == 200


def test_a_caller_without_a_valid_token_is_refused_before_its_body_is_read(
    client: Any, harness: Harness
) -> None:
    """Every endpoint: a 401 whatever the body holds (junk, the wrong shape, too big), so
    a caller without a token learns nothing of the schema and costs no parse."""
    junk = [b"{nope", b'{"agent": 1}', b"[" * 100 + b"]" * 100, b"x" * ((1 << 20) + 1)]
    paths = ["/v1/decisions", "/v1/decisions/batch", "/v1/fit", "/v1/turns", "/v1/agents",
             "/v1/threads", "/v1/identities"]  # fmt: skip
    for path in paths:
        for payload in junk:
            for headers in ({}, {"Authorization": "Bearer nope"}):
                response = client.post(path, content=payload, headers=headers)
                assert response.status_code == 401, (path, payload[:20], response.text)
                assert response.json()["code"] == "unauthorized"
    # an agent's token is checked against the agent its body names once the body is read
    harness.add_agent("other", "wide")
    agent = harness.auth(harness.agent_token)
    for path, body in (("/v1/fit", {"agent": "other", "profile": "wide"}),
                       ("/v1/turns", {"agent": "other"})):  # fmt: skip
        response = client.post(path, json=body, headers=agent)
        assert (response.status_code, response.json()["code"]) == (403, "insufficient-scope")
    assert harness.service.store.last_seq() == 0


def test_scopes(client: Any, harness: Harness) -> None:
    body = {"agent": "a1", "tool": "mail.send", "args": MAIL}
    for token in (harness.admin, harness.decide, harness.agent_token):
        assert (
            client.post("/v1/decisions", json=body, headers=harness.auth(token)).status_code == 200
        )
    decide_only = harness.auth(harness.decide)
    for method, path in (
        ("GET", "/v1/agents"),
        ("GET", "/v1/decisions"),
        ("GET", "/v1/policy"),
        ("PUT", "/v1/policy"),
        ("GET", "/v1/revisions"),
        ("POST", "/v1/tokens"),
    ):
        response = client.request(method, path, headers=decide_only)
        assert response.status_code == 403, (method, path)
        assert response.json()["code"] == "insufficient-scope"
    agent = harness.auth(harness.agent_token)
    assert client.get("/v1/decisions", headers=agent).status_code == 403
    assert client.put("/v1/policy", content="x", headers=agent).status_code == 403
    harness.add_agent("other", "wide")
    not_mine = {**body, "agent": "other"}
    assert client.post("/v1/decisions", json=not_mine, headers=agent).status_code == 403
    assert client.get("/v1/agents/other/tools", headers=agent).status_code == 403


def test_issue_and_revoke_tokens(live: Any, harness: Harness) -> None:
    made = live.post("/v1/tokens", json={"scope": "decide"}, headers=harness.auth())
    assert made.status_code == 201
    token = made.json()["token"]
    body = {"agent": "a1", "tool": "mail.send", "args": MAIL}
    assert live.post("/v1/decisions", json=body, headers=harness.auth(token)).status_code == 200
    stored = harness.service.store.get("tokens", made.json()["id"])
    assert stored is not None and token not in str(stored)
    assert live.delete(f"/v1/tokens/{made.json()['id']}", headers=harness.auth()).status_code == 204
    assert live.post("/v1/decisions", json=body, headers=harness.auth(token)).status_code == 401


def test_agent_token_is_decided_by_its_roles(live: Any, harness: Harness) -> None:
    agent = harness.auth(harness.agent_token)
    # `manager` allows agents.* but denies agents.delete
    listed = live.get("/v1/agents", headers=agent)
    assert listed.status_code == 200
    refused = live.delete("/v1/agents/a1", headers=agent)
    assert refused.status_code == 403
    assert refused.json()["code"] == "denied-by-policy"
    assert refused.json()["decision"]["reasons"][0]["kind"] == "deny"
    assert harness.service.store.get("agents", "a1") is not None
    # a narrow agent has no management grants at all
    harness.add_agent("n1", "narrow")
    narrow = harness.auth(harness.token_for("n1"))
    assert live.get("/v1/agents", headers=narrow).status_code == 403
    assert live.post("/v1/identities", json={}, headers=narrow).status_code == 403
    assert live.get("/v1/profiles", headers=narrow).status_code == 403
    # every one of those management calls was logged as a decision
    tools = [expand(e)["tool"] for _, e in sound(harness.service.store.read_decisions(0, 100))]
    assert tools == ["agents.list", "agents.delete", "agents.list", "identities.create",
                     "profiles.list"]  # fmt: skip


def test_agent_creates_only_what_fits(live: Any, harness: Harness) -> None:
    agent = harness.auth(harness.agent_token)
    inside = {
        "name": "team-mail",
        "source": 'role team-mail {\n  allow mail.send where args.to == "a@example.com"\n}\n',
    }
    made = live.post("/v1/roles", json=inside, headers=agent)
    assert made.status_code == 201, made.text
    assert made.json()["revision"] == 2
    wider = {"name": "team-any", "source": "role team-any {\n  allow mail.send\n}\n"}
    refused = live.post("/v1/roles", json=wider, headers=agent)
    assert refused.status_code == 403, refused.text
    assert refused.json()["code"] == "does-not-fit"
    assert harness.service.store.latest_revision() == 2
    # a child agent: `support-child` keeps the denies, hooks and a tighter budget: it fits
    child = live.post("/v1/agents", json={"name": "kid", "profile": "support-child"},
                      headers=agent)  # fmt: skip
    assert child.status_code == 201, child.text
    assert child.json()["parent"] == "a1" and child.json()["identity"] == harness.identity
    other = live.post("/v1/identities", json={}, headers=harness.auth()).json()
    foreign = {"name": "kid2", "profile": "support-child", "identity": other["id"]}
    assert live.post("/v1/agents", json=foreign, headers=agent).status_code == 403
    # `narrow` drops the caller's deny, its hook and its budget
    dropped = live.post("/v1/agents", json={"name": "kid3", "profile": "narrow"}, headers=agent)
    assert dropped.status_code == 403
    kinds = {v["kind"] for v in dropped.json()["fit"]["violations"]}
    assert {"drops-deny", "drops-hook", "budget"} <= kinds
    looser = {"name": "kid4", "profile": "support-child", "budget": {"amount": 50, "period": "24h"}}
    assert live.post("/v1/agents", json=looser, headers=agent).status_code == 403
    # an agent on `careful` cannot make a child on the wider `support`
    harness.add_agent("m1", "careful")
    careful = harness.auth(harness.token_for("m1"))
    wide_child = live.post("/v1/agents", json={"name": "k", "profile": "support"}, headers=careful)
    assert wide_child.status_code == 403, wide_child.text


def test_agent_role_create_pauses_under_default_hooks(live: Any, harness: Harness) -> None:
    harness.add_agent("m1", "careful")
    careful = harness.auth(harness.token_for("m1"))
    source = 'role team-x {\n  allow mail.send where args.to == "a@example.com"\n}\n'
    paused = live.post("/v1/roles", json={"name": "team-x", "source": source}, headers=careful)
    assert paused.status_code == 202, paused.text
    approval = paused.json()["approval_id"]
    assert harness.service.store.latest_revision() == 1
    approved = live.post(f"/v1/approvals/{approval}/approve", headers=harness.auth())
    assert approved.status_code == 200, approved.text
    assert approved.json()["decision"]["effect"] == "allow"
    assert approved.json()["result"]["name"] == "team-x"
    assert harness.service.store.latest_revision() == 2


def test_a_revoked_token_stops_at_once_in_another_process(harness: Harness, other: Service) -> None:
    """Two apps on one file, as two `--workers`: a token cached by the other one stops
    working there as soon as this one has revoked it, for a decision (checked again in
    the group commit's transaction) and for any other request; nothing is logged."""
    from starlette.testclient import TestClient

    from api.http.app import create_app

    body = {"agent": "a1", "tool": "mail.send", "args": MAIL}
    with (
        TestClient(create_app(harness.service), raise_server_exceptions=False) as here,
        TestClient(create_app(other), raise_server_exceptions=False) as there,
    ):
        made = here.post("/v1/tokens", json={"scope": "admin"}, headers=harness.auth()).json()
        token = harness.auth(made["token"])
        assert there.post("/v1/decisions", json=body, headers=token).status_code == 200
        assert there.get("/v1/agents/a1/tools", headers=token).status_code == 200  # cached
        logged = harness.service.store.last_seq()
        assert here.delete(f"/v1/tokens/{made['id']}", headers=harness.auth()).status_code == 204
        refused = there.post("/v1/decisions", json=body, headers=token)
        assert refused.status_code == 401 and refused.json()["code"] == "unauthorized"
        batch = there.post("/v1/decisions/batch", json={"calls": [body]}, headers=token)
        assert batch.status_code == 401
        assert there.get("/v1/agents/a1/tools", headers=token).status_code == 401
        assert there.post("/v1/tokens", json={"scope": "admin"}, headers=token).status_code == 401
        assert harness.service.store.last_seq() == logged
        assert there.post("/v1/decisions", json=body, headers=harness.auth()).status_code == 200


def test_a_revoked_token_is_refused_by_an_open_group(harness: Harness, other: Service) -> None:
    """The group commit's own check: a request authorized on a cached token, whose token
    another process revoked before the group's transaction began, is a 401 and writes
    nothing; the other members of the group are decided."""
    import asyncio

    from api.service import tokens
    from api.service.calls import Call
    from api.service.errors import ServiceError
    from api.service.groupcommit import GroupCommit

    cache = tokens.TokenCache(harness.service.store)
    harness.service.read.on_tokens.append(cache.forget)
    commit = GroupCommit(harness.service, cache)
    doomed, doc = tokens.issue(harness.service.store, "decide")
    assert cache.lookup(doomed) is not None and cache.lookup(harness.decide) is not None
    with other.store.atomic():
        other.store.delete("tokens", doc.id)
        other.read.forget_tokens([doc.id])
    call = [Call("a1", "mail.send", MAIL)]

    async def run() -> list[Any]:
        return list(
            await asyncio.gather(
                commit.decide(call, doomed), commit.decide(call, harness.decide),
                return_exceptions=True,
            )
        )  # fmt: skip

    refused, decided = asyncio.run(run())
    assert isinstance(refused, ServiceError) and status_of(refused.code) == 401
    assert [d["seq"] for d in decided] == [1]
    assert harness.service.store.last_seq() == 1


def test_a_revoked_token_is_refused_after_another_group_caught_up(
    harness: Harness, other: Service
) -> None:
    """A request authorized on the cached token before another process revoked it, whose
    group commits after an earlier group of this process has already seen the revocation
    (so its own look at the store finds nothing new): still a 401, nothing logged. Also
    for a token revoked in this same process after the look-up."""
    import asyncio

    from api.service import tokens
    from api.service.calls import Call
    from api.service.errors import ServiceError
    from api.service.groupcommit import GroupCommit

    cache = tokens.TokenCache(harness.service.store)
    harness.service.read.on_tokens.append(cache.forget)
    commit = GroupCommit(harness.service, cache)
    call = [Call("a1", "mail.send", MAIL)]
    doomed, doc = tokens.issue(harness.service.store, "decide")
    generation = commit.generation  # as the lane reads it, before the look-up
    assert cache.lookup(doomed) is not None
    with other.store.atomic():
        other.store.delete("tokens", doc.id)
        other.read.forget_tokens([doc.id])
    # another request's group sees the move first (and drops the cache)
    assert asyncio.run(commit.decide(call, harness.decide))[0]["seq"] == 1
    with pytest.raises(ServiceError) as refused:  # a revoked token is never logged
        asyncio.run(commit.decide(call, doomed, generation))
    assert status_of(refused.value.code) == 401
    assert harness.service.store.last_seq() == 1
    # revoked here: the same
    mine, doc = tokens.issue(harness.service.store, "decide")
    generation = commit.generation
    assert cache.lookup(mine) is not None
    with harness.service.store.atomic():
        harness.service.store.delete("tokens", doc.id)
        harness.service.read.forget_tokens([doc.id])
    with pytest.raises(ServiceError) as refused:  # a revoked token is never logged
        asyncio.run(commit.decide(call, mine, generation))
    assert status_of(refused.value.code) == 401
    assert harness.service.store.last_seq() == 1
    # a token that is still there is decided, whatever moved since its look-up
    generation = commit.generation
    with other.store.atomic():
        other.read.forget_tokens(["a-token-revoked-elsewhere"])
    assert asyncio.run(commit.decide(call, harness.decide))[0]["seq"] == 2
    assert asyncio.run(commit.decide(call, harness.decide, generation))[0]["seq"] == 3


def test_a_revoked_token_stops_at_once_for_concurrent_requests(
    harness: Harness, other: Service
) -> None:
    """As `charter serve --workers 2` was seen to fail: the token cached by the other
    worker, revoked here, then 30 concurrent decisions there with it: every one a 401,
    nothing logged (they were authorized on the old cache; whichever group of theirs
    first looks at the store, the others are checked again too)."""
    import asyncio

    import httpx

    from api.http.app import create_app
    from tests.api.conftest import LiveServer

    body = {"agent": "a1", "tool": "mail.send", "args": MAIL}
    with LiveServer(create_app(other)) as there:
        with httpx.Client(base_url=there, timeout=30) as client:
            made = client.post("/v1/tokens", json={"scope": "decide"}, headers=harness.auth())
            token = harness.auth(made.json()["token"])
            assert client.post("/v1/decisions", json=body, headers=token).status_code == 200
        logged = harness.service.store.last_seq()
        with harness.service.store.atomic():  # revoked by the other process ("here")
            assert harness.service.store.delete("tokens", made.json()["id"])
            harness.service.read.forget_tokens([made.json()["id"]])

        async def burst() -> list[int]:
            async with httpx.AsyncClient(base_url=there, timeout=30) as client:
                answers = await asyncio.gather(
                    *(client.post("/v1/decisions", json=body, headers=token) for _ in range(30))
                )
                return [a.status_code for a in answers]

        assert asyncio.run(burst()) == [401] * 30
    assert harness.service.store.last_seq() == logged


def test_token_digests_are_sha256_whichever_implementation_computes_them() -> None:
    """tokens.digest uses CPython's own SHA-256 where there is one (cheaper per call than
    hashlib's OpenSSL set-up); stored hashes must stay what hashlib gives."""
    import hashlib

    from api.service import tokens

    for token in ("", "chr_abc", tokens.PREFIX + "x" * 43, "é\u2603"):
        assert tokens.digest(token) == hashlib.sha256(token.encode()).hexdigest()


def test_a_token_revoked_during_a_management_request_writes_nothing(
    harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent's management request is checked again inside the transaction that
    decides and runs it, as a decision request's group commit is: its token was looked
    up before its body was read and its fit checks ran (seconds, with the solver), and
    another worker revoking it meanwhile let that one request through (a child agent
    made, its `agents.create` logged). Now a 401, and nothing is written."""
    from starlette.testclient import TestClient

    from api.http.app import create_app
    from api.service import manage, tokens

    real = manage.PRECHECKS["agents.create"]

    def revoked_meanwhile(*args: Any) -> None:
        real(*args)  # (the fit check passes) then another process revokes the token
        assert tokens.revoke(other, tokens.agent_tokens(other.store, "a1"))

    child = {"name": "kid", "profile": "support"}
    agent = harness.auth(harness.agent_token)
    with TestClient(create_app(harness.service), raise_server_exceptions=False) as client:
        assert client.get("/v1/agents/a1", headers=agent).status_code == 200  # cached
        logged = harness.service.store.last_seq()
        monkeypatch.setitem(manage.PRECHECKS, "agents.create", revoked_meanwhile)
        refused = client.post("/v1/agents", json=child, headers=agent)
        assert (refused.status_code, refused.json()["code"]) == (401, "unauthorized")
        assert harness.service.store.last_seq() == logged
        made = [row.body["name"] for row in harness.service.store.scan("agents")]
        assert made == ["a1"]
        # a token that is still there is decided and runs, whatever moved meanwhile
        mine = harness.auth(harness.token_for("a1"))
        monkeypatch.setitem(manage.PRECHECKS, "agents.create", real)
        with other.store.atomic():
            other.read.forget_tokens(["a-token-revoked-elsewhere"])
        assert client.post("/v1/agents", json=child, headers=mine).status_code == 201
        assert harness.service.store.last_seq() == logged + 1
