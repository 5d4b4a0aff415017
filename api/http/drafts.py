"""Drafts: the policy playground's workspace, sent whole and never stored. Check it (its
diagnostics and lints), decide a call against it with the trace, run its test blocks,
check that one of its roles fits one of its profiles; the live policy, the decision log
and the revisions stay as they are.

An admin's, as `PUT /v1/policy` is: a draft is policy text. Its body is read as an
upload's is (at most 1 MiB, its file paths by the same rules: api.http.policy), and its
files are checked and compiled on a worker thread, off the event loop; a draft that does
not check is the upload's 422 `policy-invalid` with its diagnostics (but for `check`,
whose answer they are). The solver's parts run in a process of their own, in the
caller's turn at the solver (api.service.solver), as `POST /v1/fit`'s do.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from api.http import answers as a
from api.http import models as m
from api.http.auth import require_admin
from api.http.body import body
from api.http.parts import service_of
from api.http.policy import check_paths
from api.http.routing import Spec, Table, json_response
from api.service import drafts
from api.service.errors import ServiceError
from api.service.fitcheck import TIMEOUT_MS
from api.service.solver import call_async, check_async, key_of
from engine.decision import Request as Call
from policy.diagnostics import CharterError, error_count

D = TypeVar("D", bound=m.Draft)
T = TypeVar("T")


async def _read(request: Request, model: type[D]) -> tuple[str, D, list[tuple[str, str]]]:
    """(whose turn at the solver, the body, its files): an admin's draft, its paths
    named as an upload's must be."""
    actor = require_admin(request)
    item = await body(request, model)
    files = [(f.path, f.text) for f in item.files]
    check_paths(files)
    return key_of(actor), item, files


async def _checked(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on a worker thread; a draft that does not check is `policy-invalid`."""
    try:
        return await run_in_threadpool(fn, *args)
    except CharterError as exc:
        raise invalid(exc) from None


def invalid(exc: CharterError) -> ServiceError:
    return ServiceError(
        "policy-invalid", f"the draft has {error_count(exc.diagnostics)} error(s)",
        diagnostics=[d.to_json() for d in exc.diagnostics],
    )  # fmt: skip


async def check(request: Request) -> Response:
    key, _, files = await _read(request, m.Draft)
    service = service_of(request)
    try:
        ws = await run_in_threadpool(drafts.workspace, service, files)
    except CharterError as exc:  # (its answer: the errors, at their lines)
        found = [d.to_json() for d in exc.diagnostics]  # (in file order)
        return json_response({"checks": False, "diagnostics": found})
    try:
        kind, lints = await call_async(
            key, drafts.solver_lints, ws, timeout_ms=drafts.LINT_MS
        )  # fmt: skip
    except ServiceError as exc:  # (the solver is busy: the lints that need none)
        if exc.code != "solver-busy":
            raise
        kind = "busy"
    except Exception:  # (the lints' process failed: engine.fit.isolated.Failed)
        kind = "failed"
    if kind != "ok":  # cut short (`timeout`, `memory`, ...): the lints without the solver
        lints = await run_in_threadpool(drafts.plain_lints, ws)
    return json_response({"checks": True, "diagnostics": drafts.diagnostics(ws, lints)})


async def decide(request: Request) -> Response:
    _, item, files = await _read(request, m.DraftDecision)
    snapshot = await _checked(drafts.compiled, service_of(request), files)
    call = Call(item.profile, item.tool, item.args, item.context)
    return json_response(await run_in_threadpool(drafts.decide, snapshot, call))


async def test(request: Request) -> Response:
    _, item, files = await _read(request, m.DraftTests)
    snapshot = await _checked(drafts.compiled, service_of(request), files)
    return json_response(await run_in_threadpool(drafts.test, snapshot, item.coverage))


async def fit(request: Request) -> Response:
    key, item, files = await _read(request, m.DraftFit)
    ws = await _checked(drafts.workspace, service_of(request), files)
    if item.caller_profile not in ws.profiles:
        raise ServiceError(
            "profile-not-found", f"no profile `{item.caller_profile}` in the draft",
            help="profiles: " + (", ".join(sorted(ws.profiles)) or "none"),
        )  # fmt: skip
    if item.role not in ws.roles:
        raise ServiceError(
            "role-not-found", f"no role `{item.role}` in the draft",
            help="roles: " + (", ".join(sorted(ws.roles)) or "none"),
        )  # fmt: skip
    engine = _fit_engine()
    try:
        result = await check_async(
            key, engine.fit_role, ws, item.caller_profile, ws, item.role, timeout_ms=TIMEOUT_MS
        )  # fmt: skip
    except CharterError as exc:
        raise invalid(exc) from None
    return json_response(result.to_json())


def _fit_engine() -> Any:
    try:
        return importlib.import_module("engine.fit")
    except ImportError:
        raise ServiceError("unavailable", "`engine.fit` is not available") from None


ROUTES: Table = [
    (Spec("POST", "/v1/drafts/check", "Check a draft workspace: its diagnostics and lints",
          "admin", m.Draft, a.DraftChecked, operation="checkDraft",
          tag="drafts"), check),
    (Spec("POST", "/v1/drafts/decide", "Decide a call against a draft, with its trace",
          "admin", m.DraftDecision, a.DraftDecided, operation="decideDraft",
          tag="drafts"), decide),
    (Spec("POST", "/v1/drafts/test", "Run a draft's test blocks", "admin", m.DraftTests,
          a.DraftTested, operation="runDraftTests", tag="drafts"), test),
    (Spec("POST", "/v1/drafts/fit", "Check that a draft's role fits one of its profiles",
          "admin", m.DraftFit, a.DraftFitted, errors=(404, 503), operation="checkDraftFit",
          tag="drafts"), fit),
]  # fmt: skip
