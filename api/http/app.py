"""The app factory: one Service (store + snapshots) behind starlette routes."""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware

from api.http import decisions, ops, policy, resources
from api.http.commit import GroupCommit
from api.http.errors import CatchAll, http_error, service_error
from api.http.routing import Table, build
from api.service.core import Service
from api.service.errors import ServiceError
from api.service.tokens import TokenCache
from policy.secrets import Sealer, load_key
from policy.store.sqlite import SqliteStore

# The decision routes first: starlette tries routes in order, and they are the hot ones.
TABLE: Table = [*decisions.ROUTES, *ops.ROUTES, *policy.ROUTES, *resources.ROUTES]


def create_app(service: Service) -> Starlette:
    app = Starlette(
        routes=build(TABLE),
        middleware=[Middleware(CatchAll)],
        exception_handlers={ServiceError: service_error, HTTPException: http_error},
    )
    tokens = TokenCache(service.store)
    service.on_epoch.append(tokens.forget)
    app.state.service = service
    app.state.commit = GroupCommit(service, tokens)
    app.state.tokens = tokens
    app.state.openapi = ops.openapi(TABLE)
    return app


def open_service(db: str | Path) -> Service:
    store = SqliteStore(db)
    store.checkpoint_in_background()  # a serving process: keep WAL checkpoints off commits
    return Service(store, Sealer(load_key(db)))


def app_from_env() -> Starlette:
    """For `uvicorn --factory api.http.app:app_from_env` (what `charter serve` runs)."""
    import os

    from api.cli_serve import tune_gc

    app = create_app(open_service(os.environ.get("CHARTER_DB", "charter.db")))
    tune_gc()
    return app
