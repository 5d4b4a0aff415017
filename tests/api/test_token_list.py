"""`GET /v1/tokens` (paged, with each token's last use, never a secret) and tokens that
expire (`expires_in`, `expires_at`: 401 `token-expired` once passed), over a real server."""

from __future__ import annotations

import time

import httpx

from api.records import Token
from api.service.core import now_ms
from tests.api.conftest import BOTH, Harness, expect

STORES = BOTH
KEYS = {"id", "scope", "agent", "name", "created_at", "expires_at", "last_used_at"}


def _all(live: httpx.Client, harness: Harness) -> list[dict[str, object]]:
    """Every token, a page of one at a time."""
    items: list[dict[str, object]] = []
    cursor = None
    while True:
        query = {"limit": "1", **({"cursor": cursor} if cursor else {})}
        page = live.get("/v1/tokens", params=query, headers=harness.auth())
        assert page.status_code == 200, page.text
        items += page.json()["items"]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            return items


def test_tokens_are_listed_with_their_last_use_and_no_secret(
    live: httpx.Client, harness: Harness
) -> None:
    admin = harness.auth()
    issued = live.post("/v1/tokens", json={"scope": "decide", "name": "ci", "expires_in": 3600},
                       headers=admin)  # fmt: skip
    assert issued.status_code == 201, issued.text
    made = issued.json()
    assert made["expires_at"] - now_ms() in range(3_590_000, 3_600_001)
    assert made["last_used_at"] is None
    unused = live.post("/v1/tokens", json={"scope": "decide"}, headers=admin).json()
    used = live.get("/v1/agents/a1/tools", headers=harness.auth(made["token"]))
    assert used.status_code == 200, used.text
    listed = _all(live, harness)
    by_id = {item["id"]: item for item in listed}
    assert len(by_id) == len(listed) == len(list(harness.service.store.scan(Token.KIND)))
    assert all(set(item) == KEYS for item in listed)
    assert by_id[made["id"]]["last_used_at"] is not None
    assert by_id[unused["id"]]["last_used_at"] is None
    assert by_id[made["id"]]["expires_at"] == made["expires_at"]

    # a read wrote nothing of it; the next request that writes anyway does
    def stored() -> object:
        doc = harness.service.store.get(Token.KIND, made["id"])
        assert doc is not None
        return doc["last_used_at"]

    assert stored() is None
    # nor does a HEAD, which asks a GET's answer without its body (a read)
    assert live.head("/v1/agents?limit=1", headers=admin).status_code == 200
    assert stored() is None
    assert live.post("/v1/identities", json={}, headers=admin).status_code == 201
    assert stored() == by_id[made["id"]]["last_used_at"]
    # nothing of any token, nor of its hash, in the listing
    text = live.get("/v1/tokens", headers=admin).text
    for token in (made["token"], unused["token"], harness.admin, harness.agent_token):
        secret = token.removeprefix("chr_")
        assert all(secret[i : i + 8] not in text for i in range(len(secret) - 7))
    for row in harness.service.store.scan(Token.KIND):
        assert row.body["hash"][16:32] not in text
    # only an admin lists them; a cursor is this list's
    expect(live.get("/v1/tokens", headers=harness.auth(harness.decide)), 403,
           "insufficient-scope")  # fmt: skip
    expect(live.get("/v1/tokens?cursor=xyz", headers=admin), 400, "bad-cursor")
    expect(live.get("/v1/tokens?limit=0", headers=admin), 400, "bad-limit")


def test_an_expired_token_is_refused(live: httpx.Client, harness: Harness) -> None:
    admin = harness.auth()
    soon = now_ms() + 400
    body = {"scope": "agent", "agent": "a1", "expires_at": soon}
    made = live.post("/v1/tokens", json=body, headers=admin).json()
    own = harness.auth(made["token"])
    assert live.get("/v1/agents/a1/tools", headers=own).status_code == 200
    time.sleep(max(0.0, (soon - now_ms()) / 1000) + 0.05)
    for sent in (
        live.get("/v1/agents/a1/tools", headers=own),
        live.post("/v1/threads", json={"prompt": "x"}, headers=own),
        live.post("/v1/decisions", headers=own,
                  json={"agent": "a1", "tool": "mail.send",
                        "args": {"to": "b@example.com", "subject": "s", "body": "b"}}),
    ):  # fmt: skip
        expect(sent, 401, "token-expired")
        assert sent.headers["WWW-Authenticate"] == "Bearer"
        assert made["token"] not in sent.text


def test_a_bad_expiry_is_refused_and_issues_nothing(live: httpx.Client, harness: Harness) -> None:
    admin = harness.auth()
    before = len(list(harness.service.store.scan(Token.KIND)))
    for body, status, code in (
        ({"scope": "decide", "expires_in": 60, "expires_at": now_ms() + 60_000}, 400,
         "invalid-expiry"),
        ({"scope": "decide", "expires_at": now_ms() - 1}, 400, "invalid-expiry"),
        ({"scope": "decide", "expires_at": now_ms() + 11 * 366 * 86_400_000}, 400,
         "invalid-expiry"),
        ({"scope": "decide", "expires_in": 0}, 422, "invalid-body"),
        ({"scope": "decide", "expires_in": "soon"}, 422, "invalid-body"),
        ({"scope": "decide", "expires_in": 10**30}, 422, "invalid-body"),
    ):  # fmt: skip
        expect(live.post("/v1/tokens", json=body, headers=admin), status, code)
    assert len(list(harness.service.store.scan(Token.KIND))) == before
