"""Protocol edges of reading a request (api/http/body.py, calls.py, pagination.py): what
is decided, fit-checked and logged is what is done and stored, and an edge is a 4xx
problem with a stable code, never a 500, with nothing written."""

from __future__ import annotations

import json
import logging
from decimal import Decimal
from typing import Any

import pytest

from api.http.app import create_app
from tests.api.conftest import POLICY, Harness, asgi, code_of


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/v1/identities"), ("POST", "/v1/fit"), ("PUT", "/v1/policy"),
     ("PATCH", "/v1/agents/a1")],
)  # fmt: skip
def test_a_client_gone_before_its_body_came_is_no_500(
    harness: Harness, caplog: pytest.LogCaptureFixture, method: str, path: str
) -> None:
    """Every endpoint, as the decision lane: a client that went away while its body was
    coming is not answered and nothing is written. Outside the lane it was logged as an
    unexpected ClientDisconnect and counted as a 500 `internal-error` in /metrics."""
    app = create_app(harness.service)
    revision = harness.service.snapshots.latest
    keys = harness.service.store.page("secrets", 0, 10)
    half = {"type": "http.request", "body": b'{"label": "x",', "more_body": True}
    with caplog.at_level(logging.WARNING, logger="charter.http"):
        sent = asgi(app, harness, path, method=method, messages=[half, {"type": "http.disconnect"}])
    assert sent == []
    assert harness.service.metrics.rejected == {}
    assert caplog.records == []
    assert harness.service.store.page("secrets", 0, 10) == keys
    assert harness.service.snapshots.latest == revision


# The exact value of the double nearest 0.1: a float holds it exactly (so the readers keep
# it a float), but the shortest text of that float is `0.1`, a smaller number.
DOUBLE_TENTH = "0.1000000000000000055511151231257827021181583404541015625"
COST_REVIEW = """
hook review-costly-threads on threads.create where args.max_cost > 0.1 {
  deny "threads over 0.1 USD need a human"
}
profile costly {
  roles manager
  hooks review-costly-threads
}
"""


def test_an_amount_a_double_holds_exactly_keeps_its_value(live: Any, harness: Harness) -> None:
    """A `max_cost` or a budget's `amount` whose text is exactly a double's value was
    rebuilt by the models from that float's shortest text: `DOUBLE_TENTH` became 0.1, so
    `args.max_cost > 0.1` was decided false, and 0.1 stored, for a number over 0.1."""
    admin = harness.auth()
    put = live.put("/v1/policy", content=POLICY + COST_REVIEW, headers=admin)
    assert put.status_code == 201, put.text
    harness.add_agent("spender", "costly")
    agent = harness.auth(harness.token_for("spender"))
    body = b'{"max_cost": %s}' % DOUBLE_TENTH.encode()
    refused = live.post("/v1/threads", content=body, headers=agent)
    assert code_of(refused) == (403, "denied-by-policy"), refused.text
    logged = live.get("/v1/decisions", headers=admin)
    assert f'"max_cost":{DOUBLE_TENTH}' in logged.text  # the arguments decided
    made = live.post("/v1/threads", content=b'{"agent": "a1", "max_cost": %s}'
                     % DOUBLE_TENTH.encode(), headers=admin)  # fmt: skip
    assert made.status_code == 201, made.text
    assert made.json()["max_cost"] == DOUBLE_TENTH
    tiny = "0.000000000931322574615478515625"  # 2**-30: shortest text 9.313225746154785e-10
    patch = b'{"budget": {"amount": %s, "period": "24h"}}' % tiny.encode()
    changed = live.patch("/v1/agents/a1", content=patch, headers=admin)
    assert changed.status_code == 200, changed.text
    assert Decimal(changed.json()["budget"]["amount"]) == Decimal(2**-30)


CALL = b'"agent": "a1", "tool": "mail.send"'
SENT = b'"args": {"to": "bob@example.com", "subject": "hi", "body": "hello"}'
TWICE = [
    # (path, body): a key twice, at the top, in args, in a batch's call, in `calls`
    ("/v1/decisions", b'{"agent": "nobody", %s, %s}' % (CALL, SENT)),
    ("/v1/decisions", b'{%s, "args": {"to": "eve@evil.test", "to": "bob@example.com", '
                      b'"subject": "hi", "body": "hello"}}' % CALL),
    ("/v1/decisions", b'{%s, %s, "context": {"k": 1, "\\u006b": 2}}' % (CALL, SENT)),
    ("/v1/decisions", b'{%s, %s, "thread": null, "thread": null}' % (CALL, SENT)),
    ("/v1/decisions/batch", b'{"calls": [{%s, %s}, {%s, %s, "args": {}}]}'
                            % (CALL, SENT, CALL, SENT)),
    ("/v1/decisions/batch", b'{"calls": [{%s, %s}], "calls": [{%s, %s}]}'
                            % (CALL, SENT, CALL, SENT)),
]  # fmt: skip


@pytest.mark.parametrize(("path", "body"), TWICE)
def test_a_key_twice_in_a_decision_is_refused(
    client: Any, harness: Harness, path: str, body: bytes
) -> None:
    """Which of two values a parser keeps differs between parsers (these keep the last,
    some keep the first): the call decided and logged could be another than the one a
    client, a proxy or the tool reads. Refused, deciding and logging nothing; a key
    written with an escape (`\\u006b`) is the same key."""
    response = client.post(path, content=body, headers=harness.auth())
    assert code_of(response) == (400, "duplicate-key"), response.text
    assert "twice" in response.json()["detail"]
    assert harness.service.store.last_seq() == 0


def test_the_bodys_422_comes_before_a_key_twice(client: Any, harness: Harness) -> None:
    """As for a NaN: the models read the body first (the order of every reader)."""
    for path, body in (
        ("/v1/decisions", b'{%s, %s, "extra": 1, "extra": 2}' % (CALL, SENT)),
        ("/v1/agents", b'{"name": "x", "name": "y"}'),
    ):
        response = client.post(path, content=body, headers=harness.auth())
        assert code_of(response) == (422, "invalid-body"), response.text


def test_a_key_twice_in_a_management_body_decides_and_writes_nothing(
    client: Any, harness: Harness
) -> None:
    """An agent's request is decided as a built-in tool call on its body: a role's source,
    a child's profile or metadata given twice is refused before it is decided or
    fit-checked; an admin's upload so too."""
    agent = harness.auth(harness.token_for("a1"))
    role = b"role r1 { allow mail.send }"
    revision = harness.service.snapshots.latest
    agents = list(harness.service.store.scan("agents"))
    for method, path, body, auth in (
        ("POST", "/v1/roles", b'{"name": "r1", "source": "%s", "source": "%s"}'
         % (role, role.replace(b"mail.send", b"billing.refund")), agent),
        ("POST", "/v1/agents", b'{"name": "c", "profile": "support-child", '
         b'"profile": "support"}', agent),
        ("POST", "/v1/agents", b'{"name": "c", "profile": "support-child", '
         b'"metadata": {"tier": 1, "tier": 2}}', agent),
        ("PATCH", "/v1/agents/a1", b'{"metadata": {"a": {"b": 1, "b": 1}}}', agent),
        ("PUT", "/v1/policy", b'{"files": [{"path": "p.charter", "text": "", "text": ""}]}',
         harness.auth()),
    ):  # fmt: skip
        headers = {**auth, "content-type": "application/json"}
        response = client.request(method, path, content=body, headers=headers)
        assert code_of(response) == (400, "duplicate-key"), (path, response.text)
    assert harness.service.store.last_seq() == 0
    assert harness.service.snapshots.latest == revision
    assert list(harness.service.store.scan("agents")) == agents


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/v1/agents/"), ("GET", "/v1/agents/a1/"), ("POST", "/v1/agents//"),
     ("POST", "/v1/decisions/"), ("GET", "/v1/policy/"), ("DELETE", "/v1/agents/a1/")],
)  # fmt: skip
def test_a_path_with_a_slash_more_is_no_route(
    client: Any, harness: Harness, method: str, path: str
) -> None:
    """A path is an endpoint's or none: one with a trailing slash was a 307 with an empty
    body to the path without it, built from the request's `Host` header."""
    headers = {**harness.auth(harness.agent_token), "host": "elsewhere.test"}
    response = client.request(method, path, json={"name": "x"}, headers=headers)
    assert code_of(response) == (404, "route-not-found"), (response.status_code, response.headers)
    assert "location" not in response.headers
    assert harness.service.store.last_seq() == 0


@pytest.mark.parametrize(
    "path",
    ["/v1/agents?limit=1&limit=200", "/v1/threads?agent=a1&agent=a1",
     "/v1/threads?agent=child&agent=a1", "/v1/approvals?status=pending&status=approved",
     "/v1/roles?cursor=&cursor=", "/v1/decisions?after_seq=0&after_seq=5",
     "/v1/revisions?limit=1&limit=2", "/v1/policy?revision=1&revision=1"],
)  # fmt: skip
def test_a_query_parameter_given_twice_is_refused(client: Any, harness: Harness, path: str) -> None:
    """Which of two values a reader keeps differs (this one kept the last; many keep the
    first): an agent's list is decided on its parameters, so `?agent=child&agent=a1` was
    decided, logged and listed as `a1`'s. Refused, deciding and logging nothing."""
    token = harness.agent_token if path.startswith(("/v1/threads", "/v1/agents")) else None
    response = client.get(path, headers=harness.auth(token))
    assert code_of(response) == (400, "repeated-parameter"), response.text
    name = path.split("?")[1].split("=")[0]
    assert f"`{name}`" in response.json()["detail"]
    assert harness.service.store.last_seq() == 0
    once = client.get(path.split("?")[0] + "?" + path.split("&")[1], headers=harness.auth(token))
    assert once.status_code == 200, once.text


def test_a_body_of_json_white_space_alone_is_empty(client: Any, harness: Harness) -> None:
    """An empty body is an empty object; `\\f` and `\\v` are not JSON's white space, yet
    a body of them alone was read as `{}` too, and made an identity."""
    keys = harness.service.store.page("secrets", 0, 10)
    for junk in (b"\x0c", b"\x0b", b" \x0b\n"):
        response = client.post("/v1/identities", content=junk, headers=harness.auth())
        assert code_of(response) == (400, "malformed-json"), response.text
    assert harness.service.store.page("secrets", 0, 10) == keys
    made = client.post("/v1/identities", content=b" \t\r\n", headers=harness.auth())
    assert made.status_code == 201, made.text


def test_policy_text_in_another_charset_is_refused(client: Any, harness: Harness) -> None:
    """The text is read as UTF-8: a `charset=iso-8859-1` body whose bytes are also UTF-8
    (`Ã©`, two characters in Latin-1) was stored as other text (`é`) than was sent."""
    text = 'role r {\n  allow mail.send where args.to endswith "@Ã©.test"\n}\n'
    for charset in ("iso-8859-1", '"latin1"', "windows-1252", "utf-16"):
        headers = {**harness.auth(), "content-type": f"text/plain; charset={charset}"}
        response = client.put("/v1/policy", content=text.encode("latin-1"), headers=headers)
        assert code_of(response) == (415, "unsupported-charset"), response.text
    assert harness.service.store.latest_revision() == 1
    for kind in ("text/plain; charset=UTF-8", 'text/plain;charset="utf-8"', "text/plain",
                 "application/json; charset=latin-1"):  # (JSON is UTF-8: RFC 8259)  # fmt: skip
        body = POLICY.encode()
        if kind.startswith("application/json"):
            body = json.dumps({"files": [{"path": "p.charter", "text": POLICY}]}).encode()
        response = client.put(
            "/v1/policy", content=body, headers={**harness.auth(), "content-type": kind}
        )
        assert response.status_code == 201, (kind, response.text)


def test_a_content_length_with_zeros_ahead_is_its_number(harness: Harness) -> None:
    """`Content-Length: 0000000000000000002` (HTTP allows the zeros; uvicorn passes them
    on) was a 413 `body-too-large` for a body of two bytes; so many digits past them
    that the length is over 18 digits is still a 413, and never a 500."""
    app = create_app(harness.service)
    whole = [{"type": "http.request", "body": b"{}", "more_body": False}]
    for length, status in (("0" * 18 + "2", 201), ("0" * 5000 + "2", 201),
                           ("0" * 17 + "1" + "0" * 18, 413), ("9" * 5000, 413)):  # fmt: skip
        sent = asgi(app, harness, "/v1/identities", messages=whole,
                    more=((b"content-length", length.encode()),))  # fmt: skip
        assert sent[0]["status"] == status, (length[-20:], sent)
    assert harness.service.metrics.rejected == {(413, "body-too-large"): 2}


@pytest.mark.parametrize("field", ["thread", "turn", "connection"])
def test_an_id_a_call_names_is_bounded_like_the_others(
    client: Any, harness: Harness, field: str
) -> None:
    """A megabyte `thread` was looked up and echoed back whole in its 404; now it is the
    body's 422, on one call and in a batch alike, and a turn's thread too."""
    call = {"agent": "a1", "tool": "mail.send", "args": {}, field: "t" * 300}
    for path, body in (("/v1/decisions", call), ("/v1/decisions/batch", {"calls": [call]})):
        response = client.post(path, json=body, headers=harness.auth())
        assert code_of(response) == (422, "invalid-body"), response.text
        assert len(response.text) < 2000
    turn = client.post("/v1/turns", json={"agent": "a1", "thread": ""}, headers=harness.auth())
    assert code_of(turn) == (422, "invalid-body")
    assert harness.service.store.last_seq() == 0
