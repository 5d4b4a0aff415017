"""The app factory: one Service (store + snapshots) behind starlette routes."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware

from api.http import (
    authzen,
    console,
    decisions,
    drafts,
    keys,
    logexplain,
    ops,
    policy,
    resources,
    revisiondiff,
)
from api.http.approvalwatch import ApprovalWatch
from api.http.errors import HANDLERS, CatchAll
from api.http.lane import DecisionLane
from api.http.lifeline import end_with_supervisor
from api.http.openapi import openapi
from api.http.parts import CharterApp, Parts
from api.http.routing import Table, build
from api.http.session import ConsoleSession
from api.http.versionwatch import VersionWatch
from api.node_files import KEY_FILE_ENV, node_files
from api.service import memory
from api.service.core import Service
from api.service.groupcommit import GroupCommit
from api.service.metricsshare import SharedMetrics, directory_for
from api.service.schedulerun import Runner
from api.service.tokens import TokenCache, check_writes
from api.service.webhookdelivery import deliverer
from api.service.webhookoutbox import WebhookConfig, config_from_env
from engine.collector import freeze_large_builds
from policy.bundles import read_trusted_keys
from policy.secrets import Sealer, load_key_file
from policy.store.open import Target, open_store, parse

# The decision routes first: starlette tries routes in order, and they are the hot ones.
TABLE: Table = [
    *decisions.ROUTES,
    *ops.ROUTES,
    *policy.ROUTES,
    *revisiondiff.ROUTES,
    *drafts.ROUTES,
    *resources.ROUTES,
    *keys.ROUTES,
    *logexplain.ROUTES,
    *authzen.ROUTES,
]


@contextlib.asynccontextmanager
async def lifespan(app: CharterApp) -> AsyncIterator[None]:
    # The log's signed checkpoints: every minute while it serves, and once more as it
    # shuts down (policy/logseal.py).
    checkpointer = app.charter.service.checkpointer
    checkpointer.start()
    webhooks = app.charter.service.webhooks  # (`--approval-webhook`: their deliveries)
    if webhooks is not None:
        webhooks.start()
    # The schedules' runner: each serving process ticks, and each due time runs once
    # however many do (api/service/schedulerun.py).
    runner = Runner(app.charter.service, app.charter.service.schedule_tick_ms)
    runner.start()
    yield
    await run_in_threadpool(runner.stop)
    if webhooks is not None:
        await run_in_threadpool(webhooks.stop)
    await run_in_threadpool(checkpointer.stop)
    shared = app.charter.service.shared_metrics
    if shared is not None:  # a worker shutting down (its file stays, with its counts)
        shared.close()


def create_app(service: Service) -> CharterApp:
    app = CharterApp(
        routes=[*build(TABLE), *console.routes()],  # (the console's are not the API's)
        middleware=[Middleware(CatchAll), Middleware(ConsoleSession)],
        exception_handlers=dict(HANDLERS),
        lifespan=lifespan,
    )
    # A path is an endpoint's or none (404 `route-not-found`): starlette's default answers
    # one with a trailing slash more or less with a 307 and an empty body, its Location
    # built from the request's Host header.
    app.router.redirect_slashes = False
    tokens = TokenCache(service.store)
    check_writes(service.store)  # (each write reads its request's token again)
    service.read.on_tokens.append(tokens.forget)
    app.lanes = {
        spec.path: endpoint
        for spec, endpoint in decisions.ROUTES
        if isinstance(endpoint, DecisionLane)
    }
    versions = VersionWatch(service)
    app.charter = Parts(
        service,
        GroupCommit(service, tokens),
        tokens,
        openapi(TABLE),
        ApprovalWatch(service, versions),
        versions,
    )
    # A serving process (each of `--workers N`'s too) compiles the latest revision from
    # the start, off the request path, so it is usually ready (`/readyz`) by the time it
    # is probed and its first decisions do not wait for the compile.
    latest = service.snapshots.latest
    if latest:
        service.snapshots.compile_in_background(latest)
    return app


TURN_LIFETIME_ENV = "CHARTER_TURN_LIFETIME"  # `--turn-lifetime`, for `--workers N`' processes
MAX_POLICY_ENV = "CHARTER_MAX_POLICY_MIB"  # `--max-policy-mib`, likewise
TRUSTED_KEYS_ENV = "CHARTER_TRUSTED_KEYS"  # `--trusted-keys`: the file's text, likewise
WEBHOOKS_ENV = "CHARTER_APPROVAL_WEBHOOKS"  # `--approval-webhook`s and their backoff, likewise
SCHEDULE_TICK_ENV = "CHARTER_SCHEDULE_TICK"  # `--schedule-tick`, likewise


def open_service(
    db: str | Path | Target,
    *,
    shared: bool = False,
    turn_lifetime: int | None = None,
    max_policy_mib: int | None = None,
    key_file: str | Path | None = None,
    webhooks: WebhookConfig | None = None,
    schedule_tick: int | None = None,
) -> Service:
    """`db`: what `--db` names (a path or a URL, policy/store/open.py); `shared`: one of
    several processes serving it (`charter serve --workers N`); `turn_lifetime`: seconds
    an admitted turn runs (default: an hour); `max_policy_mib`: the most text a new
    revision may hold, in MiB (default: 16); `key_file`: the sealing key's file (default:
    beside an SQLite database; required for a server-backed store: api/node_files.py);
    `webhooks`: the URLs the approvals' events are delivered to (`--approval-webhook`);
    `schedule_tick`: seconds between the schedules' runner's looks (default: 10)."""
    memory.limit_arenas()  # before the store's and the compiles' threads start
    target = db if isinstance(db, Target) else parse(db)
    files = node_files(target, key_file)
    # A database kept by a server is shared whatever this node's `--workers`: other nodes
    # write it too.
    store = open_store(target, shared=shared or target.path is None)
    try:
        store.serving()  # (SQLite: WAL checkpoints on a thread of their own, off commits)
        service = Service(store, Sealer(load_key_file(files.key)))
        service.keys.ensure()  # (the signing key, made by the first process to start)
    except BaseException:
        store.close()
        raise
    if turn_lifetime is not None:  # seconds (`charter serve --turn-lifetime`)
        if turn_lifetime < 1:  # (0 would end every turn as it began)
            raise ValueError(f"a turn's lifetime is at least a second, not {turn_lifetime}")
        service.turn_lifetime_ms = turn_lifetime * 1000
    if webhooks is not None and webhooks.urls:
        service.webhooks = deliverer(
            store, service.sealer, service.keys, service.read, webhooks, service.metrics
        )
    if schedule_tick is not None:  # seconds (`charter serve --schedule-tick`)
        if schedule_tick < 1:
            raise ValueError(f"a schedule tick is at least a second, not {schedule_tick}")
        service.schedule_tick_ms = schedule_tick * 1000
    if max_policy_mib is not None:  # (`charter serve --max-policy-mib`)
        if max_policy_mib < 1:
            raise ValueError(f"a policy's cap is at least 1 MiB, not {max_policy_mib}")
        service.max_policy_bytes = max_policy_mib << 20
    if shared:
        try:
            service.shared_metrics = SharedMetrics(files.prefix, service.metrics)
        except OSError as exc:
            # (a full disk, say: its blocks are allocated up front) A worker that cannot
            # keep its counter file serves all the same, and its /metrics shows its own
            # counts alone: failing would only have uvicorn start it again, to fail again.
            why = (exc.strerror or type(exc).__name__).lower()
            sys.stderr.write(
                f"charter: worker {os.getpid()} counts alone: cannot keep its counter file "
                f"in `{directory_for(files.prefix)}`: {why}\n"
            )
    return service


def app_from_env() -> Starlette:
    """For `uvicorn --factory api.http.app:app_from_env` (what `charter serve` runs)."""
    end_with_supervisor()
    lifetime = os.environ.get(TURN_LIFETIME_ENV)
    cap = os.environ.get(MAX_POLICY_ENV)
    db = os.environ.get("CHARTER_DB", "charter.db")
    hooks = os.environ.get(WEBHOOKS_ENV)
    tick = os.environ.get(SCHEDULE_TICK_ENV)
    service = open_service(
        db, shared=True, turn_lifetime=int(lifetime) if lifetime else None,
        max_policy_mib=int(cap) if cap else None, key_file=os.environ.get(KEY_FILE_ENV),
        webhooks=None if hooks is None else config_from_env(hooks),
        schedule_tick=int(tick) if tick else None,
    )  # fmt: skip
    trusted = os.environ.get(TRUSTED_KEYS_ENV)
    if trusted is not None:  # (read and checked by `charter serve` before it started us)
        service.trusted = read_trusted_keys(trusted)
    app = create_app(service)
    tune_gc()
    return app


def tune_gc() -> None:
    """For a serving process, once its app is built: what exists now (the compiled
    policy, the grammar, the modules) is moved out of the collector's sight, and the
    youngest generation is collected every 50,000 allocations instead of 700, so a
    request's short-lived objects mostly die before a collection has to look at them (a
    batch of 100 decisions spent about a seventh of its time in the collector). A policy
    compiled later is frozen the same way when it is large (engine/collector.py)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    freeze_large_builds()
