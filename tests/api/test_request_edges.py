"""Protocol edges of reading a request (api/http/body.py, calls.py, pagination.py): what
is decided, fit-checked and logged is what is done and stored, and an edge is a 4xx
problem with a stable code, never a 500, with nothing written."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from api.http.app import create_app
from tests.api.conftest import Harness


def _send(
    app: Any, harness: Harness, method: str, path: str, messages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One request through the app's ASGI interface, its body as `messages`: what it sent."""
    headers = [(b"authorization", f"Bearer {harness.admin}".encode()),
               (b"content-type", b"application/json")]  # fmt: skip
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
             "root_path": "", "query_string": b"", "headers": headers,
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}  # fmt: skip
    pending = list(messages)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/v1/identities"), ("POST", "/v1/fit"), ("PUT", "/v1/policy"),
     ("PATCH", "/v1/agents/a1")],
)  # fmt: skip
def test_a_client_gone_before_its_body_came_is_no_500(
    harness: Harness, caplog: pytest.LogCaptureFixture, method: str, path: str
) -> None:
    """Every endpoint, as the decision lane: a client that went away while its body was
    coming is not answered and nothing is written. Outside the lane it was logged as an
    unexpected ClientDisconnect and counted as a 500 `internal-error` in /metrics."""
    app = create_app(harness.service)
    revision = harness.service.snapshots.latest
    keys = harness.service.store.page("secrets", 0, 10)
    half = {"type": "http.request", "body": b'{"label": "x",', "more_body": True}
    with caplog.at_level(logging.WARNING, logger="charter.http"):
        sent = _send(app, harness, method, path, [half, {"type": "http.disconnect"}])
    assert sent == []
    assert harness.service.metrics.rejected == {}
    assert caplog.records == []
    assert harness.service.store.page("secrets", 0, 10) == keys
    assert harness.service.snapshots.latest == revision
