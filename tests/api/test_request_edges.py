"""Protocol edges of reading a request (api/http/body.py, calls.py, pagination.py): what
is decided, fit-checked and logged is what is done and stored, and an edge is a 4xx
problem with a stable code, never a 500, with nothing written."""

from __future__ import annotations

import asyncio
import logging
from decimal import Decimal
from typing import Any

import pytest

from api.http.app import create_app
from tests.api.conftest import POLICY, Harness, code_of


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


# The exact value of the double nearest 0.1: a float holds it exactly (so the readers keep
# it a float), but the shortest text of that float is `0.1`, a smaller number.
DOUBLE_TENTH = "0.1000000000000000055511151231257827021181583404541015625"
COST_REVIEW = """
hook review-costly-threads on threads.create where args.max_cost > 0.1 {
  deny "threads over 0.1 USD need a human"
}
profile costly {
  roles manager
  hooks review-costly-threads
}
"""


def test_an_amount_a_double_holds_exactly_keeps_its_value(live: Any, harness: Harness) -> None:
    """A `max_cost` or a budget's `amount` whose text is exactly a double's value was
    rebuilt by the models from that float's shortest text: `DOUBLE_TENTH` became 0.1, so
    `args.max_cost > 0.1` was decided false, and 0.1 stored, for a number over 0.1."""
    admin = harness.auth()
    put = live.put("/v1/policy", content=POLICY + COST_REVIEW, headers=admin)
    assert put.status_code == 201, put.text
    harness.add_agent("spender", "costly")
    agent = harness.auth(harness.token_for("spender"))
    body = b'{"max_cost": %s}' % DOUBLE_TENTH.encode()
    refused = live.post("/v1/threads", content=body, headers=agent)
    assert code_of(refused) == (403, "denied-by-policy"), refused.text
    logged = live.get("/v1/decisions", headers=admin)
    assert f'"max_cost":{DOUBLE_TENTH}' in logged.text  # the arguments decided
    made = live.post("/v1/threads", content=b'{"agent": "a1", "max_cost": %s}'
                     % DOUBLE_TENTH.encode(), headers=admin)  # fmt: skip
    assert made.status_code == 201, made.text
    assert made.json()["max_cost"] == DOUBLE_TENTH
    tiny = "0.000000000931322574615478515625"  # 2**-30: shortest text 9.313225746154785e-10
    patch = b'{"budget": {"amount": %s, "period": "24h"}}' % tiny.encode()
    changed = live.patch("/v1/agents/a1", content=patch, headers=admin)
    assert changed.status_code == 200, changed.text
    assert Decimal(changed.json()["budget"]["amount"]) == Decimal(2**-30)
