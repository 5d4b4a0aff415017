"""Requests as a client library would not send them, on a raw socket to uvicorn on
loopback (tests/api/rawhttp.py): a header twice, bytes around a token, pipelined
requests. Each refusal is a problem with a stable code, and writes nothing."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator

import pytest

from api.http.app import TABLE, create_app
from api.service import tokens
from tests.api.conftest import POLICY, Harness, LiveServer, asgi
from tests.api.rawhttp import exchange, read_answers, request

CALL = {"agent": "b1", "tool": "mail.send",
        "args": {"to": "bob@example.com", "subject": "hi", "body": "hello"}}  # fmt: skip


@pytest.fixture
def port(harness: Harness) -> Iterator[int]:
    server = LiveServer(create_app(harness.service))
    with server:
        yield server.port


def bearer(token: str | bytes) -> tuple[str, bytes]:
    return "Authorization", b"Bearer " + (token if isinstance(token, bytes) else token.encode())


def test_two_authorization_headers_are_refused_before_either_is_used(
    port: int, harness: Harness
) -> None:
    """Which of two a reader takes differs (here the first; a proxy may check the last):
    an admin's token ahead of an agent's decided for another agent than the agent's own,
    and listed every agent, as the admin. Refused whichever comes first and whether or
    not each is valid, on the decision lane as on the router, deciding and writing
    nothing; under a `root_path` too, where the router serves the lane."""
    harness.add_agent("b1", "support")
    admin, agent, decide = harness.admin, harness.agent_token, harness.decide
    call = json.dumps(CALL).encode()
    secrets = harness.service.store.page("secrets", 0, 100)
    for first, second in ((admin, agent), (agent, admin), (decide, admin), (admin, admin),
                          ("nope", admin)):  # fmt: skip
        twice = (bearer(first), bearer(second))
        for method, path, body in (
            ("POST", "/v1/decisions", call),
            ("POST", "/v1/decisions/batch", b'{"calls": [%s]}' % call),
            ("GET", "/v1/agents", None),
            ("POST", "/v1/identities", b'{"label": "x"}'),
        ):
            [answer] = exchange(port, request(method, path, twice, body))
            assert answer.code == (400, "repeated-header"), (path, answer)
            assert "`Authorization`" in answer.json()["detail"]
    assert harness.service.store.last_seq() == 0
    assert harness.service.store.page("secrets", 0, 100) == secrets
    app = create_app(harness.service)
    sent = asgi(app, harness, "/v1/decisions", call, root_path="/svc",
                more=((b"authorization", f"Bearer {agent}".encode()),))  # fmt: skip
    assert (sent[0]["status"], json.loads(sent[1]["body"])["code"]) == (400, "repeated-header")
    assert harness.service.store.last_seq() == 0
    [once] = exchange(port, request("POST", "/v1/decisions", (bearer(admin),), call))
    assert once.status == 200


def test_a_token_is_the_bytes_after_bearer(port: int, harness: Harness) -> None:
    """A header is read as Latin-1, and the token was stripped of any Unicode space: a
    no-break space (0xA0) or a next-line (0x85) around an admin's token was that token
    here and another to anything else reading the header. Such a byte is now part of the
    token (unknown: 401); the scheme in any case, and spaces before the token, are as
    HTTP has them."""
    admin = harness.admin.encode()
    secrets = harness.service.store.page("secrets", 0, 100)
    for value in (b"\xa0" + admin, admin + b"\xa0", b"\x85" + admin, admin + b"\x85"):
        [answer] = exchange(port, request("GET", "/v1/agents", (bearer(value),)))
        assert answer.code == (401, "unauthorized"), value
    made = exchange(port, request("POST", "/v1/identities", (bearer(b"\xa0" + admin),), b"{}"))
    assert made[0].code == (401, "unauthorized")
    assert harness.service.store.page("secrets", 0, 100) == secrets
    for value in (b"bearer " + admin, b"BEARER  " + admin, b"Bearer " + admin):
        [answer] = exchange(port, request("GET", "/v1/agents", (("Authorization", value),)))
        assert answer.status == 200, value
    [tab] = exchange(port, request("GET", "/v1/agents", (("Authorization", b"Bearer\t" + admin),)))
    assert tab.code == (401, "unauthorized")


def test_if_match_twice_is_a_list_and_refused(port: int, harness: Harness) -> None:
    """Two `If-Match` headers are one list (RFC 9110), which one header is refused for;
    read as its first tag alone, the write went ahead on it."""
    admin = bearer(harness.admin)
    [got] = exchange(port, request("GET", "/v1/agents/a1", (admin,)))
    etag = got.header("etag")[0]
    stale = '"' + "0" * 32 + '"'
    for first, second in ((etag, stale), (etag, etag), ("*", etag)):
        headers = (admin, ("Content-Type", "application/json"), ("If-Match", first),
                   ("If-Match", second))  # fmt: skip
        [answer] = exchange(port, request("PATCH", "/v1/agents/a1", headers, b'{"name": "z"}'))
        assert answer.code == (400, "bad-if-match"), (first, second, answer)
    [after] = exchange(port, request("GET", "/v1/agents/a1", (admin,)))
    assert after.json()["name"] == "a1"
    upload = (admin, ("Content-Type", "text/plain"), ("If-Match", '"1"'), ("If-Match", '"1"'))
    [answer] = exchange(port, request("PUT", "/v1/policy", upload, POLICY.encode()))
    assert answer.code == (400, "bad-if-match")
    assert harness.service.store.latest_revision() == 1


def test_a_policy_upload_with_two_content_types_is_refused(port: int, harness: Harness) -> None:
    """`Content-Type` says whether the body is DSL text or JSON: with two, the upload
    stored was the one the first said, where a proxy reading the last sees another."""
    admin = bearer(harness.admin)
    for kinds in (("text/plain", "application/json"), ("application/json", "text/plain")):
        headers = (admin, *(("Content-Type", kind) for kind in kinds))
        [answer] = exchange(port, request("PUT", "/v1/policy", headers, POLICY.encode()))
        assert answer.code == (400, "repeated-header"), (kinds, answer)
        assert "`Content-Type`" in answer.json()["detail"]
    assert harness.service.store.latest_revision() == 1


def _paths() -> dict[str, set[str]]:
    """Each path of the app (its parameters filled in) and the methods some route takes
    on it (`/v1/identities/import` is also an `/v1/identities/{id}`)."""
    routes = [(re.sub(r"\{\w+\}", "[^/]+", spec.path), spec.method) for spec, _ in TABLE]
    taken: dict[str, set[str]] = {}
    for spec, _ in TABLE:
        path = re.sub(r"\{\w+\}", "x", spec.path)
        for pattern, method in routes:
            if re.fullmatch(pattern, path):
                taken.setdefault(path, set()).update({method, "HEAD"} if method == "GET"
                                                     else {method})  # fmt: skip
    return taken


@pytest.mark.parametrize(("path", "methods"), sorted(_paths().items()))
def test_a_405_says_what_the_path_takes(
    port: int, harness: Harness, path: str, methods: set[str]
) -> None:
    """RFC 9110: a 405 lists in `Allow` the methods the path takes. Starlette's listed
    those of the first route on the path alone (`GET, HEAD` for `/v1/agents`), and its
    problem dropped even that. Under a `root_path` the same."""
    for method in ("OPTIONS", "TRACE", *({"PUT", "DELETE", "POST"} - methods)):
        [answer] = exchange(port, request(method, path, (bearer(harness.admin),)))
        assert answer.code == (405, "method-not-allowed"), (method, answer)
        assert answer.header("allow") == [", ".join(sorted(methods))]
    sent = asgi(create_app(harness.service), harness, path, method="TRACE", root_path="/svc")
    assert sent[0]["status"] == 405
    assert (b"allow", ", ".join(sorted(methods)).encode()) in sent[0]["headers"]
    assert harness.service.store.last_seq() == 0


def test_a_pipelined_request_acts_for_its_own_token(port: int, harness: Harness) -> None:
    """uvicorn starts a pipelined request's task inside the one before it on the
    connection, whose token it would act for: an admin revoking its own token, then on
    the same connection a decision with the `decide` token, had the decision's write
    checked against the revoked admin token (a 401, nothing logged)."""
    doomed, doc = tokens.issue(harness.service.store, "admin")
    call = json.dumps({**CALL, "agent": "a1"}).encode()
    pipelined = request("DELETE", f"/v1/tokens/{doc.id}", (bearer(doomed),)) + request(
        "POST", "/v1/decisions", (bearer(harness.decide),), call
    )
    revoked, decided = exchange(port, pipelined, answers=2)
    assert revoked.status == 204, revoked
    assert decided.status == 200, decided
    assert harness.service.store.last_seq() == 1
    refused, listed = exchange(port, request("GET", "/v1/agents", (bearer("nope"),)) + request(
        "GET", "/v1/agents", (bearer(harness.admin),)), answers=2)  # fmt: skip
    assert (refused.code, listed.status) == ((401, "unauthorized"), 200)


def test_a_chunked_body_over_the_cap_is_refused_as_it_streams(port: int, harness: Harness) -> None:
    """The 1 MiB cap is kept while a body without a `Content-Length` comes in: the 413
    comes while the rest of the body has not been sent (the answer is read before the
    body's last chunk), and nothing is written."""
    head = request("POST", "/v1/identities", (bearer(harness.admin),
                   ("Transfer-Encoding", "chunked")))  # fmt: skip
    piece = b"x" * 65536
    secrets = harness.service.store.page("secrets", 0, 100)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head)
        for _ in range(17):  # 1 MiB and one piece more
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        [answer] = read_answers(sock, 1)
    assert answer.code == (413, "body-too-large")
    assert harness.service.store.page("secrets", 0, 100) == secrets
