"""The OpenID AuthZEN Authorization API 1.0 over charter's decisions: `POST
/access/v1/evaluation`, `POST /access/v1/evaluations`, `POST /access/v1/search/action`
and `GET /.well-known/authzen-configuration`.

An evaluation is a call, decided as `POST /v1/decisions` decides one (the group commit:
logged, charged, a pause opening its approval):

- `subject.id` is the agent (whatever `subject.type` says: charter's subjects are its
  agents);
- `resource.type` is the toolset and `action.name` the tool: `{"type": "billing"}` and
  `{"name": "refund"}` are the tool `billing.refund`;
- `context.args` (an object) are the call's arguments; the rest of `context` is the
  call's context, with `context.resource` the resource's `id` and `properties` (for a
  condition such as `where context.resource.id != "2"`), in place of any `resource` the
  request's context had.

The answer's `decision` is true for an allow alone: a deny and a pause are false. Its
`context` is the decision as `POST /v1/decisions` answers it (its `effect`, `reasons`,
the final `args`, and for a pause the `approval_id` to wait on).

Bodies follow the specification's JSON: unknown members are ignored, a required one
missing is a 400 (`authzen-bad-request`). A request's `X-Request-ID` is echoed.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from api.commands import MAX_ID
from api.http.auth import bearer, may_decide, require_decide
from api.http.authzenmodel import (
    ActionResults,
    ActionSearch,
    Configuration,
    Decision,
    Decisions,
    Evaluation,
    Evaluations,
    Options,
    Partial,
    Semantic,
)
from api.http.body import body, single_header
from api.http.decisions import tools_of
from api.http.parts import parts_of
from api.http.routing import Spec, Table, json_response
from api.service.calls import Call
from api.service.errors import ServiceError

# ---- from evaluations to calls ----------------------------------------------------------


def _call(item: Evaluation) -> Call:
    context = dict(item.context or {})
    args = context.pop("args", {})
    if not isinstance(args, dict):
        raise ServiceError(
            "authzen-bad-request", "`context.args` must be an object: the call's arguments"
        )
    tool = f"{item.resource.type}.{item.action.name}"
    if len(tool) > MAX_ID:
        raise ServiceError(
            "authzen-bad-request",
            f"the tool `{tool[:32]}…` (`resource.type`.`action.name`) is longer than {MAX_ID}",
        )
    context["resource"] = {"id": item.resource.id, "properties": item.resource.properties}
    return Call(item.subject.id, tool, args, context=context)


def _filled(top: Evaluations, one: Partial, index: int) -> Evaluation:
    """Evaluation `index` with the top level's defaults for what it leaves out."""
    fields = {
        name: getattr(one, name) if getattr(one, name) is not None else getattr(top, name)
        for name in ("subject", "action", "resource", "context")
    }
    missing = [name for name in ("subject", "action", "resource") if fields[name] is None]
    if missing:
        raise ServiceError(
            "authzen-bad-request",
            f"evaluation {index} has no `{missing[0]}`, and the request gives no default",
            help="give it in the evaluation or at the request's top level",
        )  # fmt: skip
    return Evaluation.model_validate(fields)


async def _parsed(request: Request, model: type[Any]) -> Any:
    """The body as `model`; a body the specification's model refuses is its 400."""
    try:
        return await body(request, model)
    except ServiceError as exc:
        if exc.code != "invalid-body":
            raise
        raise ServiceError("authzen-bad-request", exc.message, **exc.extra) from None


def _answer(result: dict[str, Any]) -> dict[str, Any]:
    return {"decision": result["effect"] == "allow", "context": result}


def _refused(status: int, code: str, message: str) -> dict[str, Any]:
    """An evaluation that could not be decided: false, with why (the specification's
    per-evaluation error)."""
    return {
        "decision": False,
        "context": {"error": {"status": status, "code": code, "message": message}},
    }


class Asked:
    """What a request's decisions need: its parts, its bearer token, and the token
    cache's generation read before the token was looked up (api.http.lane: a token
    revoked after the look-up is looked up again in the group commit)."""

    __slots__ = ("generation", "parts", "request")

    def __init__(self, request: Request) -> None:
        self.parts = parts_of(request)
        self.generation = self.parts.commit.generation
        self.request = request

    async def decide(self, calls: list[Call]) -> list[dict[str, Any]]:
        """`calls` decided in one group commit, as `POST /v1/decisions/batch` decides."""
        token = bearer(self.request.scope)
        return await self.parts.commit.decide(calls, token, self.generation)


def _echo(request: Request, response: Response) -> Response:
    """The specification's request identification: `X-Request-ID` sent back as given."""
    found = single_header(request.scope, b"x-request-id")
    if found:
        response.headers["X-Request-ID"] = found[:MAX_ID]
    return response


# ---- the endpoints ----------------------------------------------------------------------


async def evaluation(request: Request) -> Response:
    asked = Asked(request)
    actor = require_decide(request)
    item: Evaluation = await _parsed(request, Evaluation)
    call = _call(item)
    may_decide(actor, (call.agent,))
    results = await asked.decide([call])
    return _echo(request, json_response(_answer(results[0])))


async def evaluations(request: Request) -> Response:
    asked = Asked(request)
    actor = require_decide(request)
    top: Evaluations = await _parsed(request, Evaluations)
    if not top.evaluations:  # (the single evaluation, answered as such)
        one = _call(_filled(top, top, 0))
        may_decide(actor, (one.agent,))
        results = await asked.decide([one])
        return _echo(request, json_response(_answer(results[0])))
    calls = [_call(_filled(top, one, i)) for i, one in enumerate(top.evaluations)]
    may_decide(actor, [call.agent for call in calls])
    semantic = (top.options or Options()).evaluations_semantic
    if semantic == "execute_all":
        answers = await _all(asked, calls)
    else:
        answers = await _until(asked, calls, semantic)
    return _echo(request, json_response({"evaluations": answers}))


async def _all(asked: Asked, calls: list[Call]) -> list[dict[str, Any]]:
    """Every evaluation, in one group commit; one whose agent is not there is false with
    its error, and the others are decided."""
    service = asked.parts.service
    known = [service.find_agent(call.agent) is not None for call in calls]
    there = [call for call, found in zip(calls, known, strict=True) if found]
    decided = iter(await asked.decide(there) if there else [])
    return [
        _answer(next(decided)) if k else _refused(404, "agent-not-found", _unknown(c))
        for c, k in zip(calls, known, strict=True)
    ]


def _unknown(call: Call) -> str:
    return f"agent `{call.agent}` not found"


async def _until(asked: Asked, calls: list[Call], semantic: Semantic) -> list[dict[str, Any]]:
    """The evaluations in order, each decided (and logged) on its own, up to the first
    deny (`deny_on_first_deny`) or the first permit (`permit_on_first_permit`): those
    after it are not decided at all, so no pause opens an approval for them."""
    answers: list[dict[str, Any]] = []
    for call in calls:
        if asked.parts.service.find_agent(call.agent) is None:
            answer = _refused(404, "agent-not-found", _unknown(call))
        else:
            answer = _answer((await asked.decide([call]))[0])
        answers.append(answer)
        if answer["decision"] == (semantic == "permit_on_first_permit"):
            break
    return answers


async def search_action(request: Request) -> Response:
    actor = require_decide(request)
    item: ActionSearch = await _parsed(request, ActionSearch)
    may_decide(actor, (item.subject.id,))
    _, _, made = await tools_of(parts_of(request).service, item.subject.id)
    prefix = f"{item.resource.type}."
    results = []
    for tool in json.loads(made):
        name = tool["tool"]
        if not name.startswith(prefix) or tool["status"] == "deny":
            continue
        # (its `status`, and for `narrow` its `condition`; the hooks that may pause,
        # rewrite or deny it: what GET /v1/agents/{id}/tools gives, but `any_of`)
        properties = {k: v for k, v in tool.items() if k not in ("tool", "any_of")}
        results.append({"name": name[len(prefix) :], "properties": properties})
    return _echo(request, json_response({"results": results}))


async def configuration(request: Request) -> Response:
    base = str(request.base_url).rstrip("/")
    return json_response(
        {
            "policy_decision_point": base,
            "access_evaluation_endpoint": f"{base}/access/v1/evaluation",
            "access_evaluations_endpoint": f"{base}/access/v1/evaluations",
            "search_action_endpoint": f"{base}/access/v1/search/action",
        }
    )


ROUTES: Table = [
    (Spec("POST", "/access/v1/evaluation", "AuthZEN: evaluate one access request", "decide",
          Evaluation, Decision, errors=(404, 409), headers=("X-Request-ID",),
          operation="decideAccess", tag="authzen"), evaluation),
    (Spec("POST", "/access/v1/evaluations", "AuthZEN: evaluate several access requests",
          "decide", Evaluations, Decisions, errors=(404, 409), headers=("X-Request-ID",),
          operation="decideAccesses", tag="authzen"), evaluations),
    (Spec("POST", "/access/v1/search/action", "AuthZEN: the actions a subject may take",
          "decide", ActionSearch, ActionResults, errors=(404, 409, 503),
          headers=("X-Request-ID",), operation="listAccessActions", tag="authzen"),
     search_action),
    (Spec("GET", "/.well-known/authzen-configuration", "AuthZEN: the PDP's metadata", "none",
          None, Configuration, operation="getAuthzenConfiguration", tag="authzen"),
     configuration),
]  # fmt: skip
