"""`GET /v1/revisions/{n}/diff`: the semantic diff of revision `n` against another
(`?against=m`, default the one before), per profile what widened or narrowed, as
`charter diff --format json` answers it. An admin's, as the revisions' list is.

The revisions are checked (or taken compiled) on a worker thread; the comparison runs in
a process of its own in the caller's turn at the solver (api.service.solver), as a fit
check does, and is stopped past api.service.revisiondiff.TOTAL_MS."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from api.http import answers as a
from api.http.auth import require_admin
from api.http.pagination import query
from api.http.parts import service_of
from api.http.routing import Spec, Table, json_response, path_ids
from api.service import revisiondiff
from api.service.errors import ServiceError
from api.service.solver import call_async, key_of


def _number(raw: str | None, what: str, minimum: int) -> int | None:
    """`raw` as a revision number (1 to 18 ASCII digits, at least `minimum`), None when
    absent; else 400 `bad-revision`."""
    if raw is None or raw == "":
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18 or int(raw) < minimum:
        raise ServiceError(
            "bad-revision", f"{what} must be a revision number, from {minimum}",
            help="revisions count from 1 (GET /v1/revisions lists them); 0 is the empty "
            "policy before the first upload",
        )  # fmt: skip
    return int(raw)


async def diff(request: Request) -> Response:
    actor = require_admin(request)
    number = _number(str(path_ids(request)["n"]), "the path's `{n}`", 1)
    assert number is not None  # (a path's parameter is never empty)
    against = _number(query(request, "against"), "`against`", 0)
    if against is None:
        against = number - 1
    service = service_of(request)
    new = await run_in_threadpool(revisiondiff.workspace, service, number)
    old = await run_in_threadpool(revisiondiff.workspace, service, against)
    kind, answer = await call_async(
        key_of(actor), revisiondiff.compare, old, new, timeout_ms=revisiondiff.TOTAL_MS
    )  # fmt: skip
    if kind != "ok":
        raise ServiceError(
            "unavailable",
            f"the diff of revision {number} against {against} did not finish ({kind})",
            help="compare the two revisions' files with `charter diff OLD NEW`",
        )  # fmt: skip
    return json_response({"revision": number, "against": against, **answer})


ROUTES: Table = [
    (Spec("GET", "/v1/revisions/{n}/diff",
          "The semantic diff of a revision: per profile, what widened or narrowed", "admin",
          None, a.RevisionDiff, query=("against",), errors=(404, 409), operation="getRevisionDiff",
          tag="policy"), diff),
]  # fmt: skip
