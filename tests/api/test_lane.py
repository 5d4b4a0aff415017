"""The decision lane: served ahead of starlette's layers, answering as the app would."""

from __future__ import annotations

import json
from typing import Any

import pytest

from api.http.app import create_app
from api.http.lane import DecisionLane
from tests.api.conftest import Harness, asgi

CALL = {"agent": "a1", "tool": "mail.send",
        "args": {"to": "bob@example.com", "subject": "hi", "body": "hello"}}  # fmt: skip


def _answer(sent: list[dict[str, Any]]) -> tuple[int, dict[str, str], Any]:
    start, body = sent
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, json.loads(body["body"])


def test_the_decision_paths_are_served_by_their_lanes(harness: Harness) -> None:
    app = create_app(harness.service)
    assert set(app.lanes) == {"/v1/decisions", "/v1/decisions/batch"}
    assert all(isinstance(lane, DecisionLane) for lane in app.lanes.values())
    status, headers, body = _answer(asgi(app, harness, "/v1/decisions", json.dumps(CALL).encode()))
    assert (status, body["effect"], body["seq"]) == (200, "allow", 1)
    assert headers == {"content-length": str(len(json.dumps(body, separators=(",", ":")))),
                       "content-type": "application/json"}  # fmt: skip
    batch = json.dumps({"calls": [CALL, {**CALL, "tool": "billing.refund"}]}).encode()
    status, _, body = _answer(asgi(app, harness, "/v1/decisions/batch", batch))
    assert status == 200
    assert [(d["effect"], d["seq"]) for d in body["decisions"]] == [("allow", 2), ("deny", 3)]


def test_under_a_root_path_the_router_serves_the_same_lane(harness: Harness) -> None:
    """A request the lanes do not take (under a `root_path`) goes through starlette's
    router to the same endpoint: the same answer, logged the same way."""
    app = create_app(harness.service)
    raw = json.dumps(CALL).encode()
    direct = _answer(asgi(app, harness, "/v1/decisions", raw))
    routed = _answer(asgi(app, harness, "/v1/decisions", raw, root_path="/svc"))
    assert (direct[0], routed[0]) == (200, 200)
    for answer in (direct, routed):
        del answer[2]["id"], answer[2]["seq"]
    assert routed == direct
    assert [seq for seq, _ in harness.service.store.read_decisions(0, 10)] == [1, 2]


def test_other_methods_on_the_lanes_paths_go_through_the_router(harness: Harness) -> None:
    app = create_app(harness.service)
    status, _, body = _answer(asgi(app, harness, "/v1/decisions/batch", b"", method="PUT"))
    assert (status, body["code"]) == (405, "method-not-allowed")
    status, _, body = _answer(asgi(app, harness, "/v1/decisions", b"", method="GET"))
    assert (status, body["decisions"]) == (200, [])


@pytest.mark.parametrize("path", ["/v1/decisions", "/v1/decisions/batch"])
def test_an_unexpected_error_in_a_lane_is_the_catch_alls_500(harness: Harness, path: str) -> None:
    app = create_app(harness.service)

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret-in-message")

    harness.service.store.append_decisions = boom  # type: ignore[method-assign]
    raw = json.dumps(CALL if path == "/v1/decisions" else {"calls": [CALL]}).encode()
    status, headers, body = _answer(asgi(app, harness, path, raw))
    assert (status, body["code"]) == (500, "internal-error")
    assert headers["content-type"] == "application/problem+json"
    assert "secret" not in json.dumps(body)
    assert harness.service.metrics.rejected == {(500, "internal-error"): 1}
    assert harness.service.store.last_seq() == 0


def test_a_client_gone_before_its_body_came_is_not_answered(harness: Harness) -> None:
    app = create_app(harness.service)
    half = {"type": "http.request", "body": b'{"agent": "a1",', "more_body": True}
    sent = asgi(app, harness, "/v1/decisions", b"", messages=[half, {"type": "http.disconnect"}])
    assert sent == []
    assert harness.service.store.last_seq() == 0
    assert harness.service.metrics.rejected == {}
