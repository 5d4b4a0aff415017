"""The console's sessions (api/http/session.py): a sealed cookie opens only as it was
sealed, never shows its token, and a state-changing request passes the CSRF check only
with the session's token and the server's own origin; over HTTP, a session acts exactly
as its token, and ends with it."""

from __future__ import annotations

import base64
import time
from typing import Any

import httpx
from hypothesis import given
from hypothesis import strategies as st
from starlette.testclient import TestClient

from api.http.app import create_app
from api.http.session import (
    COOKIE,
    ENDED,
    MAGIC,
    Session,
    csrf_refusal,
    new_session,
    seal,
    unseal,
)
from policy.secrets import Sealer
from tests.api.conftest import Harness, LiveServer, expect
from tests.api.test_approval_waits import Stream

SEALER = Sealer(b"k" * 32)
OTHER = Sealer(b"o" * 32)
TOKENS = st.text(min_size=16, max_size=512).filter(lambda t: t.strip())


@given(TOKENS)
def test_a_session_opens_as_it_was_sealed_and_hides_its_token(token: str) -> None:
    session = new_session(token)
    value = seal(SEALER, session)
    assert unseal(SEALER, value) == session
    assert token not in value and token.encode().hex() not in value
    assert unseal(OTHER, value) is None  # (another node's key)


@given(TOKENS, st.data())
def test_a_cookie_changed_in_any_way_does_not_open(token: str, data: st.DataObject) -> None:
    value = seal(SEALER, new_session(token))
    where = data.draw(st.integers(0, len(value) - 1))
    kind = data.draw(st.sampled_from(["flip", "cut", "add", "pad"]))
    if kind == "flip":
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        other = data.draw(st.sampled_from(alphabet).filter(lambda c: c != value[where]))
        changed = value[:where] + other + value[where + 1 :]
    elif kind == "cut":
        changed = value[:where]
    elif kind == "add":
        changed = value + data.draw(st.text(min_size=1, max_size=8))
    else:
        changed = value + "=" * data.draw(st.integers(1, 3)) + "x"
    assert unseal(SEALER, changed) is None


@given(st.binary(max_size=200))
def test_nothing_but_a_session_opens_as_one(plain: bytes) -> None:
    """A value the key sealed for another use (a stored secret) is no session."""
    value = base64.urlsafe_b64encode(SEALER.seal(plain)).decode().rstrip("=")
    found = unseal(SEALER, value)
    assert found is None or plain.startswith(MAGIC)


def test_an_expired_or_ended_session_does_not_open() -> None:
    session = new_session("chr_" + "a" * 40)
    old = Session(session.id, session.token, session.csrf, int(time.time()) - 1)
    assert unseal(SEALER, seal(SEALER, old)) is None
    ENDED.add(session)
    assert unseal(SEALER, seal(SEALER, session)) is None


HOST = "console.example:8443"
ORIGINS = st.sampled_from([
    f"http://{HOST}", f"https://{HOST}", f"HTTP://{HOST.upper()}", f"http://{HOST}/",
    "http://console.example", "null", "", f"http://{HOST}.evil", "http://evil.test",
])  # fmt: skip


@given(
    st.sampled_from(["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"]),
    st.lists(st.sampled_from(["right", "wrong", "", "right "]), max_size=2),
    st.lists(ORIGINS, max_size=2),
    st.booleans(),
)
def test_only_the_session_token_from_the_own_origin_changes_anything(
    method: str, tokens: list[str], origins: list[str], tls: bool
) -> None:
    session = Session("i", "t", "right", 0)
    headers = [(b"host", HOST.encode())]
    headers += [(b"x-charter-csrf", t.encode()) for t in tokens]
    headers += [(b"origin", o.encode()) for o in origins]
    scope: dict[str, Any] = {
        "method": method, "headers": headers, "scheme": "https" if tls else "http",
    }  # fmt: skip
    own = f"{'https' if tls else 'http'}://{HOST}"
    passes = method in ("GET", "HEAD", "OPTIONS") or (
        tokens == ["right"] and len(origins) == 1 and origins[0].lower() == own
    )
    assert (csrf_refusal(scope, session) is None) == passes


# ---- over HTTP: the session acts as its token ---------------------------------------------


def _sign_in(client: Any, token: str) -> tuple[str, str]:
    """(the cookie's value, the CSRF token) of a new session."""
    origin = str(client.base_url).rstrip("/")
    answer = client.post("/console/session", json={"token": token}, headers={"Origin": origin})
    assert answer.status_code == 200, answer.text
    assert token not in answer.text and token not in str(answer.headers)
    client.cookies.clear()  # (each request below sends the cookie it means to)
    return answer.cookies[COOKIE], answer.json()["csrf"]


def test_a_session_may_do_what_its_token_may(harness: Harness, live: httpx.Client) -> None:
    cookie, csrf = _sign_in(live, harness.agent_token)
    jar = {"Cookie": f"{COOKIE}={cookie}"}
    who = live.get("/console/session", headers=jar).json()
    assert (who["scope"], who["agent"], who["csrf"]) == ("agent", "a1", csrf)
    assert live.get("/v1/agents/a1", headers=jar).status_code == 200
    expect(live.get("/v1/decisions", headers=jar), 403, "insufficient-scope")
    # A bearer token given with the cookie is the one acted on.
    both = live.get("/v1/decisions", headers={**jar, **harness.auth()})
    assert both.status_code == 200
    # Revoking the token ends the session at once.
    token_id = who["token_id"]
    assert live.delete(f"/v1/tokens/{token_id}", headers=harness.auth()).status_code == 204
    expect(live.get("/v1/agents/a1", headers=jar), 401, "unauthorized")
    expect(live.get("/console/session", headers=jar), 401, "unauthorized")


def test_signing_out_ends_the_session(harness: Harness, live: httpx.Client) -> None:
    cookie, csrf = _sign_in(live, harness.admin)
    jar = {"Cookie": f"{COOKIE}={cookie}"}
    origin = str(live.base_url).rstrip("/")
    expect(live.delete("/console/session", headers=jar), 403, "csrf-refused")
    assert live.get("/v1/agents", headers=jar).status_code == 200
    out = live.delete("/console/session", headers={**jar, "X-Charter-CSRF": csrf, "Origin": origin})  # fmt: skip
    assert out.status_code == 204 and "Max-Age=0" in out.headers["set-cookie"]
    expect(live.get("/v1/agents", headers=jar), 401, "unauthorized")
    # A cookie given twice is neither.
    two = {"Cookie": f"{COOKIE}={_sign_in(live, harness.admin)[0]}; {COOKIE}=x"}
    expect(live.get("/v1/agents", headers=two), 401, "unauthorized")


def test_a_sign_in_takes_a_valid_token_in_a_json_body(harness: Harness, live: httpx.Client) -> None:
    origin = {"Origin": str(live.base_url).rstrip("/")}
    bad = live.post("/console/session", json={"token": "chr_nope"}, headers=origin)
    expect(bad, 401, "unauthorized")
    assert "set-cookie" not in bad.headers
    expect(live.post("/console/session", content=b"{", headers=origin), 400, "malformed-json")
    for body in ({}, {"token": ""}, {"token": "x" * 513}, {"token": harness.admin, "x": 1}):
        expect(live.post("/console/session", json=body, headers=origin), 422, "invalid-body")
    expect(live.post("/console/session", json={"token": harness.admin}), 403, "csrf-refused")
    expect(live.get("/console/session"), 401, "unauthorized")


def test_the_cookie_is_secure_over_tls(harness: Harness) -> None:
    with TestClient(create_app(harness.service), base_url="https://testserver") as client:
        answer = client.post(
            "/console/session", json={"token": harness.admin},
            headers={"Origin": "https://testserver"},
        )  # fmt: skip
        assert answer.status_code == 200
        cookie = answer.headers["set-cookie"]
        assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie


def test_a_sessions_stream_ends_when_the_server_shuts_down(harness: Harness) -> None:
    """The stream the approvals page reads, opened with the cookie: the session's token is
    added to the request's own scope, through which the connection ends it at shutdown."""
    server = LiveServer(create_app(harness.service))
    with server as url, httpx.Client(base_url=url, timeout=30) as client:
        cookie, _ = _sign_in(client, harness.admin)
        stream = Stream(url, {"Cookie": f"{COOKIE}={cookie}"})
        assert stream.status == 200
        stream.until(1)  # (`ready`)
        began = time.monotonic()
        server.server.should_exit = True
        server.thread.join(10)
        assert not server.thread.is_alive() and time.monotonic() - began < 3
        assert stream.ended.wait(3)
        stream.close()
