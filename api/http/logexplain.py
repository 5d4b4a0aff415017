"""`GET /v1/log/{seq}/explain`: the decision logged at `seq`, explained again against the
revision it was decided on (api.service.logexplain): its trace, what the engine decides,
whether that is the logged effect, or why the trace cannot be made from what the log
keeps. An admin's, as reading the log is."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from api.http import answers as a
from api.http.auth import require_admin
from api.http.parts import service_of
from api.http.routing import Spec, Table, json_response, path_ids
from api.service import logexplain
from api.service.errors import ServiceError


def _seq(raw: str) -> int:
    """The path's `{seq}`: 1 to 18 ASCII digits, else the log has no decision there."""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18 or int(raw) < 1:
        raise ServiceError(
            "decision-not-found", f"the decision log has no decision at seq `{raw[:40]}`",
            help="a decision's `seq` counts from 1 (GET /v1/decisions gives each one's)",
        )  # fmt: skip
    return int(raw)


async def explain(request: Request) -> Response:
    require_admin(request)
    seq = _seq(str(path_ids(request)["seq"]))
    # (a revision not compiled in this process is compiled here: off the event loop)
    return json_response(await run_in_threadpool(logexplain.explained, service_of(request), seq))


ROUTES: Table = [
    (Spec("GET", "/v1/log/{seq}/explain",
          "A logged decision explained again on its revision, with its trace", "admin",
          None, a.LoggedExplain, errors=(404,), operation="explainLoggedDecision",
          tag="decisions"), explain),
]  # fmt: skip
