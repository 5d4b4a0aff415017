"""`make test` replays what `make fuzz` found, without atheris or schemathesis:

- every input saved under tests/fuzz/regressions/<target>/ (a failure a fuzz run found,
  kept once fixed) and the first seed of each target from fixtures/, through the target
  itself (tests/fuzz/targets.py);
- every request saved under tests/fuzz/regressions/http-api/ (one schemathesis sent to a
  live server, whose answer failed a check), and two seeds of that form (a refused
  write; the approvals' event stream, whose answer never ends), sent with the admin's
  token to a service on a real SQLite file (an event stream read to its first part:
  tests/fuzz/exchange.py): never a 5xx, a refusal catalogued problem+json that writes
  nothing.

(The hypothesis properties' saved failures replay in their own tests: tests/conftest.py.)
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from api.http.app import create_app
from api.http.codes import CODES
from tests.api.conftest import Harness, make_harness
from tests.api.fingerprint import fingerprint, reader
from tests.fuzz.exchange import exchange
from tests.fuzz.targets import REGRESSIONS, TARGETS, saved_inputs

CASES = [
    pytest.param(name, path.read_bytes(), id=f"{name}/{path.name}")
    for name in TARGETS
    for path in saved_inputs(name)
]
SEEDS = [pytest.param(name, TARGETS[name].seeds()[0], id=f"{name}/seed") for name in TARGETS]


@pytest.mark.parametrize(("target", "data"), CASES + SEEDS)
def test_saved_inputs_and_seeds_pass(target: str, data: bytes) -> None:
    """Each target raises when its property fails on the input (tests/fuzz/targets.py)."""
    assert data
    TARGETS[target].run(data)


# A request of the saved form: an agent whose budget's amount is an empty string (422).
HTTP_SEED = {
    "method": "POST",
    "path": "/v1/agents",
    "content_type": "application/json",
    "body_base64": base64.b64encode(
        b'{"name": "x", "profile": "support", "budget": {"amount": "", "period": "total"}}'
    ).decode(),
}
# A request of a stream operation: its answer is read to its first part.
HTTP_STREAM_SEED = {"method": "GET", "path": "/v1/approvals/events", "body_base64": None}
HTTP_CASES = [
    pytest.param(json.loads(path.read_text()), id=f"http-api/{path.name}")
    for path in sorted((REGRESSIONS / "http-api").glob("*.json"))
] + [
    pytest.param(HTTP_SEED, id="http-api/seed"),
    pytest.param(HTTP_STREAM_SEED, id="http-api/stream-seed"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Harness, TestClient]]:
    harness = make_harness(tmp_path_factory.mktemp("replay"))
    with TestClient(create_app(harness.service), raise_server_exceptions=False) as client:
        yield harness, client
    harness.service.store.close()


@pytest.mark.parametrize("case", HTTP_CASES)
def test_saved_requests_are_answered_without_5xx(
    served: tuple[Harness, TestClient], case: dict[str, Any]
) -> None:
    harness, client = served
    headers = harness.auth()
    if case.get("content_type"):
        headers["Content-Type"] = case["content_type"]
    body = base64.b64decode(case["body_base64"]) if case.get("body_base64") else None
    conn = reader(str(harness.db))
    try:
        before = fingerprint(conn)
        assert client.portal is not None
        answer = client.portal.call(
            exchange, client.app, case["method"], case["path"], headers, body, client.app_state
        )
        after = fingerprint(conn)
    finally:
        conn.close()
    assert answer.status, "no answer started"
    assert answer.status < 500, answer.text
    if answer.status >= 400:
        code = CODES.get(json.loads(answer.body)["code"])
        assert code is not None and code.status == answer.status, answer.text
        assert before == after, answer.text
    if case == HTTP_STREAM_SEED:
        assert answer.streamed and answer.status == 200 and answer.body.startswith(b"retry:")
