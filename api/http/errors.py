"""problem+json (RFC 9457) errors with stable codes, each answered with the status the
live table gives it (api.http.codes), and the catch-all that leaks nothing."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from api.http.codes import CODES, AnyCode
from api.service.encoding import dumps
from api.service.errors import ServiceError
from policy.secrets import SecretKeyError
from policy.store import StoreDamaged, StoreTooNew, StoreUnavailable

log = logging.getLogger("charter.http")
PROBLEM = "application/problem+json"
TITLES = {
    400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
    405: "Method Not Allowed", 408: "Request Timeout", 409: "Conflict",
    412: "Precondition Failed", 413: "Content Too Large", 415: "Unsupported Media Type",
    422: "Unprocessable Content", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 503: "Service Unavailable",
}  # fmt: skip


# What a code the table lacks is answered with. The types let none through (a
# ServiceError's code is an ErrorCode, and tests/api/test_error_codes.py checks the table
# has each), so it is a server bug; but the request was refused, so it is answered as a
# refusal, never as a 500 that hides the refusal nor anything a client could take for done.
UNLISTED = 400


def status_of(code: AnyCode) -> int:
    """The status the table gives `code`; a code it lacks (a bug) is logged, and given
    UNLISTED."""
    entry = CODES.get(code)
    if entry is None or entry.status is None:
        log.error("problem code `%s` has no status in api.http.codes; answered %d",
                  code, UNLISTED)  # fmt: skip
        return UNLISTED
    return entry.status


def problem(code: AnyCode, detail: str, **extra: Any) -> Response:
    """The problem+json answer of `code`, with the status the table gives it."""
    return problem_with(status_of(code), code, detail, **extra)


def problem_with(status: int, code: str, detail: str, **extra: Any) -> Response:
    """A problem+json answer of a status the table does not give: starlette's own
    (`http-error`)."""
    body = {
        "type": f"https://charter.dev/problems/{code}",
        "title": TITLES.get(status, "Error"),
        "status": status,
        "code": code,
        "detail": detail,
        **extra,
    }
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return Response(dumps(body), status, headers=headers, media_type=PROBLEM)


async def service_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ServiceError)
    status = status_of(exc.code)
    count_refusal(request.scope, status, exc.code)
    response = problem_with(status, exc.code, exc.message, **exc.extra)
    if exc.retry_after is not None:  # (`solver-busy`)
        response.headers["Retry-After"] = str(exc.retry_after)
    return response


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        allow = allowed_methods(request.scope)
        response = problem("method-not-allowed", f"this path takes {allow}")
        count_refusal(request.scope, response.status_code, "method-not-allowed")
        response.headers["Allow"] = allow  # (RFC 9110: a 405 says what the path takes)
        return response
    if exc.status_code == 404:
        response = problem("route-not-found", str(exc.detail))
        count_refusal(request.scope, response.status_code, "route-not-found")
        return response
    count_refusal(request.scope, exc.status_code, "http-error")
    return problem_with(exc.status_code, "http-error", str(exc.detail))


def allowed_methods(scope: Scope) -> str:
    """The methods some route of the app takes on the scope's path, as `Allow` lists them.
    Starlette's own 405 named those of the first route on the path alone (`GET, HEAD` for
    `/v1/agents`, which takes `POST` too), in no set order, and the problem dropped it."""
    methods: set[str] = set()
    for route in getattr(scope["app"], "routes", ()):
        if isinstance(route, Route) and route.matches(scope)[0] is not Match.NONE:
            methods |= route.methods or set()
    return ", ".join(sorted(methods))


async def store_unavailable(request: Request, exc: Exception) -> Response:
    """A condition that passes (another writer past the timeout, a full disk): 503 with
    Retry-After, not a 500. The failed transaction was rolled back (a decision request
    writes nothing; nor does an agent's management request, whose decision is logged in
    the operation's transaction)."""
    assert isinstance(exc, StoreUnavailable)
    log.warning("store unavailable in %s %s: %s", request.method, request.url.path, exc)
    response = problem(
        "store-unavailable", "the store is busy or unavailable; its transaction was rolled back",
        help="send the same request again after the Retry-After delay",
    )  # fmt: skip
    response.headers["Retry-After"] = "1"
    count_refusal(request.scope, response.status_code, "store-unavailable")
    return response


async def secret_key_mismatch(request: Request, exc: Exception) -> Response:
    """A stored secret that does not open with this process's key (a worker started with
    another key than the one that sealed it; `charter serve` refuses a key that opens
    none of the database's): the server's configuration, which no retry mends. Its
    transaction was rolled back."""
    assert isinstance(exc, SecretKeyError)
    log.error("a stored secret does not open with the key in %s %s", request.method,
              request.url.path)  # fmt: skip
    response = problem(
        "secret-key-mismatch",
        "a stored secret does not open with this server's key; nothing was changed",
        help="serve with the key that sealed the database's secrets",
    )  # fmt: skip
    count_refusal(request.scope, response.status_code, "secret-key-mismatch")
    return response


async def store_damaged(request: Request, exc: Exception) -> Response:
    """A stored row the request needs fails its checksum or does not decode
    (policy/store/rowsum.py): its data is never served. 503 without Retry-After: a retry
    reads the same row; `charter db check` lists what is damaged. `damaged` names the
    row (`document agents/a1`, `revision 3`); the request changed nothing."""
    assert isinstance(exc, StoreDamaged)
    log.error("damaged row in %s %s: %s", request.method, request.url.path, exc.what)
    response = problem(
        "store-damaged", f"{exc.what} is damaged: {exc.why}; nothing was changed",
        damaged=exc.what, help="stop the server and run `charter db check --db FILE`",
    )  # fmt: skip
    count_refusal(request.scope, response.status_code, "store-damaged")
    return response


async def store_too_new(request: Request, exc: Exception) -> Response:
    """A newer charter migrated the database while this process served it: this one's
    reads and writes could misread or mix with rows of a form it does not know, so it
    answers nothing from it. No retry mends it."""
    assert isinstance(exc, StoreTooNew)
    log.error("the database was migrated by a newer charter (schema version %d)", exc.found)
    response = problem(
        "store-too-new",
        f"{exc}: this server no longer reads or writes it; nothing was changed",
        help="serve the database with the newer charter",
    )  # fmt: skip
    count_refusal(request.scope, response.status_code, "store-too-new")
    return response


Handler = Callable[[Request, Exception], Awaitable[Response]]
# The app's exception handlers: what each expected error becomes (api.http.app gives them
# to starlette; the decision lane, which starlette does not wrap, looks them up here).
HANDLERS: dict[type[Exception], Handler] = {
    ServiceError: service_error,
    HTTPException: http_error,
    StoreUnavailable: store_unavailable,
    SecretKeyError: secret_key_mismatch,
    StoreDamaged: store_damaged,
    StoreTooNew: store_too_new,
}


def handler_for(exc: Exception) -> Handler | None:
    for kind, handler in HANDLERS.items():
        if isinstance(exc, kind):
            return handler
    return None


def internal_error(scope: Scope, exc: Exception) -> Response:
    """An unexpected exception's 500. Only its type is logged: its message or traceback
    could quote a request's secret arguments."""
    log.error("unexpected %s in %s %s", type(exc).__name__, scope["method"], scope["path"])
    response = problem("internal-error", "the server failed; nothing was changed")
    count_refusal(scope, response.status_code, "internal-error")
    return response


def count_refusal(scope: Scope, status: int, code: str) -> None:
    """Rejected requests write nothing, so /metrics is where they show (a run of 401s is
    someone guessing tokens). Only charter's app has the metrics."""
    parts = getattr(scope.get("app"), "charter", None)
    if parts is not None:
        parts.service.metrics.reject(status, code)


class CatchAll:
    """Any unexpected exception becomes a 500 problem+json (`internal_error`); a client
    that went away while its body was read (`api.http.body.receive_body`) is not answered,
    as the decision lane does not answer one: nothing was written, and there is nobody to
    answer, so it is no server error to log or count."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        except ClientDisconnect:
            return
        except Exception as exc:
            response = internal_error(scope, exc)
            try:
                await response(scope, receive, send)
            except Exception:
                # The response had started (the server refuses a second start): the
                # original error goes on up, and the server drops the connection. `send`
                # is not wrapped to know this beforehand: that cost every request a frame.
                raise exc from None
