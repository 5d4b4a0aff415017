"""Bad input: a 4xx problem+json with a stable code, never a 500, and nothing written."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.api.conftest import POLICY, Harness, expect


def test_error_paths(client: Any, harness: Harness) -> None:
    auth = harness.auth()
    post = client.post
    expect(post("/v1/decisions", content=b"{nope", headers=auth), 400, "malformed-json")
    expect(post("/v1/decisions", json={"agent": 1, "tool": "x"}, headers=auth), 422,
           "invalid-body")  # fmt: skip
    expect(post("/v1/decisions", json={"agent": "a1", "tool": "x", "extra": 1}, headers=auth),
           422, "invalid-body")  # fmt: skip
    expect(post("/v1/decisions", json={"agent": "ghost", "tool": "mail.send"}, headers=auth),
           404, "agent-not-found")  # fmt: skip
    expect(post("/v1/decisions", json={"agent": "a1", "tool": "t", "turn": "zz"}, headers=auth),
           404, "turn-not-found")  # fmt: skip
    big = b'{"agent": "a1", "tool": "t", "args": {"x": "' + b"a" * (1 << 20) + b'"}}'
    expect(post("/v1/decisions", content=big, headers=auth), 413, "body-too-large")
    deep: Any = "leaf"
    for _ in range(40):
        deep = {"d": deep}
    expect(post("/v1/decisions", json={"agent": "a1", "tool": "mail.send", "args": deep},
                headers=auth), 400, "too-deep")  # fmt: skip
    calls = [{"agent": "a1", "tool": "mail.send"}] * 1001
    expect(post("/v1/decisions/batch", json={"calls": calls}, headers=auth), 413,
           "batch-too-large")  # fmt: skip
    mixed = [{"agent": "a1", "tool": "mail.send"}, {"agent": "ghost", "tool": "mail.send"}]
    expect(post("/v1/decisions/batch", json={"calls": mixed}, headers=auth), 404,
           "agent-not-found")  # fmt: skip
    expect(client.get("/v1/agents?cursor=garbage", headers=auth), 400, "bad-cursor")
    other = client.get("/v1/revisions?limit=1", headers=auth).json()
    assert other["next_cursor"] is None
    expect(client.get("/v1/agents?limit=0", headers=auth), 400, "bad-limit")
    expect(client.get("/v1/decisions?after_seq=-1", headers=auth), 400, "bad-after-seq")
    expect(client.get("/v1/agents/ghost", headers=auth), 404, "agent-not-found")
    expect(client.get("/v1/nowhere", headers=auth), 404, "route-not-found")
    expect(client.delete("/v1/decisions", headers=auth), 405, "method-not-allowed")
    # nothing above was logged or written
    assert harness.service.store.last_seq() == 0
    assert [r.id for r in harness.service.store.scan("agents")] == ["a1"]


def test_a_cursor_from_another_list_is_refused(client: Any, harness: Harness) -> None:
    for n in range(3):
        harness.add_agent(f"x{n}", "narrow")
    page = client.get("/v1/agents?limit=1", headers=harness.auth()).json()
    expect(client.get(f"/v1/threads?cursor={page['next_cursor']}", headers=harness.auth()),
           400, "bad-cursor")  # fmt: skip


def test_policy_upload_422_with_diagnostics(client: Any, harness: Harness) -> None:
    bad = {"files": [{"path": "a.charter", "text": "role r {\n  allow nosuch.tool\n}\n"}]}
    response = client.put("/v1/policy", json=bad, headers=harness.auth())
    expect(response, 422, "policy-invalid")
    diag = response.json()["diagnostics"][0]
    assert {"code", "message", "file", "line", "column"} <= set(diag)
    assert diag["file"] == "a.charter" and diag["line"] == 2
    assert harness.service.store.latest_revision() == 1


def test_policy_upload_422_lists_warnings_with_the_errors(client: Any, harness: Harness) -> None:
    text = "role r {\n  allow search\n}\nprofile p {\n  roles r, r, zz\n}\n"
    response = client.put("/v1/policy", json={"files": [{"path": "a.charter", "text": text}]},
                          headers=harness.auth())  # fmt: skip
    expect(response, 422, "policy-invalid")
    body = response.json()
    assert [(d["code"], d["severity"]) for d in body["diagnostics"]] == [
        ("W0115", "warning"), ("E0104", "error"),
    ]  # fmt: skip
    assert body["detail"] == "the policy has 1 error(s)"


def test_policy_upload_400s_are_documented(client: Any, harness: Harness) -> None:
    text = {"content-type": "text/plain", **harness.auth()}
    expect(client.put("/v1/policy", content=b"role r {} \xff", headers=text), 400, "not-utf8")
    twice = {"files": [{"path": "a.charter", "text": "role r {}"}] * 2}
    expect(client.put("/v1/policy", json=twice, headers=harness.auth()), 400, "duplicate-path")
    # a bare `curl -X PUT` (no body, no type) replaced every file with nothing
    for empty, headers in ((b"", harness.auth()), (b" \n\t", text)):
        refused = client.put("/v1/policy", content=empty, headers=headers)
        expect(refused, 400, "empty-policy")
        assert refused.json()["help"]
    emptied = b"# emptied on purpose\n"  # (a1's profile with it: meant)
    comment = client.put("/v1/policy?remove_in_use=true", content=emptied, headers=text)
    assert comment.status_code == 201, comment.text  # (what the help says to send)
    assert harness.service.store.latest_revision() == 2
    root = Path(__file__).resolve().parents[2]
    source = (root / "api" / "http" / "policy.py").read_text(encoding="utf-8")
    codes = set(re.findall(r'ServiceError\(\s*"([a-z0-9-]+)"', source))
    assert {"not-utf8", "duplicate-path"} <= codes
    # (each listed among `PUT /v1/policy`'s codes in the reference, up to the next operation)
    reference = (root / "docs" / "http-reference.md").read_text(encoding="utf-8")
    start = reference.index("### `uploadPolicy`: `PUT /v1/policy`")
    documented = reference[start : reference.index("\n### ", start + 1)]
    assert sorted(c for c in codes if f"`{c}`" not in documented) == []


def test_policy_text_is_read_as_the_cli_reads_it(client: Any, harness: Harness) -> None:
    """A lone `\r` (a rule hidden in a comment for one reader, not for another) is refused
    with the code `charter check` gives it; a lone surrogate never becomes policy text;
    bytes that are not UTF-8 are placed at the bad byte."""
    hidden = "role a {\n  allow search # note\rallow execute\n}\nprofile p {\n  roles a\n}\n"
    text = {**harness.auth(), "content-type": "text/plain"}
    as_json = {**harness.auth(), "content-type": "application/json"}
    for body, headers in (
        (hidden.encode(), text),
        (json.dumps({"files": [{"path": "a.charter", "text": hidden}]}).encode(), as_json),
    ):
        response = client.put("/v1/policy", content=body, headers=headers)
        expect(response, 422, "policy-invalid")
        diag = response.json()["diagnostics"][0]
        assert (diag["code"], diag["line"], diag["column"]) == ("E0018", 2, 22)
    lone = json.dumps({"files": [{"path": "a.charter", "text": "role a {}\n# \ud800\n"}]})
    expect(client.put("/v1/policy", content=lone.encode(), headers=as_json), 400, "malformed-json")
    response = client.put("/v1/policy", content=b"role a {\n  # caf\xe9\n}\n", headers=text)
    expect(response, 400, "not-utf8")
    diag = response.json()["diagnostics"][0]
    assert (diag["code"], diag["line"], diag["column"]) == ("E0015", 2, 8)
    assert harness.service.store.latest_revision() == 1


junk = st.one_of(
    st.binary(max_size=200),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=20,
    ).map(lambda v: json.dumps(v).encode()),
)
ROUTES = [
    ("POST", "/v1/decisions"), ("POST", "/v1/decisions/batch"), ("POST", "/v1/fit"),
    ("POST", "/v1/turns"), ("PUT", "/v1/policy"), ("POST", "/v1/agents"),
    ("POST", "/v1/identities"), ("POST", "/v1/identities/import"), ("PATCH", "/v1/agents/a1"),
    ("POST", "/v1/threads"), ("POST", "/v1/roles"), ("POST", "/v1/connections"),
    ("POST", "/v1/tokens"), ("POST", "/v1/approvals/x/reject"),
]  # fmt: skip


def test_junk_never_yields_500(harness: Harness) -> None:
    from starlette.testclient import TestClient

    from api.http.app import create_app

    with TestClient(create_app(harness.service), raise_server_exceptions=False) as client:

        @settings(max_examples=40)
        @given(st.sampled_from(ROUTES), junk, st.sampled_from(["application/json", "text/plain"]))
        def run(route: tuple[str, str], payload: bytes, ctype: str) -> None:
            method, path = route
            response = client.request(
                method, path, content=payload, headers={**harness.auth(), "content-type": ctype}
            )
            assert response.status_code < 500, (path, payload, response.text)

        run()


def test_unexpected_errors_are_a_500_problem_that_leaks_nothing(harness: Harness) -> None:
    from starlette.testclient import TestClient

    from api.http.app import create_app

    app = create_app(harness.service)

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret-in-message")

    harness.service.store.read_decisions = boom  # type: ignore[method-assign]
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/v1/decisions", headers=harness.auth())
    assert response.status_code == 500
    assert response.json()["code"] == "internal-error"
    assert "secret" not in response.text
    assert harness.service.metrics.rejected == {(500, "internal-error"): 1}


def test_a_busy_store_is_a_503_with_retry_after_and_nothing_written(
    client: Any, harness: Harness
) -> None:
    """Another process holds SQLite's write lock past the store's timeout: a decision, a
    batch and a management request are each a 503 `store-unavailable` with Retry-After,
    nothing is logged, and the same request goes through once the lock is free."""
    import sqlite3

    store = harness.sqlite  # (its cursor or its timeout is set here)
    store._db.execute("PRAGMA busy_timeout = 50")  # (30 s in service)
    other = sqlite3.connect(harness.db, isolation_level=None)
    auth = harness.auth()
    call = {"agent": "a1", "tool": "mail.send", "args": {"to": "bob@example.com",
            "subject": "hi", "body": "hello"}}  # fmt: skip
    other.execute("BEGIN IMMEDIATE")
    try:
        refused = [
            client.post("/v1/decisions", json=call, headers=auth),
            client.post("/v1/decisions/batch", json={"calls": [call, call]}, headers=auth),
            client.post("/v1/threads", json={"agent": "a1"}, headers=auth),
        ]
    finally:
        other.execute("ROLLBACK")
        other.close()
    for response in refused:
        assert response.status_code == 503, response.text
        assert response.headers["retry-after"] == "1"
        assert response.json()["code"] == "store-unavailable"
    assert store.read_decisions(0, 10) == []
    assert client.post("/v1/decisions", json=call, headers=auth).status_code == 200
    assert harness.service.metrics.rejected[(503, "store-unavailable")] == 3


def test_rejected_requests_are_counted_by_status_and_code(client: Any, harness: Harness) -> None:
    """A rejected request writes nothing; /metrics counts it by its stable code."""
    bad = {"Authorization": "Bearer not-a-token"}
    call = {"agent": "a1", "tool": "mail.send", "args": {}}
    for _ in range(3):
        assert client.post("/v1/decisions", json=call, headers=bad).status_code == 401
    assert client.get("/v1/nowhere").status_code == 404
    assert client.post("/v1/decisions", content=b"{", headers=harness.auth()).status_code == 400
    metrics = client.get("/metrics").text
    assert 'charter_rejected_requests_total{status="401",code="unauthorized"} 3' in metrics
    assert 'charter_rejected_requests_total{status="404",code="route-not-found"} 1' in metrics
    assert sum(n for (status, _), n in harness.service.metrics.rejected.items()
               if status == 400) == 1  # fmt: skip


def test_a_body_read_in_pieces_without_a_length() -> None:
    """read_body reads the ASGI messages itself: pieces are joined, a chunked body over
    1 MiB is a 413 without a Content-Length, and a disconnect is ClientDisconnect."""
    import asyncio

    import pytest
    from starlette.requests import ClientDisconnect, Request

    from api.http.body import MAX_BODY, read_body, scope_header
    from api.service.errors import ServiceError

    def request(messages: list[dict[str, Any]], headers: list[tuple[bytes, bytes]]) -> Request:
        pending = list(messages)

        async def receive() -> dict[str, Any]:
            return pending.pop(0)

        scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
        return Request(scope, receive)

    piece = {"type": "http.request", "body": b'{"a":', "more_body": True}
    last = {"type": "http.request", "body": b"1}", "more_body": False}
    assert asyncio.run(read_body(request([piece, last], []))) == b'{"a":1}'
    one = request([last], [(b"content-length", b"2"), (b"x-other", b"1")])
    assert asyncio.run(read_body(one)) == b"1}"
    assert scope_header(one.scope, b"content-length") == "2"
    assert scope_header(one.scope, b"authorization") is None
    huge = {"type": "http.request", "body": b"a" * (MAX_BODY // 2 + 1), "more_body": True}
    with pytest.raises(ServiceError) as refused:
        asyncio.run(read_body(request([huge, huge, last], [])))
    assert refused.value.code == "body-too-large"
    with pytest.raises(ServiceError) as refused:
        asyncio.run(read_body(request([last], [(b"content-length", b"x")])))
    assert refused.value.code == "bad-content-length"
    with pytest.raises(ClientDisconnect):
        asyncio.run(read_body(request([piece, {"type": "http.disconnect"}], [])))


def test_an_error_after_the_response_started_goes_on_up_unchanged() -> None:
    """CatchAll does not wrap `send`: once a response has started, the server refuses the
    500's start (uvicorn raises RuntimeError), and the original error goes on up."""
    import asyncio

    import pytest
    from starlette.types import Message

    from api.http.errors import CatchAll

    class Boom(Exception):
        pass

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        raise Boom("secret-in-message")

    sent: list[Message] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start" and sent:
            raise RuntimeError("Expected ASGI message 'http.response.body'")
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {"type": "http", "method": "GET", "path": "/x", "headers": []}
    with pytest.raises(Boom):
        asyncio.run(CatchAll(app)(scope, receive, send))
    assert [m["status"] for m in sent] == [200]


def test_an_agent_whose_profile_an_upload_removed_gets_404s_not_500s(
    client: Any, harness: Harness
) -> None:
    """Its decisions are denies ("unknown profile"); what reads its profile (the listing,
    the fit checks of what it makes) says which profile is gone, and writes nothing."""
    harness.add_agent("x", "careful")
    token = harness.auth(harness.token_for("x"))
    renamed = POLICY.replace("profile careful", "profile careful-2")
    meant = "/v1/policy?remove_in_use=true"  # (else 409 `policy-in-use`)
    assert client.put(meant, content=renamed, headers=harness.auth()).status_code == 201
    revision = harness.service.store.latest_revision()
    role = {"name": "r9", "source": "role r9 {\n  allow mail.send\n}\n"}
    for method, path, body, auth in (
        ("GET", "/v1/agents/x/tools", None, harness.auth()),
        ("POST", "/v1/fit", {"agent": "x", "profile": "narrow"}, harness.auth()),
        ("POST", "/v1/fit", {"agent": "x", "source": role["source"]}, token),
        ("POST", "/v1/agents", {"name": "kid", "profile": "narrow"}, token),
        ("PATCH", "/v1/agents/x", {"profile": "narrow"}, token),
        ("POST", "/v1/roles", role, token),
        ("POST", "/v1/turns", {"agent": "x"}, token),
    ):
        response = client.request(method, path, json=body, headers=auth)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["code"] == "profile-not-found"
        assert f"profile `careful`, which revision {revision} does not" in response.json()["detail"]
    assert harness.service.store.page("turns", 0, 10) == []
    assert harness.service.store.latest_revision() == revision
    assert harness.service.store.last_seq() == 0
    assert [row.id for row in harness.service.store.page("agents", 0, 10, tag="x")] == []
