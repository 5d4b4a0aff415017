"""Routes with the metadata `/openapi.json` is built from."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp

from api.service.encoding import dumps

# A route's endpoint: a handler of a starlette Request, or (the decision lanes) an ASGI
# app of its own, which starlette calls as it is.
Endpoint = Callable[[Request], Awaitable[Response]] | ASGIApp


@dataclass(frozen=True)
class Spec:
    method: str
    path: str
    summary: str
    auth: str
    request: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    status: int = 200
    query: tuple[str, ...] = ()
    # The built-in tool a management endpoint is decided as, for an agent's token (its path
    # parameters, query and body are the tool's arguments: tests/api/test_tool_arguments.py)
    tool: str | None = None


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


def build(table: Table) -> list[Route]:
    return [
        Route(spec.path, endpoint, methods=[spec.method], name=f"{spec.method} {spec.path}")
        for spec, endpoint in table
    ]
