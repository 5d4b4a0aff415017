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

from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive, Scope, Send

from api.http.auth import authenticate_decisions, may_decide
from api.http.body import receive_body
from api.http.calls import batch_calls, one_call
from api.http.errors import handler_for, internal_error
from api.http.parts import Parts
from api.service.encoding import dumps

_JSON = (b"content-type", b"application/json")


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
            raw = await receive_body(scope, receive)
            if self.batch:
                calls = batch_calls(raw)
                may_decide(actor, [c.agent for c in calls])
            else:
                calls = [one_call(raw)]
                may_decide(actor, (calls[0].agent,))
            results = await parts.commit.decide(calls, token, generation)
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
