"""Routes with the metadata `/openapi.json` is built from."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp

from api.commands import MAX_ID
from api.service.encoding import dumps
from api.service.errors import ServiceError

# A route's endpoint: a handler of a starlette Request, or (the decision lanes) an ASGI
# app of its own, which starlette calls as it is.
Endpoint = Callable[[Request], Awaitable[Response]] | ASGIApp


@dataclass(frozen=True)
class Spec:
    """A route as `/openapi.json` gives it (api.http.openapi): who may call it, what it
    reads and what it answers. The problem+json statuses its shape implies (a token's
    401/403/503, a body's 400/413/422, a query's 400, a path's 404) are added there;
    `errors` are the others it can give."""

    method: str
    path: str
    summary: str
    auth: str  # "none", "admin", "decide" or "manage" (admin, or an agent's token: decided)
    request: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    status: int = 200
    query: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()  # optional request headers it reads (besides the token)
    # The built-in tool a management endpoint is decided as, for an agent's token (its path
    # parameters, query and body are the tool's arguments: tests/api/test_tool_arguments.py)
    tool: str | None = None
    errors: tuple[int, ...] = ()
    also: tuple[int, ...] = ()  # other success statuses, with the same answer
    others: tuple[tuple[int, type[BaseModel]], ...] = ()  # other JSON answers, by status
    text: bool = False  # the body may be text too (any non-JSON content type)
    etag: bool = False  # its success answer has an `ETag` (what a write's `If-Match` names)
    media: str = "application/json"  # the answer's, when `response` is None
    # Its OpenAPI operation id, a verb phrase in camel case (`decide`, `listAgentTools`),
    # the name a generated client gives its call, and its tag, the group it is listed in
    # (here and in docs/http-reference.md)
    operation: str = ""
    tag: str = ""


class JSONResponse(Response):
    """A starlette Response of JSON bytes already encoded, its two headers built directly
    (what Response.__init__ gives for them, without its general header handling)."""

    media_type = "application/json"

    def __init__(self, content: bytes, status_code: int = 200) -> None:
        self.status_code = status_code
        self.background = None
        self.body = content
        self.raw_headers = [
            (b"content-length", b"%d" % len(content)),
            (b"content-type", b"application/json"),
        ]


def json_response(body: object, status: int = 200) -> Response:
    if status == 204:
        return Response(status_code=204)
    return JSONResponse(dumps(body), status)


Table = list[tuple[Spec, Endpoint]]
SHOWN = 32  # characters of an id too long that its refusal shows
# The methods that only read (RFC 9110, 9.2.1): a request by one writes nothing of its own,
# no token use and no session check of a form.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def bounded_id(value: str, where: str) -> str:
    """An id or a name a request gives outside its body (`where`: its path's `{id}`, a
    query's `agent`), if it is at most MAX_ID characters, as ids in a body are
    (api.commands); else 400 `id-too-long`, showing only its first SHOWN characters,
    so a 60 KB id is never looked up, nor echoed whole in a 404 (or an agent's 403)."""
    if len(value) <= MAX_ID:
        return value
    raise ServiceError(
        "id-too-long",
        f"{where} is {len(value)} characters long (`{value[:SHOWN]}…`): at most {MAX_ID}",
        help=f"ids and names are at most {MAX_ID} characters, in a path as in a body",
    )  # fmt: skip


def path_ids(request: Request) -> dict[str, Any]:
    """The route's path parameters (`{id}`, `{name}`), each bounded by `bounded_id`."""
    params: dict[str, Any] = request.path_params
    for name, value in params.items():
        bounded_id(value, f"the path's `{{{name}}}`")
    return params


def build(table: Table) -> list[Route]:
    return [
        Route(spec.path, endpoint, methods=[spec.method], name=f"{spec.method} {spec.path}")
        for spec, endpoint in table
    ]
