"""The server's signing keys and the decision log's verification: `GET /v1/keys`,
`POST /v1/keys/rotate` and `GET /v1/log/verify` (docs/operations.md)."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from api.http import answers as a
from api.http.auth import require_admin
from api.http.parts import service_of
from api.http.routing import Spec, Table, json_response
from api.service.core import Service
from policy import logseal


async def read_keys(request: Request) -> Response:
    """The public keys a receipt or a checkpoint is checked with: anyone may read them."""
    service = service_of(request)
    return json_response(await run_in_threadpool(service.keys.jwks))


async def rotate_keys(request: Request) -> Response:
    require_admin(request)
    service = service_of(request)
    await run_in_threadpool(service.keys.rotate)
    return json_response(await run_in_threadpool(service.keys.jwks))


def _verified(service: Service) -> dict[str, object]:
    return logseal.verify(service.store, service.keys.trusted()).to_json()


async def verify_log(request: Request) -> Response:
    require_admin(request)
    return json_response(await run_in_threadpool(_verified, service_of(request)))


ROUTES: Table = [
    (Spec("GET", "/v1/keys", "The server's public signing keys (a JWK set)", "none", None,
          a.KeySet, operation="readKeys", tag="keys"), read_keys),
    (Spec("POST", "/v1/keys/rotate", "Start signing with a new key", "admin", None,
          a.KeySet, operation="rotateKeys", tag="keys"), rotate_keys),
    (Spec("GET", "/v1/log/verify", "Verify the decision log: its chain and its signed "
          "checkpoints", "admin", None, a.LogVerification, operation="verifyLog",
          tag="keys"), verify_log),
]  # fmt: skip
