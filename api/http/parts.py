"""What every handler reaches: the service, the group commit, the token cache and the
OpenAPI document, built once per app by `create_app`.

Kept as one slotted object on the app (`CharterApp.charter`) rather than in `app.state`:
starlette's State resolves each name through a Python `__getattr__` (about 0.4 µs), and
a decision request read two of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from api.http.approvalwatch import ApprovalWatch
from api.http.versionwatch import VersionWatch
from api.service.core import Service
from api.service.groupcommit import GroupCommit
from api.service.tokens import TokenCache, act_for


@dataclass(slots=True, frozen=True)
class Parts:
    service: Service
    commit: GroupCommit
    tokens: TokenCache
    openapi: dict[str, Any]
    approvals: ApprovalWatch
    versions: VersionWatch


class LaneApp(Starlette):
    """A starlette app that hands a POST to a path in `lanes` straight to that path's
    ASGI app, ahead of its own layers (the decision lanes, api.http.lane; the benchmark's
    ceiling serves a constant the same way). Every other request goes through them."""

    lanes: dict[str, ASGIApp]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # A request acts for no token until it is authorized (api.http.auth): a server
        # may start a request's task in the context of the one before it on its
        # connection (uvicorn does for a pipelined request), which acted for its own.
        act_for(None)
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            lane = self.lanes.get(scope["path"])
            if lane is not None:
                scope["app"] = self
                await lane(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


class CharterApp(LaneApp):
    charter: Parts


def parts_of(request: Request) -> Parts:
    found: Parts = request.scope["app"].charter
    return found


def service_of(request: Request) -> Service:
    return parts_of(request).service
