"""Decisions, the log, tool listing, fit checks and turns."""

from __future__ import annotations

import asyncio
import importlib
import json
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from api import records as r
from api.http import answers as a
from api.http import models as m
from api.http.auth import may_decide, require_admin, require_decide
from api.http.body import body
from api.http.lane import DecisionLane
from api.http.logfilter import MAX_SCAN, LogFilter, log_filter
from api.http.logfilter import NAMES as LOG_FILTERS
from api.http.pagination import int_query
from api.http.parts import service_of
from api.http.routing import JSONResponse, Spec, Table, json_response, path_ids
from api.service import costs
from api.service.core import Service
from api.service.encoding import dumps
from api.service.errors import ServiceError
from api.service.fitcheck import TIMEOUT_MS
from api.service.logrows import log_view, reasons_resolver
from api.service.resources import admit_turn
from api.service.seedgrants import grants_of, narrowed_listing
from api.service.snapshots import NotCompiled
from api.service.solver import check_async, key_of
from engine.compile import Snapshot
from policy.diagnostics import CharterError
from policy.store import Damaged, StoreDamaged

MAX_LOG_PAGE = 1000
# A page's decisions stop before the one that would take their JSON past this many bytes,
# but for a first one that is larger alone: 1,000 rows with an argument of 1 MB each made
# one response of 2 GB (a row's arguments are answered as `args` and `final_args`), built
# and sent on the event loop. The next page starts after the last decision given
# (`next_after_seq`), as after a page cut by `limit`.
MAX_LOG_PAGE_BYTES = 4 << 20
# The tool listings made, per compiled snapshot and profile: the JSON of `tools`. A
# listing asks z3 several questions per tool that is neither allowed nor denied outright
# (25-190 ms for the 5,066 tools of the benchmark's workspace, held on the event loop,
# for every request of a `decide` token), and a snapshot never changes. At most
# MAX_LISTINGS profiles a snapshot (a listing of 5,066 tools is about 260 KB).
MAX_LISTINGS = 64
LISTING_MS = 10_000  # what z3 may take over one listing (`_made`)
_LISTINGS: weakref.WeakKeyDictionary[Snapshot, dict[str, bytes]] = weakref.WeakKeyDictionary()
_LISTINGS_LOCK = threading.Lock()
# The listings not made yet run on a thread of their own, one at a time (they take z3's
# one lock in turn anyway): on starlette's shared pool of 40 threads, 40 of them waiting
# for that lock left none for the management requests, the log's pages and another
# worker's revision being compiled, which every decision on it awaits. (Listings of one
# profile asked together are made once: the others find it made when their turn comes.)
# `POST /v1/fit` waits for its turn without a thread, and its check runs in a process of
# its own (api.service.solver).
_SOLVER_THREAD = ThreadPoolExecutor(1, thread_name_prefix="charter-solver")
T = TypeVar("T")
# Compiles of a revision another process uploaded while a turn was being admitted, off
# the event loop, before one is compiled on it (each found yet another upload).
MAX_TURN_COMPILES = 3


async def read_log(request: Request) -> Response:
    require_admin(request)
    after = int_query(request, "after_seq", 0, minimum=0)
    limit = int_query(request, "limit", 100, minimum=1, maximum=MAX_LOG_PAGE)
    wanted = log_filter(request)
    # Built in a thread: reading and encoding up to MAX_LOG_PAGE_BYTES takes a while,
    # and the event loop serves decisions meanwhile.
    page = await run_in_threadpool(_log_page, service_of(request), after, limit, wanted)
    return JSONResponse(page)


_SCAN_CHUNK = 500  # rows a filtered page reads from the store at a time


def _log_page(service: Service, after: int, limit: int, wanted: LogFilter) -> bytes:
    budget = MAX_LOG_PAGE_BYTES
    resolve = reasons_resolver(service)
    parts: list[bytes] = []
    size = 0
    last = after
    scanned = 0
    while True:
        # The store stops at the budget in stored bytes, which a row's answer never has
        # fewer of (its reasons are stored by reference, its final arguments as what they
        # add), so no more than a page's worth is read; the answers are then cut by their
        # own size. A filtered page reads on in chunks (api/http/logfilter.py).
        chunk = min(_SCAN_CHUNK, MAX_SCAN - scanned) if wanted.active else limit
        rows = service.store.read_decisions(last, chunk, budget)
        for seq, row in rows:
            entry = _entry(seq, row, resolve)
            end = row.last_seq if isinstance(row, Damaged) else seq
            scanned += 1
            if wanted.matches(entry):
                part = dumps(entry)
                if parts and size + len(part) > budget:
                    return _page(parts, last)
                parts.append(part)
                size += len(part) + 1
            last = end
            if len(parts) >= limit:
                return _page(parts, last)
        if not wanted.active or not rows or scanned >= MAX_SCAN:
            return _page(parts, last)


def _page(parts: list[bytes], last: int) -> bytes:
    return b'{"decisions":[%s],"next_after_seq":%d}' % (b",".join(parts), last)


def _entry(seq: int, row: bytes | Damaged, resolve: Callable[[str], Any]) -> dict[str, Any]:
    """A decision of the page, or in its place what is damaged there: a row that fails
    its checksum, is missing, or does not decode is never served as a decision."""
    if isinstance(row, Damaged):
        return _damaged(row)
    try:
        return log_view(seq, row, resolve)
    except StoreDamaged as exc:  # (its reasons' record)
        return _damaged(Damaged(seq, seq, "reasons-damaged", f"{exc.what}: {exc.why}"))
    except Exception as exc:  # a row that matches its checksum and still does not decode
        detail = f"it does not decode ({type(exc).__name__})"
        return _damaged(Damaged(seq, seq, "undecodable", detail))


def _damaged(row: Damaged) -> dict[str, Any]:
    return {"seq": row.seq, "last_seq": row.last_seq, "damaged": row.why, "detail": row.detail}


async def _current(service: Service) -> Snapshot:
    """The latest revision's snapshot; one another process uploaded and this one has not
    compiled yet is compiled on a worker thread, not on the event loop."""
    try:
        return service.snapshots.current(compile=False)
    except NotCompiled:
        return await run_in_threadpool(service.current)


def _engine(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ServiceError("unavailable", f"`{module}` is not available") from None


def _listed(snapshot: Snapshot, profile: str) -> bytes | None:
    with _LISTINGS_LOCK:
        return _LISTINGS.get(snapshot, {}).get(profile)


def _tools_json(snapshot: Snapshot, profile: str, timeout_ms: int) -> bytes:
    listing = _engine("engine.listing").list_tools(snapshot, profile, timeout_ms)
    return dumps([item.to_json() for item in listing])


def _made(snapshot: Snapshot, profile: str) -> bytes:
    """The listing, made in a process of its own that is killed at LISTING_MS (z3 heeds
    no deadline while it takes in long string literals, and a role an agent made may hold
    them); past it, or out of memory, the rules as written, made here without z3: as
    exact, and longer to read."""
    isolated = _engine("engine.fit.isolated")
    kind, made = isolated.call(_tools_json, snapshot, profile, timeout_ms=LISTING_MS)
    if kind != "ok":
        made = _tools_json(snapshot, profile, timeout_ms=0)
    assert isinstance(made, bytes)
    return made


def tool_listing(snapshot: Snapshot, profile: str) -> bytes:
    """The JSON of `profile`'s tools on `snapshot`, made once (on the solver's thread:
    z3 may take a while)."""
    found = _listed(snapshot, profile)
    if found is not None:  # (made meanwhile by another request)
        return found
    made = _made(snapshot, profile)
    with _LISTINGS_LOCK:
        kept = _LISTINGS.setdefault(snapshot, {})
        if len(kept) >= MAX_LISTINGS:
            kept.pop(next(iter(kept)))
        kept[profile] = made
    return made


async def tools_of(service: Service, agent_id: str) -> tuple[Snapshot, str, bytes]:
    """(the latest revision's snapshot, the agent's profile, the JSON of its tools): the
    listing `GET /v1/agents/{id}/tools` answers (and AuthZEN's action search reads)."""
    agent = service.agent(agent_id)
    snapshot = await _current(service)
    profile = service.agent_profile(agent, snapshot)
    tools = _listed(snapshot, profile)
    if tools is None:
        tools = await _on_solver_thread(tool_listing, snapshot, profile)
    grants = grants_of(agent, service.find_agent)
    if grants is not None:  # (an agent with a Seed definition in its chain)
        tools = dumps(narrowed_listing(grants, snapshot, json.loads(tools)))
    return snapshot, profile, tools


async def list_tools(request: Request) -> Response:
    actor = require_decide(request)
    agent_id = path_ids(request)["id"]
    may_decide(actor, (agent_id,))
    snapshot, profile, tools = await tools_of(service_of(request), agent_id)
    head = dumps({"agent": agent_id, "profile": profile, "revision": snapshot.revision})
    return JSONResponse(b'%s,"tools":%s}' % (head[:-1], tools))


async def _on_solver_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(
        _SOLVER_THREAD, lambda: fn(*args, **kwargs)
    )


async def fit(request: Request) -> Response:
    actor = require_decide(request)
    item = await body(request, m.FitRequest)
    may_decide(actor, (item.agent,))
    service = service_of(request)
    agent = service.agent(item.agent)
    snapshot = await _current(service)
    caller = service.agent_profile(agent, snapshot)
    engine = _engine("engine.fit")
    if item.source is not None:
        try:
            result = await check_async(
                key_of(actor), engine.fit_source, snapshot, caller, item.source,
                kind=item.kind, timeout_ms=TIMEOUT_MS,
            )  # fmt: skip
        except CharterError as exc:
            raise ServiceError(
                "policy-invalid", "the source does not check",
                diagnostics=[d.to_json() for d in exc.diagnostics],
            ) from None  # fmt: skip
    elif item.profile is not None:
        if item.profile not in snapshot.served.profiles:
            raise ServiceError("profile-not-found", f"profile `{item.profile}` not found")
        result = await check_async(
            key_of(actor), engine.fit_profile, snapshot, caller, snapshot, item.profile,
            timeout_ms=TIMEOUT_MS,
        )  # fmt: skip
    else:
        raise ServiceError("fit-needs-candidate", "give `source` or `profile` to check")
    return json_response({"revision": snapshot.revision, **result.to_json()})


async def turns(request: Request) -> Response:
    actor = require_decide(request)
    item = await body(request, m.TurnRequest)
    may_decide(actor, (item.agent,))
    service = service_of(request)  # (brought up to date by the token check)
    for _ in range(MAX_TURN_COMPILES):
        snapshot = await _current(service)
        try:
            turn = admit_turn(service, item.agent, item.thread, snapshot, compile=False)
        except NotCompiled:  # another process uploaded meanwhile: compiled off the loop
            continue
        return json_response(turn, 201)
    # (uploads keep coming: compiled here, as any other caller would)
    return json_response(admit_turn(service, item.agent, item.thread, service.current()), 201)


async def report_cost(request: Request) -> Response:
    """`POST /v1/decisions/{id}/cost`: as deciding for the decision's agent may (api.service.costs)."""
    actor = require_decide(request)
    decision_id = path_ids(request)["id"]
    item = await body(request, m.CostReport)
    service = service_of(request)

    def may_report(agent: str) -> None:
        may_decide(actor, (agent,))

    record = await run_in_threadpool(
        costs.report_cost, service, decision_id, item.seq, item.amount, actor.token_id, may_report
    )
    return json_response(record, 201)


ROUTES: Table = [
    (Spec("POST", "/v1/decisions", "Decide one call", "decide",
          m.DecisionRequest, r.DecisionResponse, errors=(404, 409, 503), operation="decide",
          query=("receipt",), tag="decisions"), DecisionLane(batch=False)),
    (Spec("POST", "/v1/decisions/batch", "Decide up to 1,000 calls", "decide",
          m.BatchRequest, a.BatchResponse, errors=(404, 409, 503), operation="decideBatch",
          query=("receipt",), tag="decisions"), DecisionLane(batch=True)),
    (Spec("GET", "/v1/decisions", "Read the decision log by sequence (at most 4 MiB a page)",
          "admin", None, a.LogPage, query=("after_seq", "limit", *LOG_FILTERS),
          operation="readDecisionLog",
          tag="decisions"), read_log),
    (Spec("POST", "/v1/decisions/{id}/cost", "Charge an allowed call's cost, once it ran",
          "decide", m.CostReport, a.CostCharged, 201, errors=(404, 409),
          operation="reportCost", tag="decisions"), report_cost),
    (Spec("GET", "/v1/agents/{id}/tools", "List the tools an agent may call", "decide",
          None, a.ToolListing, errors=(409, 503), operation="listAgentTools",
          tag="decisions"), list_tools),
    (Spec("POST", "/v1/fit", "Check that a role or profile fits an agent's access", "decide",
          m.FitRequest, a.FitAnswer, errors=(404, 409, 503), operation="checkFit",
          tag="decisions"), fit),
    (Spec("POST", "/v1/turns", "Admit a turn, pinned to the latest revision", "decide",
          m.TurnRequest, r.Turn, 201, errors=(404, 409), operation="admitTurn",
          tag="decisions"), turns),
]  # fmt: skip
