"""The console: `/console`, a page of plain HTML, CSS and JavaScript modules shipped in
the package (api/console/), and `/console/session`, where a token is exchanged for a
session cookie (api/http/session.py) and given up again.

Every answer under `/console` carries a Content-Security-Policy that lets the page load
scripts, styles, images and connections from this server alone, and no inline script or
style, nor any framing. The page reaches the API as any client does, with the session's
cookie in place of a bearer token; these routes are not the API's, and `/openapi.json`
does not list them."""

from __future__ import annotations

from importlib import resources

from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from api.http.auth import known
from api.http.body import body
from api.http.errors import problem
from api.http.parts import parts_of
from api.http.routing import json_response
from api.http.session import (
    ENDED,
    clear_cookie,
    cookie_value,
    csrf_refusal,
    new_session,
    origin_refusal,
    refused,
    seal,
    set_cookie,
    unseal,
)
from api.service.errors import ServiceError
from api.service.tokens import Principal

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
GUARD = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}


def _files() -> dict[str, tuple[bytes, str]]:
    """The console's files, by name, read once from the package: what `/console/{name}`
    serves, and nothing else."""
    found: dict[str, tuple[bytes, str]] = {}
    for entry in resources.files("api").joinpath("console").iterdir():
        kind = TYPES.get("." + entry.name.rpartition(".")[2])
        if entry.is_file() and kind is not None:
            found[entry.name] = (entry.read_bytes(), kind)
    return found


FILES = _files()


def guarded(response: Response) -> Response:
    response.headers.update(GUARD)
    return response


async def page(request: Request) -> Response:
    content, kind = FILES["index.html"]
    return guarded(Response(content, media_type=kind))


async def asset(request: Request) -> Response:
    name = str(request.path_params["name"])
    found = FILES.get(name)
    if found is None or name == "index.html":
        return guarded(problem("route-not-found", f"the console has no file `{name[:64]}`"))
    return guarded(Response(found[0], media_type=found[1]))


class SignIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token: str = Field(min_length=1, max_length=512)


def _who(actor: Principal, csrf: str) -> dict[str, object]:
    """What the page may know of its session: who it acts as and its CSRF secret."""
    return {"scope": actor.scope, "agent": actor.agent, "token_id": actor.token_id, "csrf": csrf}


async def sign_in(request: Request) -> Response:
    """Origin checked first (a sign-in forced from another site would sign the person in
    as someone else), then the token, as any API request's."""
    why = origin_refusal(request.scope)
    if why is not None:
        return guarded(refused(request.scope, why))
    item = await body(request, SignIn)
    parts = parts_of(request)
    await run_in_threadpool(parts.service.sync)
    actor = known(parts.tokens, item.token.strip(" \t"))
    session = new_session(item.token.strip(" \t"))
    response = json_response(_who(actor, session.csrf))
    set_cookie(response, request.scope, seal(parts.service.sealer, session))
    return guarded(response)


async def current(request: Request) -> Response:
    """Who the session acts as (401 when there is none, or its token was revoked)."""
    parts = parts_of(request)
    session = unseal(parts.service.sealer, cookie_value(request.scope) or "")
    if session is None:
        raise ServiceError("unauthorized", "not signed in", help="sign in at /console")
    await run_in_threadpool(parts.service.sync)
    actor = known(parts.tokens, session.token)
    return guarded(json_response(_who(actor, session.csrf)))


async def sign_out(request: Request) -> Response:
    parts = parts_of(request)
    session = unseal(parts.service.sealer, cookie_value(request.scope) or "")
    if session is not None:
        why = csrf_refusal(request.scope, session)
        if why is not None:
            return guarded(refused(request.scope, why))
        ENDED.add(session)
    response = Response(status_code=204)
    clear_cookie(response, request.scope)
    return guarded(response)


def routes() -> list[BaseRoute]:
    return [
        Route("/console", page, methods=["GET"]),
        Route("/console/session", current, methods=["GET"]),
        Route("/console/session", sign_in, methods=["POST"]),
        Route("/console/session", sign_out, methods=["DELETE"]),
        Route("/console/{name}", asset, methods=["GET"]),
    ]
