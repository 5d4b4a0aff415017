"""Operations: health, readiness, Prometheus metrics and the OpenAPI document."""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import models_json_schema
from starlette.requests import Request
from starlette.responses import Response

from api.http import models as m
from api.http.parts import parts_of, service_of
from api.http.routing import Spec, Table, json_response


async def healthz(request: Request) -> Response:
    return json_response({"status": "ok"})


async def readyz(request: Request) -> Response:
    service = service_of(request)
    service.sync()
    try:
        latest = service.store.latest_revision()
    except Exception:
        return json_response({"status": "unavailable", "reason": "store"}, 503)
    if latest == 0:
        return json_response({"status": "unavailable", "reason": "no policy yet"}, 503)
    return json_response({"status": "ready", "revision": latest})


async def metrics(request: Request) -> Response:
    service = service_of(request)
    service.sync()
    shared = service.shared_metrics
    others = shared.others() if shared is not None else ()
    body = service.metrics.render(service.snapshots.latest, others)
    return Response(body, media_type="text/plain; version=0.0.4")


def openapi(table: Table) -> dict[str, Any]:
    used = {spec.request for spec, _ in table} | {spec.response for spec, _ in table}
    used.add(m.Problem)
    models = sorted((x for x in used if x is not None), key=lambda x: x.__name__)
    _, schema = models_json_schema(
        [(x, "validation") for x in models], ref_template="#/components/schemas/{model}"
    )
    paths: dict[str, dict[str, Any]] = {}
    for spec, _ in table:
        op: dict[str, Any] = {
            "summary": spec.summary,
            "operationId": f"{spec.method.lower()}{spec.path}".replace("/", "_").replace("{", "")
            .replace("}", ""),
            "security": [] if spec.auth == "none" else [{"bearer": []}],
            "x-charter-auth": spec.auth,
            "parameters": [
                {"name": p.strip("{}"), "in": "path", "required": True, "schema": {"type": "string"}}
                for p in spec.path.split("/") if p.startswith("{")
            ] + [
                {"name": q, "in": "query", "required": False, "schema": {"type": "string"}}
                for q in spec.query
            ],
            "responses": {
                str(spec.status): {"description": "success"} if spec.response is None else {
                    "description": "success",
                    "content": {"application/json": {
                        "schema": {"$ref": f"#/components/schemas/{spec.response.__name__}"}}},
                },
                "4XX": {"description": "problem", "content": {"application/problem+json": {
                    "schema": {"$ref": "#/components/schemas/Problem"}}}},
            },
        }  # fmt: skip
        if spec.tool is not None:
            op["x-charter-tool"] = spec.tool
        if spec.request is not None:
            op["requestBody"] = {
                "required": True,
                "content": {"application/json": {
                    "schema": {"$ref": f"#/components/schemas/{spec.request.__name__}"}}},
            }  # fmt: skip
        paths.setdefault(spec.path, {})[spec.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "Charter decision service", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": schema.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


async def openapi_json(request: Request) -> Response:
    return json_response(parts_of(request).openapi)


ROUTES: Table = [
    (Spec("GET", "/healthz", "Liveness", "none"), healthz),
    (Spec("GET", "/readyz", "Readiness: the store answers and a policy is loaded", "none"), readyz),
    (Spec("GET", "/metrics", "Prometheus metrics (every worker's)", "none"), metrics),
    (Spec("GET", "/openapi.json", "This document", "none"), openapi_json),
]  # fmt: skip
