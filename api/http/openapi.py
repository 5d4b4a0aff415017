"""`/openapi.json`: generated from the route tables' `Spec`s and the pydantic models of
what each route reads (api.commands, api.http.models) and answers (api.http.answers).

Every operation has its success answer's schema (a 204 has none), the 202 `Pending` of a
management request an agent's policy paused, and a problem+json `Problem` for each
refusal status it can give: those its shape implies (below, `_statuses`) and its Spec's
`errors`. tests/api/test_openapi.py checks that every route has an operation and that a
live server's answers read as their schemas say.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from api.commands import MAX_ID
from api.http import answers as a
from api.http.routing import Spec, Table

PROBLEM_TYPE = "application/problem+json"
# What each refusal status means here (docs/http-reference.md, "Error codes", has every code).
WHY = {
    400: "the request is malformed: its JSON, a query parameter, a header given twice, an id in "
    "the path, or a field the operation checks (`malformed-json`, `bad-limit`, "
    "`repeated-header`, `id-too-long`, `unknown-profile`, ...)",
    401: "no valid bearer token (`unauthorized`)",
    403: "the token may not do this (`insufficient-scope`), or an agent's token's request "
    "was refused by its policy (`denied-by-policy`, with the logged `decision`) or by what "
    "it may make (`does-not-fit`, `budget-looser`, ...)",
    404: "what the path or the body names is not there (`agent-not-found`, ...)",
    409: "the request conflicts with the state (`agent-exists`, `no-policy`, "
    "`approval-not-pending`, `policy-in-use`, ...)",
    413: "the body is over 1 MiB (`body-too-large`), a batch over 1,000 calls, or a new "
    "revision over the policy's size cap (`policy-too-large`)",
    412: "`If-Match` names a revision that is no longer the latest (`revision-moved`), or "
    "a state of the resource that is no longer its own (`resource-moved`): nothing written",
    415: "the DSL text names a charset other than UTF-8 (`unsupported-charset`)",
    422: "the body does not match the schema (`invalid-body`, with `errors`), holds a number "
    "a double cannot hold (`number-out-of-range`), or a policy source does not check "
    "(`policy-invalid`, with `diagnostics`)",
    503: "the store is busy or unavailable (`store-unavailable`, with `Retry-After`), the fit "
    "checker is (`solver-busy`, with `Retry-After`: an operation that runs a fit check), a "
    "stored row it reads is damaged (`store-damaged`), or a module the operation needs cannot "
    "be loaded",
}
_HEADERS = {
    401: {"WWW-Authenticate": {"schema": {"type": "string"}, "description": "`Bearer`"}},
    503: {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}},
}
# The tags, in the order the document and docs/http-reference.md list them, with what each
# groups.
TAGS = {
    "decisions": "Decide calls, read the decision log, list an agent's tools, check a fit, "
    "admit a turn",
    "approvals": "The pending approvals that `pause` decisions open, and their approval or "
    "rejection",
    "policy": "Upload and read the policy, and its revisions",
    "drafts": "The policy playground: check, decide against, test and fit-check a workspace "
    "that is never stored",
    "agents": "The agents that decisions are made for",
    "identities": "Signing identities (Ed25519): created, imported, renamed, deleted",
    "threads": "Threads of an agent's work, with their spending caps",
    "connections": "Credentials held for a toolset (sealed; never shown)",
    "roles": "The roles of the latest revision, and the roles made through the API",
    "profiles": "The profiles of the latest revision",
    "hooks": "The hooks of the latest revision",
    "toolsets": "The toolsets of the latest revision",
    "schedules": "An agent's prompts under cron expressions, each run at its times as a new thread",
    "memory": "An agent's memory: entries of text under `/`-separated paths, shared by its threads",
    "feeds": "Feeds: named streams of messages numbered 1, 2, ... without gaps",
    "tokens": "Bearer tokens: issued and revoked by an admin",
    "keys": "The server's signing keys, which sign decision receipts and the log's "
    "checkpoints, and the log's verification against them",
    "authzen": "The OpenID AuthZEN Authorization API 1.0: evaluations decided as calls, the "
    "actions of a toolset an agent may take, the PDP's metadata",
    "operations": "Health, readiness, metrics and this document: no token",
}
_INTEGERS = frozenset({"limit", "after_seq", "revision", "against", "wait", "since", "until"})
_BOOLEANS = frozenset({"remove_in_use", "receipt"})  # `true` or `false`, as written
_ETAG = {
    "ETag": {
        "schema": {"type": "string"},
        "description": "the state answered with, strong: a later write's `If-Match`",
    }
}


def package_version() -> str:
    """The installed charter's version (its package metadata): `info.version`."""
    try:
        return version("charter")
    except PackageNotFoundError:  # (run from a checkout that was never installed)
        return "0+unknown"


def operation_id(spec: Spec) -> str:
    """`spec.operation`, or, for a route that names none, one made of its method and path."""
    if spec.operation:
        return spec.operation
    return f"{spec.method.lower()}{spec.path}".replace("/", "_").replace("{", "").replace("}", "")


def _ref(model: type[BaseModel]) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _statuses(spec: Spec) -> list[int]:
    """The problem statuses of an operation: its shape's and its Spec's `errors`."""
    found = set(spec.errors)
    if spec.auth != "none":
        # (a token is looked up in the store; its header given twice is a 400)
        found |= {400, 401, 403, 503}
    if spec.request is not None:
        found |= {400, 413, 422}
    if spec.query:
        found.add(400)
    if "{" in spec.path:
        found |= {400, 404}  # (an id over MAX_ID characters, `id-too-long`; one not there)
    return sorted(found - {status for status, _ in spec.others})


# One event of a `text/event-stream` answer, as the HTML standard defines its fields: its
# `data` is JSON here (api.http.approvals). OpenAPI 3.0 and 3.1 have no `itemSchema`;
# a tool that reads the stream (schemathesis) takes `schema` for each event.
SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "required": ["data"],
    "properties": {
        "event": {"type": "string"},
        "data": {"type": "string", "contentMediaType": "application/json"},
        "id": {"type": "string"},
        "retry": {"type": "integer", "minimum": 0},
    },
}


def _success(spec: Spec) -> dict[str, Any]:
    if spec.status == 204:
        return {"description": "done: no content"}
    if spec.response is not None:
        schema = _ref(spec.response)
    elif spec.media == "text/event-stream":
        schema = SSE_EVENT  # (each event of the stream, as OpenAPI 3.2's `itemSchema` says)
    elif spec.media.startswith("text/"):
        schema = {"type": "string"}
    else:
        schema = {"type": "object"}
    answer = {"description": "success", "content": {spec.media: {"schema": schema}}}
    if spec.etag:
        answer["headers"] = _ETAG
    return answer


def _responses(spec: Spec) -> dict[str, Any]:
    answers: dict[str, Any] = {str(s): _success(spec) for s in (spec.status, *spec.also)}
    if spec.auth == "manage":
        answers["202"] = {
            "description": "an agent's request its policy paused: it runs once approved",
            "content": {"application/json": {"schema": _ref(a.Pending)}},
        }
    problem = {PROBLEM_TYPE: {"schema": _ref(a.Problem)}}
    for status, model in spec.others:
        answers[str(status)] = {
            "description": WHY.get(status, "see the schema"),
            "content": {"application/json": {"schema": _ref(model)}, **problem},
        }
    for status in _statuses(spec):
        answers[str(status)] = {"description": WHY[status], "content": problem}
        if status in _HEADERS:
            answers[str(status)]["headers"] = _HEADERS[status]
    answers["default"] = {"description": "any other problem (a 405, a 500)", "content": problem}
    return dict(sorted(answers.items()))


def _request(spec: Spec, model: type[BaseModel]) -> dict[str, Any]:
    body: dict[str, Any] = {"content": {"application/json": {"schema": _ref(model)}}}
    if spec.text:
        body["content"]["text/plain"] = {"schema": {"type": "string"}}
        body["description"] = (
            "JSON, or the DSL text of one file (`text/plain`: any content type but JSON)"
        )
    # A body of a model with no required field may be left out (it reads as `{}`).
    required = any(field.is_required() for field in model.model_fields.values())
    return {"required": required or spec.text, **body}


def _query_type(name: str) -> str:
    if name in _INTEGERS:
        return "integer"
    return "boolean" if name in _BOOLEANS else "string"


def _operation(spec: Spec) -> dict[str, Any]:
    path_params = [p.strip("{}") for p in spec.path.split("/") if p.startswith("{")]
    op: dict[str, Any] = {
        "summary": spec.summary,
        "operationId": operation_id(spec),
        "tags": [spec.tag or "operations"],
        "security": [] if spec.auth == "none" else [{"bearer": []}],
        "x-charter-auth": spec.auth,
        "parameters": [
            {"name": p, "in": "path", "required": True,
             "schema": {"type": "string", "maxLength": MAX_ID}}
            for p in path_params
        ] + [
            {"name": q, "in": "query", "required": False,
             "schema": {"type": _query_type(q)}}
            for q in spec.query
        ] + [
            {"name": h, "in": "header", "required": False, "schema": {"type": "string"}}
            for h in spec.headers
        ],
        "responses": _responses(spec),
    }  # fmt: skip
    if spec.tool is not None:
        op["x-charter-tool"] = spec.tool
    if spec.request is not None:
        op["requestBody"] = _request(spec, spec.request)
    return op


def models_of(table: Table) -> list[type[BaseModel]]:
    """Every model the document names (their own models follow in `$defs`)."""
    used: set[type[BaseModel] | None] = {a.Pending, a.Problem}
    for spec, _ in table:
        used |= {spec.request, spec.response, *(model for _, model in spec.others)}
    return sorted((x for x in used if x is not None), key=lambda x: x.__name__)


def openapi(table: Table) -> dict[str, Any]:
    _, schema = models_json_schema(
        [(x, "validation") for x in models_of(table)],
        ref_template="#/components/schemas/{model}",
    )
    paths: dict[str, dict[str, Any]] = {}
    for spec, _ in table:
        paths.setdefault(spec.path, {})[spec.method.lower()] = _operation(spec)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Charter decision service", "version": package_version()},
        "tags": [{"name": name, "description": text} for name, text in TAGS.items()],
        "paths": paths,
        "components": {
            "schemas": schema.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
