"""`/openapi.json` describes every route: an operation for each, its success answer's
schema, the 202 of a paused management request, a problem+json schema for each refusal
status it gives, and `PUT /v1/policy`'s text body. A live server's answers, to a sample
of requests that reaches every operation, read as the schemas the document names (the
pydantic models it was generated from, no field left undescribed), and every status
they come with is one the operation lists."""

from __future__ import annotations

import re
from collections.abc import Iterator
from importlib.metadata import version
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from starlette.routing import Route

from api import records as r
from api.http import answers as a
from api.http.app import TABLE, create_app
from api.http.console import routes as routes_of_console
from api.http.openapi import models_of, openapi
from policy import bundles
from tests.api.conftest import POLICY, REVIEWED, Harness

MODELS: dict[str, type[BaseModel]] = {model.__name__: model for model in models_of(TABLE)}
# The operations whose answers the document left out before.
ONCE_MISSING = [
    ("get", "/v1/agents/{id}/tools"), ("post", "/v1/fit"), ("post", "/v1/threads"),
    ("get", "/v1/threads/{id}"), ("patch", "/v1/threads/{id}"), ("post", "/v1/connections"),
    ("get", "/v1/connections/{id}"), ("patch", "/v1/connections/{id}"), ("post", "/v1/roles"),
    ("get", "/v1/roles/{name}"), ("patch", "/v1/roles/{name}"), ("get", "/v1/profiles/{name}"),
    ("get", "/v1/hooks/{name}"), ("get", "/v1/toolsets/{name}"), ("get", "/v1/approvals/{id}"),
    ("post", "/v1/approvals/{id}/approve"), ("post", "/v1/approvals/{id}/reject"),
    ("post", "/v1/tokens"), ("get", "/healthz"), ("get", "/readyz"), ("put", "/v1/policy"),
]  # fmt: skip

# A profile, hook and toolset made through the API, and a change of each.
MADE: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "profiles": ({"name": "extra-p", "roles": ["mailer"]}, {"hooks": ["none"]}),
    "hooks": (
        {"name": "extra-h", "source": "hook extra-h on mail.send {\n  pause\n}\n"},
        {"source": "hook extra-h on mail.send {\n  deny\n}\n"},
    ),
    "toolsets": (
        {"name": "extra-t", "source": "toolset extra-t {\n  tool ping(x: str)\n}\n"},
        {"url": "https://tools.example.com/t"},
    ),
}


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return openapi(TABLE)  # (what `/openapi.json` serves: the live test checks that too)


def _resolve(spec: dict[str, Any], node: Any) -> Iterator[str]:
    """Every `$ref` in `node`."""
    if isinstance(node, dict):
        if "$ref" in node:
            yield node["$ref"]
        for value in node.values():
            yield from _resolve(spec, value)
    elif isinstance(node, list):
        for value in node:
            yield from _resolve(spec, value)


def test_every_route_has_an_operation_with_its_answers(
    spec: dict[str, Any], harness: Harness
) -> None:
    # (the console's page and session, api/http/console.py, are no operations of the API)
    console = {r.path for r in routes_of_console() if isinstance(r, Route)}
    routes = [
        r for r in create_app(harness.service).routes
        if isinstance(r, Route) and r.path not in console
    ]  # fmt: skip
    assert len(routes) == len(TABLE) > 40
    for route in routes:
        for method in sorted((route.methods or set()) - {"HEAD"}):
            op = spec["paths"].get(route.path, {}).get(method.lower())
            assert op is not None, f"{method} {route.path} has no operation"
            where = f"{method} {route.path}"
            successes = {k: v for k, v in op["responses"].items() if k.startswith("2")}
            assert successes, where
            for status, answer in successes.items():
                if status == "204":
                    assert "content" not in answer, where
                else:
                    (media,) = answer["content"].values()
                    assert media["schema"], where
            problems = {k for k, v in op["responses"].items() if "application/problem+json"
                        in v.get("content", {})}  # fmt: skip
            if op["x-charter-auth"] != "none":
                assert {"401", "403", "503"} <= problems, where
            if "requestBody" in op:
                assert {"400", "413", "422"} <= problems, where
            if "{" in route.path:
                assert "404" in problems, where
            if op["x-charter-auth"] == "manage":
                assert op["responses"]["202"]["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/Pending"
                }, where
    for method, path in ONCE_MISSING:
        answer = spec["paths"][path][method]["responses"]
        status = min(k for k in answer if k.startswith("2"))
        assert "$ref" in answer[status]["content"]["application/json"]["schema"], (method, path)
    for ref in _resolve(spec, spec):
        assert ref.rsplit("/", 1)[1] in spec["components"]["schemas"], ref


VERBS = ("list", "get", "create", "update", "delete", "import", "decide", "read", "check",
         "admit", "upload", "approve", "reject", "issue", "revoke", "rotate", "verify", "define", "run", "report",
         "write", "wait", "publish", "explain")  # fmt: skip


def test_operations_are_named_and_grouped_for_generators(spec: dict[str, Any]) -> None:
    """What a client generator names and groups its calls by: each operation's id, a verb
    phrase in camel case, once in the document; each its one tag, a declared one; the
    document's version the package's."""
    ops = [op for path in spec["paths"].values() for op in path.values()]
    ids = [op["operationId"] for op in ops]
    assert len(set(ids)) == len(ids) == len(TABLE)
    assert all(re.fullmatch(r"[a-z]+([A-Z][a-z]+)*", i) and i.startswith(VERBS) for i in ids)
    assert {"decide", "decideBatch", "listAgentTools", "listAgents", "getAgent", "approve"} <= set(
        ids
    )
    declared = [tag["name"] for tag in spec["tags"]]
    assert all(tag["description"] for tag in spec["tags"])
    assert all(len(op["tags"]) == 1 and op["tags"][0] in declared for op in ops)
    assert {op["tags"][0] for op in ops} == set(declared)  # (no tag left empty)
    assert spec["info"]["version"] == version("charter") != ""


def test_a_policy_upload_may_be_text(spec: dict[str, Any]) -> None:
    body = spec["paths"]["/v1/policy"]["put"]["requestBody"]
    assert body["content"]["text/plain"]["schema"] == {"type": "string"}
    assert body["content"]["application/json"]["schema"]["$ref"].endswith("/PolicyUpload")
    # a body whose fields are all optional may be left out; one with a required field not
    reject = spec["paths"]["/v1/approvals/{id}/reject"]["post"]["requestBody"]
    assert reject["required"] is False
    assert spec["paths"]["/v1/agents"]["post"]["requestBody"]["required"] is True


class Checker:
    """Sends requests to the live server and checks each answer against the operation
    `(method, template)` of the document: its status listed, its body its schema."""

    def __init__(self, live: httpx.Client, spec: dict[str, Any]) -> None:
        self.live = live
        self.spec = spec
        self.seen: set[tuple[str, str, int]] = set()

    def __call__(
        self, method: str, template: str, path: str | None = None, status: int | None = None,
        **kwargs: Any,
    ) -> Any:  # fmt: skip
        response = self.live.request(method, path or template, **kwargs)
        where = f"{method} {path or template} -> {response.status_code}: {response.text[:300]}"
        if status is not None:
            assert response.status_code == status, where
        op = self.spec["paths"][template][method.lower()]
        answer = op["responses"].get(str(response.status_code))
        assert answer is not None, f"the operation does not list the status: {where}"
        self.seen.add((method.lower(), template, response.status_code))
        for header in answer.get("headers", {}):  # (an `ETag`, a 401's `WWW-Authenticate`, ...)
            assert header.lower() in response.headers, f"no `{header}`: {where}"
        if response.status_code == 204:
            assert response.content == b"" and "content" not in answer, where
            return None
        media = response.headers["content-type"].split(";")[0]
        schema = answer["content"][media]["schema"]
        if "$ref" not in schema:
            assert schema["type"] == ("string" if media.startswith("text/") else "object")
            return response.text if media.startswith("text/") else response.json()
        model = MODELS[schema["$ref"].rsplit("/", 1)[1]]
        # Every field described (a problem may add its own: `fit`, `violation`, ...)
        model.model_validate(response.json(), extra=None if model is a.Problem else "forbid")
        return response.json()

    def stream(self, template: str, **kwargs: Any) -> str:
        """`GET` an event stream: its status and media type listed; its first line."""
        with self.live.stream("GET", template, **kwargs) as response:
            answer = self.spec["paths"][template]["get"]["responses"].get(str(response.status_code))
            assert answer is not None, f"{template} -> {response.status_code}"
            media = response.headers["content-type"].split(";")[0]
            assert media in answer["content"], media
            first = next(response.iter_lines())
        self.seen.add(("get", template, response.status_code))
        return first


def test_live_answers_read_as_their_schemas(
    live: httpx.Client, harness: Harness, spec: dict[str, Any]
) -> None:
    check = Checker(live, spec)
    admin = harness.auth()
    decide = harness.auth(harness.decide)
    agent = harness.auth(harness.agent_token)
    text = {**admin, "content-type": "text/plain"}
    # ---- operations and the policy
    check("GET", "/healthz", status=200)
    check("GET", "/readyz", status=200)
    check("GET", "/metrics", status=200)
    assert check("GET", "/openapi.json", status=200) == spec
    check("PUT", "/v1/policy", content=POLICY + REVIEWED, headers=text, status=201)
    check("PUT", "/v1/policy", json={"files": [{"path": "p.charter", "text": POLICY + REVIEWED}],
                                     "note": "json"}, headers=admin, status=201)  # fmt: skip
    check("PUT", "/v1/policy", content="role r {", headers=text, status=422)
    # a bundle (unsigned: this server trusts no key, and checks its files against its manifest)
    manifest = {
        "format": bundles.FORMAT,
        "revision": "v3",
        "files": [{"path": "p.charter", "sha256": bundles.digest(POLICY + REVIEWED)}],
    }
    bundle = {"manifest": manifest, "files": [{"path": "p.charter", "text": POLICY + REVIEWED}]}
    check("PUT", "/v1/policy/bundle", json=bundle, headers=admin, status=201)
    check("PUT", "/v1/policy/bundle", json={**bundle, "files": [{"path": "p.charter",
          "text": POLICY}]}, headers=admin, status=422)  # fmt: skip
    check("GET", "/v1/policy", "/v1/policy?revision=2", headers=admin, status=200)
    check("GET", "/v1/policy", "/v1/policy?revision=99", headers=admin, status=404)
    check("GET", "/v1/revisions", headers=admin, status=200)
    check("GET", "/v1/revisions/{n}/diff", "/v1/revisions/2/diff", headers=admin, status=200)
    check("GET", "/v1/revisions/{n}/diff", "/v1/revisions/99/diff", headers=admin, status=404)
    # ---- resources
    ident = check("POST", "/v1/identities", json={"label": "l"}, headers=admin, status=201)
    identity = f"/v1/identities/{ident['id']}"
    check("GET", "/v1/identities", headers=admin, status=200)
    check("GET", "/v1/identities/{id}", identity, headers=admin, status=200)
    check("PATCH", "/v1/identities/{id}", identity, json={"metadata": {"tier": 2}},
          headers=admin, status=200)  # fmt: skip
    seed = {"seed": "11" * 32}
    check("POST", "/v1/identities/import", json=seed, headers=admin, status=201)
    check("POST", "/v1/identities/import", json=seed, headers=admin, status=409)
    made = check("POST", "/v1/agents", json={"name": "n1", "profile": "narrow",
                 "identity": harness.identity, "budget": {"amount": "5", "period": "7d"}},
                 headers=admin, status=201)  # fmt: skip
    child = f"/v1/agents/{made['id']}"
    check("GET", "/v1/agents", headers=admin, status=200)
    check("GET", "/v1/agents/{id}", child, headers=admin, status=200)
    stale = {**admin, "if-match": '"0"'}
    check("PATCH", "/v1/agents/{id}", child, json={"status": "idle"}, headers=stale, status=412)
    check("DELETE", "/v1/agents/{id}", child, headers=stale, status=412)
    check("PATCH", "/v1/agents/{id}", child, json={"status": "running"}, headers=admin,
          status=200)  # fmt: skip
    seed_def = {"name": "s", "systemPrompt": "p", "modelProvider": "openai", "model": "gpt-5",
                "tools": ["search"], "signingKey": ident["secret_name"]}  # fmt: skip
    defined = "/v1/agents/{id}/definition"
    check("PUT", defined, "/v1/agents/s1/definition", json={"profile": "narrow",
          "definition": seed_def}, headers=admin, status=201)  # fmt: skip
    check("PUT", defined, "/v1/agents/s1/definition", json={"definition": {**seed_def,
          "tools": ["x" * 129]}}, headers=admin, status=400)  # fmt: skip
    check("PUT", defined, "/v1/agents/s1/definition", json={"definition": seed_def},
          headers=admin, status=200)  # fmt: skip
    check("GET", defined, "/v1/agents/s1/definition", headers=admin, status=200)
    check("GET", defined, child + "/definition", headers=admin, status=404)
    thread = check("POST", "/v1/threads", json={"agent": "a1", "max_cost": "2.5"}, headers=admin,
                   status=201)  # fmt: skip
    in_thread = f"/v1/threads/{thread['id']}"
    check("GET", "/v1/threads", "/v1/threads?agent=a1", headers=admin, status=200)
    check("GET", "/v1/threads/{id}", in_thread, headers=admin, status=200)
    check("PATCH", "/v1/threads/{id}", in_thread, json={"status": "done"}, headers=admin,
          status=200)  # fmt: skip
    conn = check("POST", "/v1/connections", json={"name": "c", "toolset": "vault",
                 "credential": "s3cret"}, headers=admin, status=201)  # fmt: skip
    connection = f"/v1/connections/{conn['id']}"
    check("GET", "/v1/connections", headers=admin, status=200)
    check("GET", "/v1/connections/{id}", connection, headers=admin, status=200)
    check("PATCH", "/v1/connections/{id}", connection, json={"name": "d"}, headers=admin,
          status=200)  # fmt: skip
    role = {"name": "extra", "source": "role extra {\n  allow mail.send\n}\n"}
    check("POST", "/v1/roles", json=role, headers=admin, status=201)
    check("POST", "/v1/roles", json=role, headers=admin, status=409)
    check("GET", "/v1/roles", headers=admin, status=200)
    check("GET", "/v1/roles/{name}", "/v1/roles/extra", headers=admin, status=200)
    check("PATCH", "/v1/roles/{name}", "/v1/roles/extra", json={"source": role["source"]},
          headers=admin, status=200)  # fmt: skip
    for kind in ("profiles", "hooks", "toolsets"):
        check("GET", f"/v1/{kind}", "/v1/" + kind + "?limit=1", headers=admin, status=200)
        check("GET", f"/v1/{kind}/{{name}}", f"/v1/{kind}/nope", headers=admin, status=404)
    # (those made through the API answer with their `ETag`)
    for kind, (body, change) in MADE.items():
        item = f"/v1/{kind}/{{name}}"
        check("POST", f"/v1/{kind}", json=body, headers=admin, status=201)
        check("POST", f"/v1/{kind}", json=body, headers=admin, status=409)
        check("GET", item, f"/v1/{kind}/{body['name']}", headers=admin, status=200)
        check("PATCH", item, f"/v1/{kind}/{body['name']}", json=change, headers=admin, status=200)
    # ---- decisions, the log, listing, fit, turns
    mail = {"agent": "a1", "tool": "mail.send",
            "args": {"to": "b@example.com", "subject": "s", "body": "b"}}  # fmt: skip
    sent = check("POST", "/v1/decisions", json=mail, headers=decide, status=200)
    check("POST", "/v1/decisions", json={**mail, "agent": "nope"}, headers=decide, status=404)
    cost = {"seq": sent["seq"], "amount": "0.12"}
    charge = f"/v1/decisions/{sent['id']}/cost"
    check("POST", "/v1/decisions/{id}/cost", charge, json=cost, headers=decide, status=201)
    check("POST", "/v1/decisions/{id}/cost", charge, json=cost, headers=decide, status=409)
    check("POST", "/v1/decisions/batch", json={"calls": [mail, mail]}, headers=decide, status=200)
    check("GET", "/v1/decisions", "/v1/decisions?after_seq=0&limit=10", headers=admin, status=200)
    explain = f"/v1/log/{sent['seq']}/explain"
    check("GET", "/v1/log/{seq}/explain", explain, headers=admin, status=200)
    check("GET", "/v1/log/{seq}/explain", "/v1/log/0/explain", headers=admin, status=404)
    check("POST", "/v1/decisions", "/v1/decisions?receipt=true", json=mail, headers=decide,
          status=200)  # fmt: skip
    check("POST", "/v1/decisions", "/v1/decisions?receipt=yes", json=mail, headers=decide,
          status=400)  # fmt: skip
    # ---- the server's keys and the log's verification
    check("GET", "/v1/keys", status=200)
    check("POST", "/v1/keys/rotate", headers=admin, status=200)
    check("GET", "/v1/log/verify", headers=admin, status=200)
    check("GET", "/v1/agents/{id}/tools", "/v1/agents/a1/tools", headers=decide, status=200)
    check("POST", "/v1/fit", json={"agent": "a1", "profile": "narrow"}, headers=decide,
          status=200)  # fmt: skip
    wider = {"agent": made["id"], "kind": "role", "source": "role r {\n  allow billing.refund\n}"}
    fit = check("POST", "/v1/fit", json=wider, headers=decide, status=200)
    assert not fit["fits"] and fit["violations"][0]["counterexample"]
    check("POST", "/v1/turns", json={"agent": "a1"}, headers=decide, status=201)
    # ---- drafts: the policy playground
    draft = {"files": [{"path": "d.charter", "text": POLICY}]}
    check("POST", "/v1/drafts/check", json=draft, headers=admin, status=200)
    check("POST", "/v1/drafts/decide", json={**draft, "profile": "support", **{
        k: mail[k] for k in ("tool", "args")}}, headers=admin, status=200)  # fmt: skip
    check("POST", "/v1/drafts/test", json={**draft, "coverage": True}, headers=admin, status=200)
    check("POST", "/v1/drafts/fit", json={**draft, "caller_profile": "support",
          "role": "mailer"}, headers=admin, status=200)  # fmt: skip
    check("POST", "/v1/drafts/fit", json={**draft, "caller_profile": "support",
          "role": "nope"}, headers=admin, status=404)  # fmt: skip
    # ---- approvals: a refund over 50 pauses; an agent's own update (REVIEWED) is a 202
    refund = {"agent": "a1", "tool": "billing.refund", "args": {"amount": 60}}
    paused = [check("POST", "/v1/decisions", json=refund, headers=decide, status=200)
              for _ in range(2)]  # fmt: skip
    first, second = (f"/v1/approvals/{p['approval_id']}" for p in paused)
    check("GET", "/v1/approvals", "/v1/approvals?status=pending", headers=admin, status=200)
    check("GET", "/v1/approvals/{id}", first, headers=admin, status=200)
    check("POST", "/v1/approvals/{id}/approve", first + "/approve", headers=admin, status=200)
    check("GET", "/v1/approvals/{id}", first + "?wait=5", headers=admin, status=200)
    assert check.stream("/v1/approvals/events", headers=admin).startswith("retry: ")
    # ---- AuthZEN
    access = {"subject": {"type": "agent", "id": "a1"}, "resource": {"type": "billing"},
              "action": {"name": "refund"}, "context": {"args": {"amount": 1}}}  # fmt: skip
    check("POST", "/access/v1/evaluation", json=access, headers=decide, status=200)
    check("POST", "/access/v1/evaluations", json={"evaluations": [access]}, headers=decide,
          status=200)  # fmt: skip
    check("POST", "/access/v1/evaluation", json={}, headers=decide, status=400)
    check("POST", "/access/v1/search/action", json={k: access[k] for k in ("subject", "resource")},
          headers=decide, status=200)  # fmt: skip
    check("GET", "/.well-known/authzen-configuration", status=200)
    check("POST", "/v1/approvals/{id}/approve", first + "/approve", headers=admin, status=409)
    check("POST", "/v1/approvals/{id}/reject", second + "/reject", json={"reason": "no"},
          headers=admin, status=200)  # fmt: skip
    harness.add_agent("rev", "reviewed")
    rev = harness.auth(harness.token_for("rev"))
    pending = check("PATCH", "/v1/agents/{id}", "/v1/agents/rev", json={"status": "running"},
                    headers=rev, status=202)  # fmt: skip
    approved = check(
        "POST",
        "/v1/approvals/{id}/approve",
        f"/v1/approvals/{pending['approval_id']}/approve",
        headers=admin,
        status=200,
    )
    r.Agent.model_validate(approved["result"], extra="forbid")  # (the update, run)
    check("GET", "/v1/agents", headers=agent, status=200)  # (decided: the manager role allows)
    # ---- tokens and deletions
    token = check("POST", "/v1/tokens", json={"scope": "agent", "agent": "a1"}, headers=admin,
                  status=201)  # fmt: skip
    check("POST", "/v1/tokens", json={"scope": "agent", "agent": "nope"}, headers=admin,
          status=404)  # fmt: skip
    check("GET", "/v1/tokens", "/v1/tokens?limit=2", headers=admin, status=200)
    check("GET", "/v1/agents/{id}/spending", "/v1/agents/a1/spending", headers=admin,
          status=200)  # fmt: skip
    check("GET", "/v1/threads/{id}/spending", f"{in_thread}/spending", headers=admin,
          status=200)  # fmt: skip
    # ---- schedules
    plan = {"agent": "a1", "name": "nightly", "cron": "0 2 * * *", "prompt": "sum up"}
    sched = check("POST", "/v1/schedules", json=plan, headers=admin, status=201)
    at = f"/v1/schedules/{sched['id']}"
    check("GET", "/v1/schedules", "/v1/schedules?agent=a1", headers=admin, status=200)
    check("GET", "/v1/schedules/{id}", at, headers=admin, status=200)
    check("PATCH", "/v1/schedules/{id}", at, json={"cron": "*/5 * * * *"}, headers=admin,
          status=200)  # fmt: skip
    check("POST", "/v1/schedules/{id}/run", f"{at}/run", headers=admin, status=201)
    check("DELETE", "/v1/schedules/{id}", at, headers=admin, status=204)
    # ---- an agent's memory
    entry = {"agent": "a1", "path": "/notes/today", "content": "ticket 12"}
    check("PUT", "/v1/memory/entry", json=entry, headers=admin, status=201)
    check("PUT", "/v1/memory/entry", json=entry, headers=admin, status=200)
    check("GET", "/v1/memory", "/v1/memory?agent=a1&path=/notes", headers=admin, status=200)
    check("GET", "/v1/memory/entry", "/v1/memory/entry?agent=a1&path=/notes/today",
          headers=admin, status=200)  # fmt: skip
    check("DELETE", "/v1/memory/entry", "/v1/memory/entry?agent=a1&path=/notes/today",
          headers=admin, status=204)  # fmt: skip
    # ---- feeds
    feed = check("POST", "/v1/feeds", json={"name": "releases"}, headers=admin, status=201)
    at = f"/v1/feeds/{feed['id']}"
    check("GET", "/v1/feeds", "/v1/feeds?limit=2", headers=admin, status=200)
    check("GET", "/v1/feeds/{id}", at, headers=admin, status=200)
    check("PATCH", "/v1/feeds/{id}", at, json={"name": "notes"}, headers=admin, status=200)
    check("POST", "/v1/feeds/{feed}/messages", f"{at}/messages", json={"message": "v2"},
          headers=admin, status=201)  # fmt: skip
    check("GET", "/v1/feeds/{feed}/messages", f"{at}/messages?after_seq=0&limit=5",
          headers=admin, status=200)  # fmt: skip
    check("DELETE", "/v1/feeds/{id}", at, headers=admin, status=204)
    check("GET", "/v1/feeds/{feed}/messages", f"{at}/messages", headers=admin, status=404)
    check("POST", "/v1/threads/{id}/wait", f"{in_thread}/wait", json={"timeout": 0},
          headers=admin, status=200)  # fmt: skip
    check("GET", "/v1/threads/{id}/events", f"{in_thread}/events?limit=5", headers=admin,
          status=200)  # fmt: skip
    check("DELETE", "/v1/tokens/{id}", f"/v1/tokens/{token['id']}", headers=admin, status=204)
    check("DELETE", "/v1/roles/{name}", "/v1/roles/extra", headers=admin, status=204)
    for kind, (body, _) in MADE.items():
        check("DELETE", f"/v1/{kind}/{{name}}", f"/v1/{kind}/{body['name']}", headers=admin,
              status=204)  # fmt: skip
    check("DELETE", "/v1/connections/{id}", connection, headers=admin, status=204)
    check("DELETE", "/v1/threads/{id}", in_thread, headers=admin, status=204)
    check("DELETE", "/v1/agents/{id}", child, headers=admin, status=204)
    check("DELETE", "/v1/identities/{id}", identity, headers=admin, status=204)
    # a create repeating the request id of an identity since deleted: that one is gone
    once = {"request_id": "r1"}
    gone = check("POST", "/v1/identities", json=once, headers=admin, status=201)
    check("DELETE", "/v1/identities/{id}", f"/v1/identities/{gone['id']}", headers=admin,
          status=204)  # fmt: skip
    check("POST", "/v1/identities", json=once, headers=admin, status=404)
    # ---- refusals: problem+json, each with a status its operation lists
    check("GET", "/v1/agents", status=401)
    check("GET", "/v1/agents", headers=decide, status=403)
    check("GET", "/v1/agents/{id}", "/v1/agents/nope", headers=admin, status=404)
    check("GET", "/v1/agents", "/v1/agents?limit=0", headers=admin, status=400)
    check("POST", "/v1/agents", json={}, headers=admin, status=422)
    check("POST", "/v1/agents", content=b"{", headers=admin, status=400)
    check("POST", "/v1/agents", content=b" " * (2 << 20), headers=admin, status=413)
    check("POST", "/v1/decisions", json={"agent": "a1"}, headers=decide, status=422)
    check("DELETE", "/v1/agents/{id}", "/v1/agents/a1", headers=agent, status=403)  # (a deny)
    operations = {(m, p) for p, ops in spec["paths"].items() for m in ops}
    reached = {(m, p) for m, p, s in check.seen if s < 300}
    assert operations - reached == set(), "operations the sample does not reach"
