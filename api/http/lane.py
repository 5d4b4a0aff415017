"""The decision lane: `POST /v1/decisions` and `POST /v1/decisions/batch` as plain ASGI.

A decision request is the one request a service sends by the thousand, and starlette's
layers around an endpoint (its two middlewares, CatchAll, the router trying routes, the
wrapper that turns exceptions into responses, the Request object) cost about a quarter
of what one costs in all. So the app hands these two paths to their lane before any of that
(`LaneApp.__call__`, api.http.parts); the router lists them too, for a request under a
`root_path`, for a 405 on another method, and for `/openapi.json`. A lane answers as
the app would: an expected error through the app's own exception handlers
(`errors.HANDLERS`), anything else as CatchAll's 500.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import parse_qs

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive, Scope, Send

from api.http.auth import authenticate_decisions, may_decide
from api.http.body import receive_body
from api.http.calls import batch_calls, one_call
from api.http.errors import handler_for, internal_error
from api.http.parts import Parts
from api.service.calls import Call
from api.service.core import Service, now_ms
from api.service.encoding import dumps
from api.service.errors import ServiceError

_JSON = (b"content-type", b"application/json")
RECEIPT = "receipt"
# Receipts for more decisions than this are signed on a worker thread, off the event loop
# (an Ed25519 signature and two digests take some tens of microseconds each).
SIGN_ON_LOOP = 16


def wants_receipt(scope: Scope) -> bool:
    """`?receipt=true`: each decision answered carries a signed receipt; `false` or none:
    none. Anything else is 400 `bad-receipt` (before anything is decided): a misspelt
    `True` or `1` taken for `false` would leave a caller without the receipt it relies on."""
    query = scope.get("query_string")
    if not query:
        return False
    values = parse_qs(query.decode("latin-1"), keep_blank_values=True).get(RECEIPT, [])
    if len(values) > 1:
        raise ServiceError(
            "repeated-parameter", f"the query parameter `{RECEIPT}` is given {len(values)} times",
            help="give each query parameter once",
        )  # fmt: skip
    if not values or values[0] in ("", "false"):
        return False
    if values[0] == "true":
        return True
    raise ServiceError(
        "bad-receipt", f"`{RECEIPT}` must be `true` or `false`",
        help=f"send `?{RECEIPT}=true` for a signed receipt with each decision, or leave it out",
    )  # fmt: skip


def _sign(service: Service, key: Any, calls: list[Call], results: list[dict[str, Any]]) -> None:
    revisions = {answer["revision"] for answer in results}
    snapshots = {revision: service.snapshots.get(revision) for revision in revisions}
    service.receipts.add(key, calls, results, snapshots, now_ms())


class DecisionLane:
    """One decision (`batch` False: the body is a call) or a batch (`{"calls": [...]}`);
    the answer is the decision, or `{"decisions": [...]}` in the calls' order."""

    __slots__ = ("batch",)

    def __init__(self, *, batch: bool) -> None:
        self.batch = batch

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        parts: Parts = scope["app"].charter
        try:
            # Read before the token is looked up: if the token cache is dropped after
            # (a token revoked), the group commit looks the token up again.
            generation = parts.commit.generation
            token, actor = authenticate_decisions(scope, parts.tokens)
            # The key first: one that does not open refuses the request, nothing decided.
            # (A request without a query string, the usual one, looks at nothing more.)
            key = None
            if scope.get("query_string") and wants_receipt(scope):
                key = parts.service.keys.signing()
            raw = await receive_body(scope, receive)
            if self.batch:
                calls = batch_calls(raw)
                may_decide(actor, [c.agent for c in calls])
            else:
                calls = [one_call(raw)]
                may_decide(actor, (calls[0].agent,))
            results = await parts.commit.decide(calls, token, generation)
            if key is not None:
                if len(calls) > SIGN_ON_LOOP:
                    await run_in_threadpool(_sign, parts.service, key, calls, results)
                else:
                    _sign(parts.service, key, calls, results)
        except ClientDisconnect:
            return  # gone before its calls were handed over: nothing was written
        except Exception as exc:
            handler = handler_for(exc)
            if handler is None:
                response = internal_error(scope, exc)
            else:
                response = await handler(Request(scope, receive), exc)
            await response(scope, receive, send)
            return
        parts.service.metrics.observe(time.perf_counter() - started)
        content = dumps({"decisions": results} if self.batch else results[0])
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-length", b"%d" % len(content)), _JSON],
            }
        )
        await send({"type": "http.response.body", "body": content})
