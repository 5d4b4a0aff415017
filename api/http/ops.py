"""Operations: health, readiness, Prometheus metrics and the OpenAPI document
(api.http.openapi builds it)."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from api.http import answers as a
from api.http.parts import parts_of, service_of
from api.http.routing import Spec, Table, json_response
from api.service.errors import ServiceError
from api.service.snapshots import NotCompiled
from policy.store import StoreDamaged, StoreTooNew

CANNOT_WRITE = "store-cannot-write"  # /readyz's code while the store's writes fail


async def healthz(request: Request) -> Response:
    return json_response({"status": "ok"})


async def readyz(request: Request) -> Response:
    """Ready when this process can decide now: its store writes (policy/store/
    transaction.py records a write that failed for want of space or an I/O error until
    one succeeds) and the latest revision is compiled here. A
    probe that finds it not compiled starts its compile on a thread (one per revision,
    however many probes come) and answers at once; the first decisions on it would wait
    for that compile (about a second at 10,000 roles)."""
    service = service_of(request)
    try:
        service.sync()
        latest = service.store.latest_revision()
    except (StoreTooNew, StoreDamaged) as exc:  # (what a restart on the file would refuse)
        return json_response({"status": "unavailable", "reason": str(exc)}, 503)
    except Exception:
        return json_response({"status": "unavailable", "reason": "store"}, 503)
    moved = service.store.moved()
    if moved is not None:  # commits would go where no restart finds them
        return json_response({"status": "unavailable", "reason": moved}, 503)
    # (a write is tried while writes fail, off the event loop: it may wait for the lock)
    failure = await run_in_threadpool(service.store.write_failure)
    if failure is not None:  # every decision would be a 503: not ready to decide
        body = {"status": "unavailable", "code": CANNOT_WRITE, "reason": failure}
        return json_response(body, 503)
    if latest == 0:
        return json_response({"status": "unavailable", "reason": "no policy yet"}, 503)
    snapshots = service.snapshots
    try:
        snapshots.get(latest, compile=False)
    except NotCompiled:
        snapshots.compile_in_background(latest)
        reason = f"compiling revision {latest}"
        return json_response({"status": "unavailable", "reason": reason}, 503)
    except ServiceError as refused:  # it does not check with this charter: decisions fail
        return json_response({"status": "unavailable", "reason": refused.message}, 503)
    return json_response({"status": "ready", "revision": latest})


async def metrics(request: Request) -> Response:
    service = service_of(request)
    service.sync()
    shared = service.shared_metrics
    others = shared.others() if shared is not None else ()
    body = service.metrics.render(service.snapshots.latest, others)
    return Response(body, media_type="text/plain; version=0.0.4")


async def openapi_json(request: Request) -> Response:
    return json_response(parts_of(request).openapi)


ROUTES: Table = [
    (Spec("GET", "/healthz", "Liveness", "none", None, a.Health, operation="checkHealth",
          tag="operations"), healthz),
    (Spec("GET", "/readyz", "Readiness: the latest policy is compiled here, ready to decide",
          "none", None, a.Ready, others=((503, a.NotReady),), operation="checkReadiness",
          tag="operations"), readyz),
    (Spec("GET", "/metrics", "Prometheus metrics (every worker's)", "none", errors=(503,),
          media="text/plain", operation="readMetrics", tag="operations"), metrics),
    (Spec("GET", "/openapi.json", "This document (OpenAPI 3.1)", "none",
          operation="getOpenApi", tag="operations"), openapi_json),
]  # fmt: skip
