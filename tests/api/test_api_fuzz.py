"""A fuzz of the HTTP API from its own `/openapi.json`: never a 500, and a refused request
writes nothing.

Every operation of the document is sent requests drawn from its schema (tests/api/
fuzzschema.py: valid bodies, then perturbed ones, odd query parameters and `If-Match`
headers, path ids that exist and ones that do not) with the admin token, the decide
token, agents' tokens (whose management requests are decided as built-in tool calls
under profiles that allow, deny and pause them), a bad token and none. Each answer must
be under 500 (a busy store's 503 with Retry-After aside), a refusal problem+json with a
code of api/http/codes.py given with its status, and the database must hold what it held
before, but for what docs/http.md says a refusal writes: the logged decision of an
agent's `denied-by-policy`; a 202 pause logs its decision and opens its approval, and a
read writes nothing but an agent's logged decision (tests/api/fuzzworld.py, `check`).

In process (TestClient, `raise_server_exceptions=False`) for speed, a third of the
requests to a second service on the same file (another worker's, whose caches lag), and
a smaller run over uvicorn. `HYPOTHESIS_PROFILE=long` (`make fuzz`) draws many more of each.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from api.http.app import TABLE
from api.http.openapi import models_of, openapi
from api.service import pages
from tests.api.conftest import LiveServer
from tests.api.fuzzschema import (
    AGENTS,
    BYTES,
    LONG_COMMENT,
    POLICY_TEXT,
    ROLE,
    Operation,
    Ref,
    encode,
    operations,
    perturb,
    valid,
)
from tests.api.fuzzworld import World, check

SERVED = operations(openapi(TABLE))  # what `/openapi.json` serves (checked below)
# The approvals' event stream answers for as long as it is read, and the in-process client
# reads a body to its end: tests/api/test_approval_waits.py reads it on a live server.
STREAMS = {("GET", "/v1/approvals/events")}
OPS = [op for op in SERVED if (op.method, op.path) not in STREAMS]
MODELS: dict[str, type[BaseModel]] = {model.__name__: model for model in models_of(TABLE)}
EXAMPLES = settings().max_examples  # the profile's: 30 `fast`, 20,000 `long`
# Requests: `fast` sends about 500, `long` about 45,000 (each ~10 ms with its
# fingerprints; a world is rebuilt every REBUILD_EVERY requests and when its core moved).
PER_OPERATION = max(5, EXAMPLES // 40)
SEQUENCES = max(60, EXAMPLES // 4)  # (of 1 to 4 requests)
LIVE = max(15, EXAMPLES // 40)
QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

# Ids a path may name: the world's (Ref), declared names, and ones that are nowhere.
JUNK_IDS = ("ghost", "x" * 300, "\x00", "\u202e", "a/b", " ", "%", "é", "..", "0")
PATHS: dict[str, tuple[Any, ...]] = {
    "/v1/agents/": (*(Ref(a) for a in AGENTS), Ref("last-agent")),
    "/v1/identities/": (Ref("identity"), Ref("identity2"), Ref("last-identity")),
    "/v1/threads/": (Ref("thread"), Ref("last-thread")),
    "/v1/connections/": (Ref("connection"), Ref("connection2"), Ref("last-connection")),
    "/v1/approvals/": (Ref("approval"), Ref("approval-management"), Ref("last-pause")),
    "/v1/roles/": ("fz", "mailer", "Fz"),
    "/v1/profiles/": ("support", "reviewed"),
    "/v1/hooks/": ("approve-big", "approve-role-create"),
    "/v1/toolsets/": ("mail", "vault"),
    "/v1/tokens/": (Ref("spare-token"),),
    "/v1/revisions/": ("1", "2", "999", "0", "-1", "9" * 19),
}
LISTED = ("agents", "secrets", "threads", "connections", "approvals", "revisions", "roles")


def _b64(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


# Cursors as the service writes them, of every list, at positions and revisions that are
# there and not, and objects it never writes (api.service.pages).
FORGED = (
    *(pages.encode(kind, after) for kind in LISTED for after in (0, 1, 2**63 - 1)),
    *(pages.encode(kind, 0, revision) for kind in ("roles", "hooks") for revision in (1, 999)),
    pages.encode("threads", 0, listed="a1"), pages.encode("approvals", 0, listed="pending"),
    *(_b64({"k": "agents", "a": a}) for a in (-1, 1.5, True, "1", None, 2**64, [1])),
    _b64({"k": "roles", "a": 0, "r": 0}), _b64([]), _b64("agents"), _b64({"k": ["agents"]}),
    base64.urlsafe_b64encode(b"\xff\xfe").decode(),
)  # fmt: skip
QUERY: dict[str, tuple[Any, ...]] = {
    "cursor": (Ref("cursor"), *FORGED, "garbage", "", "A" * 300, "%%", "YWdlbnRz", "a=="),
    "limit": ("0", "1", "2", "200", "201", "9" * 18, "9" * 19, "-1", "1.5", "1e2", "²", "１",
              " 1", ""),
    "after_seq": ("0", "1", "3", "-1", "9" * 18, "9" * 19, "x", "٣", ""),
    "revision": ("0", "1", "2", "999", "-1", "9" * 19, "1.0", ""),
    "against": ("0", "1", "2", "999", "-1", "9" * 19, "1.0", ""),
    "status": ("pending", "approved", "rejected", "bogus", "", "PENDING"),
    "agent": (*(Ref(a) for a in AGENTS), "ghost", ""),
    # (the filters of GET /v1/decisions)
    "tool": ("mail.send", "mail.*", "*", "", "t" * 257, "ü"),
    "effect": ("allow", "deny", "pause", "", "maybe", "ALLOW"),
    "since": ("0", "1764806400000", "9" * 18, "9" * 19, "-1", "x", ""),
    "until": ("0", "1764806400000", "9" * 19, "1.5", ""),
    "remove_in_use": ("true", "false", "", "True", "1", "yes"),
    "receipt": ("true", "false", "", "True", "1", "yes"),
    # (a memory entry's, or a list's prefix)
    "path": ("/notes", "/notes/a", "/", "", "x", "/a//b", "/a/", "/" + "p" * 300, "/\x01"),
    # (no wait of a second or more: a pending approval's answer would take that long)
    "wait": ("0", "", "61", "-1", "x", "1.5", "１", "9" * 19),
}  # fmt: skip
IF_MATCH = ("*", Ref("etag"), '"' + "0" * 32 + '"', 'W/"x"', '"a", "b"', "abc", "", b'"\xe9"')
IF_MATCH_POLICY = ("*", Ref("revision"), '"1"', '"0"', '"' + "9" * 20 + '"', 'W/"1"', "1")
# Who sends it (a bad token and none, now and then: a 401 before anything is read).
PRINCIPALS = {
    "none": ("nobody",),
    "admin": ("admin", "admin", "admin", "decide", "a1"),
    "decide": ("admin", "decide", "a1", "n1", "t1", "minted"),
    "manage": ("admin", "admin", "a1", "a1", "n1", "c1", "r1", "t1", "t1", "decide", "minted"),
}
METHODS = ("HEAD", "OPTIONS", "TRACE", "GET", "POST", "PUT", "PATCH", "DELETE")
TEXT_TYPES = ("text/plain", "text/plain; charset=utf-8", "text/plain; charset=latin-1", None)


def _path_value(data: st.DataObject, op: Operation, principal: str) -> Any:
    pool = next((v for k, v in PATHS.items() if op.path.startswith(k)), ())
    if op.path.startswith("/v1/agents/") and principal in AGENTS:
        pool = (Ref(principal),) * 3 + pool  # (an agent acts on itself most)
    return data.draw(st.sampled_from((*pool, *pool, *JUNK_IDS)), label="path id")


def _fitted(data: st.DataObject, body: Any, principal: str) -> Any:
    """A valid body made likelier to pass the operation's own checks: the caller's own
    agent named, a role's source declaring the role it is sent as."""
    if not isinstance(body, dict):
        return body
    if principal in AGENTS and "agent" in body and data.draw(st.booleans(), label="own agent"):
        body = {**body, "agent": Ref(principal)}
    if isinstance(body.get("name"), str) and "source" in body and data.draw(st.booleans()):
        source = ROLE.format(n="").replace("fz", body["name"], 1)
        long = data.draw(st.booleans(), label="long")  # (toward the world's policy cap)
        body = {**body, "source": source + LONG_COMMENT * long}
    return body


def _body(data: st.DataObject, op: Operation, principal: str) -> tuple[Any, str | None]:
    """The body and its content type (None: no header)."""
    if op.text and data.draw(st.booleans(), label="as text"):
        text = data.draw(st.sampled_from([POLICY_TEXT, "role {", "", b"role a {}\xff", "\x00"]))
        kind = data.draw(st.sampled_from(TEXT_TYPES), label="content-type")
        return (text.encode() if isinstance(text, str) else text), kind
    kind = data.draw(st.sampled_from(
        ["application/json"] * 6 + [None, "text/plain", "application/json; charset=utf-16"]
    ), label="content-type")  # fmt: skip
    if op.body is None:  # a body where none is read: ignored
        return data.draw(st.sampled_from([None, None, b"{}", b"junk"])), kind
    shape = data.draw(st.sampled_from(["valid"] * 4 + ["perturbed"] * 4 + ["bytes"]))
    if shape == "bytes":
        return data.draw(st.sampled_from(BYTES)), kind
    body = _fitted(data, data.draw(valid(op.body), label="valid body"), principal)
    return (body if shape == "valid" else perturb(data, op.body, body)), kind


def requests(data: st.DataObject, op: Operation) -> dict[str, Any]:
    """A request for `op` (World.prepare makes it concrete)."""
    principal = data.draw(st.sampled_from(PRINCIPALS[op.auth]), label="principal")
    if data.draw(st.sampled_from([False] * 19 + [True]), label="unauthenticated"):
        principal = data.draw(st.sampled_from(["bogus", "nobody"]))
    query = []
    for name in op.query:
        if data.draw(st.booleans(), label=f"send {name}"):
            value = data.draw(st.sampled_from(QUERY[name]), label=name)
            query += [(name, value)] * data.draw(st.sampled_from([1, 1, 1, 2]), label="times")
    foreign = sorted(set(QUERY) - set(op.query))
    if data.draw(st.sampled_from([False] * 9 + [True]), label="foreign"):  # ignored
        name = data.draw(st.sampled_from(foreign), label="foreign")
        query.append((name, data.draw(st.sampled_from(QUERY[name]), label=name)))
    if_match = None
    if op.if_match and data.draw(st.booleans(), label="If-Match"):
        tags = IF_MATCH_POLICY if op.path == "/v1/policy" else IF_MATCH
        if_match = data.draw(st.sampled_from(tags), label="If-Match")
    params = {
        p.strip("{}"): _path_value(data, op, principal) for p in op.path.split("/") if "{" in p
    }
    body, kind = _body(data, op, principal)
    method = op.method
    if data.draw(st.sampled_from([False] * 19 + [True]), label="another method"):
        method = data.draw(st.sampled_from(METHODS), label="method")
    return {
        "principal": principal,
        "method": method, "path": op.path, "params": params, "query": query,
        "if_match": if_match, "body": body, "content_type": kind,
        "ascii": data.draw(st.sampled_from([True, True, True, False]), label="ascii"),
        "chunked": data.draw(st.sampled_from([False] * 4 + [True]), label="chunked"),
        "other": data.draw(st.sampled_from([False, False, True]), label="other worker"),
    }  # fmt: skip


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    made = World()
    yield made
    made.destroy()


def exchange(world: World, request: dict[str, Any], client: Any = None) -> httpx.Response:
    """Send `request`, checking what it answered and what it wrote."""
    sent = world.prepare(request)
    note(str(sent))
    before = world.fingerprint()
    response = world.send(sent, client)
    after = world.fingerprint()
    check(sent, response, before, after, world.is_agent(sent.principal))
    world.remember(sent, response)
    return response


def run_one(world: World, data: st.DataObject, ops: list[Operation], most: int = 1) -> list[int]:
    """Up to `most` requests, one after another (a create, then what names what it made),
    on what the ones before left; then the world healed for the next example."""
    try:
        return [
            exchange(
                world, requests(data, data.draw(st.sampled_from(ops), label="operation"))
            ).status_code
            for _ in range(data.draw(st.integers(1, most), label="requests"))
        ]
    finally:
        world.heal()


def test_the_fuzz_walks_the_served_document(world: World) -> None:
    """The operations fuzzed are those `/openapi.json` serves: every route of the app."""
    served = world.client.get("/openapi.json").json()
    assert operations(served) == SERVED
    routes = {(s.method, s.path) for s, _ in TABLE}
    assert {(op.method, op.path) for op in OPS} | STREAMS == routes
    assert sum(op.body is not None for op in OPS) >= 17
    assert {op.auth for op in OPS} == set(PRINCIPALS)


@settings(max_examples=EXAMPLES, suppress_health_check=QUIET)
@given(st.data())
def test_valid_bodies_pass_the_schema(data: st.DataObject) -> None:
    """The generator's valid bodies are valid for the models too (so the fuzz reaches the
    operations behind the schema), and each perturbation still encodes."""
    op = data.draw(st.sampled_from([op for op in OPS if op.body is not None]))
    assert op.body is not None
    body = data.draw(valid(op.body))
    MODELS[op.body["title"]].model_validate_json(encode(body, lambda ref: "x"))
    assert isinstance(encode(perturb(data, op.body, body), lambda ref: "x"), bytes)


@pytest.mark.parametrize("op", OPS, ids=str)
def test_no_500_and_a_refusal_writes_nothing(world: World, op: Operation) -> None:
    @settings(max_examples=PER_OPERATION, suppress_health_check=QUIET)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        run_one(world, data, [op])

    run()


def test_sequences_of_requests(world: World) -> None:
    """Requests one after another, the same checks on each, on whatever the ones before
    left (an agent deleted, an identity gone, a role created, a token issued)."""
    statuses: list[int] = []

    @settings(max_examples=SEQUENCES, suppress_health_check=QUIET)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        statuses.extend(run_one(world, data, OPS, most=4))

    run()
    assert min(statuses) < 300 and max(statuses) >= 400  # (it reached both)


def test_over_a_live_server(world: World) -> None:
    """Fewer requests, over uvicorn: the same answers on a real socket."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await world.app(scope, receive, send)  # (the world's app now: heal may build anew)

    with (
        LiveServer(app) as url,
        httpx.Client(base_url=url, timeout=30) as live,
    ):

        @settings(max_examples=LIVE, suppress_health_check=QUIET)
        @given(st.data())
        def run(data: st.DataObject) -> None:
            op = data.draw(st.sampled_from(OPS), label="operation")
            try:
                exchange(world, requests(data, op), live)
            finally:
                world.heal()

        run()
