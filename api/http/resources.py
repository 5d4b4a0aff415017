"""Resources as routes: each maps to its built-in tool (`agents.create`, ...) and runs
through api.service.manage, so an agent's token is decided exactly like a tool call."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from api.http import models as m
from api.http.auth import require_admin, require_manager
from api.http.body import body
from api.http.pagination import list_args
from api.http.parts import service_of
from api.http.routing import Endpoint, Spec, Table, json_response
from api.service import tokens
from api.service.errors import ServiceError
from api.service.manage import manage

PAGE = ("cursor", "limit")  # every list's own query parameters (api.http.pagination)


def managed(spec: Spec) -> tuple[Spec, Endpoint]:
    """The route of `spec`, run as its built-in tool `spec.tool`: the tool's arguments are
    the body (its model's fields as sent), a list's query parameters and the path's."""
    tool, model = spec.tool, spec.request
    assert tool is not None
    listing = tool.endswith(".list")
    query = tuple(name for name in spec.query if name not in PAGE)

    async def endpoint(request: Request) -> Response:
        actor = require_manager(request)
        args: dict[str, Any] = {}
        if model is not None:
            args.update(m.dump(await body(request, model)))  # (nesting checked there)
        if listing:
            args.update(list_args(request, *query))
        args.update(request.path_params)
        service = service_of(request)  # (brought up to date by the token check)
        result = await run_in_threadpool(manage, service, actor, tool, args)
        return json_response(result.body, result.status)

    return spec, endpoint


def _crud(kind: str, key: str, create: type[BaseModel] | None, update: type[BaseModel] | None,
          out: type[BaseModel] | None, extra_query: tuple[str, ...] = ()) -> Table:  # fmt: skip
    base = f"/v1/{kind}"
    item = f"{base}/{{{key}}}"
    table: Table = [
        managed(Spec("GET", base, f"List {kind}", "manage", None, m.Page,
                     query=(*PAGE, *extra_query), tool=f"{kind}.list")),
        managed(Spec("GET", item, f"Get one of {kind}", "manage", None, out, tool=f"{kind}.get")),
    ]  # fmt: skip
    if create is not None:
        table.append(
            managed(Spec("POST", base, f"Create one of {kind}", "manage", create, out, 201,
                         tool=f"{kind}.create"))
        )  # fmt: skip
    if update is not None:
        table.append(
            managed(Spec("PATCH", item, f"Update one of {kind}", "manage", update, out,
                         tool=f"{kind}.update"))
        )  # fmt: skip
        table.append(
            managed(Spec("DELETE", item, f"Delete one of {kind}", "manage", status=204,
                         tool=f"{kind}.delete"))
        )  # fmt: skip
    return table


async def create_token(request: Request) -> Response:
    require_admin(request)
    item = await body(request, m.TokenCreate)
    # tokens.issue checks the agent, as for `charter token`; its ServiceError is the answer
    token, doc = tokens.issue(service_of(request).store, item.scope, item.agent, item.name)
    return json_response({**tokens.view(doc), "token": token}, 201)


async def delete_token(request: Request) -> Response:
    require_admin(request)
    service = service_of(request)
    with service.store.atomic():
        if not service.store.delete("tokens", request.path_params["id"]):
            raise ServiceError(404, "token-not-found", "token not found")
        service.forget_tokens()  # here at once, in every other process at its next sync
    return json_response(None, 204)


ROUTES: Table = [
    *_crud("identities", "id", m.IdentityCreate, m.IdentityUpdate, m.Identity),
    managed(Spec("POST", "/v1/identities/import", "Import a 32-byte Ed25519 seed", "manage",
                 m.IdentityImport, m.Identity, 201, tool="identities.import")),
    *_crud("agents", "id", m.AgentCreate, m.AgentUpdate, m.Agent),
    *_crud("threads", "id", m.ThreadCreate, m.ThreadUpdate, None, ("agent",)),
    *_crud("connections", "id", m.ConnectionCreate, m.ConnectionUpdate, None),
    *_crud("roles", "name", m.RoleWrite, m.RoleUpdate, None),
    *_crud("profiles", "name", None, None, None),
    *_crud("hooks", "name", None, None, None),
    *_crud("toolsets", "name", None, None, None),
    managed(Spec("GET", "/v1/approvals", "List approvals", "manage", None, m.Page,
                 query=(*PAGE, "status"), tool="approvals.list")),
    managed(Spec("GET", "/v1/approvals/{id}", "Get an approval", "manage",
                 tool="approvals.get")),
    managed(Spec("POST", "/v1/approvals/{id}/approve",
                 "Approve: re-check and return the final decision", "manage",
                 tool="approvals.approve")),
    managed(Spec("POST", "/v1/approvals/{id}/reject", "Reject a pending approval", "manage",
                 m.Reject, tool="approvals.reject")),
    (Spec("POST", "/v1/tokens", "Issue a token (shown once)", "admin", m.TokenCreate,
          status=201), create_token),
    (Spec("DELETE", "/v1/tokens/{id}", "Revoke a token", "admin", status=204), delete_token),
]  # fmt: skip
