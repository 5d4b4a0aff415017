"""A real service on a real SQLite file, served by uvicorn on loopback with the HTTP
protocol `charter serve` runs (tests/api/conftest.py's harness and LiveServer), once per
test module: the clients' tests ask it with real tokens."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from api.http.app import create_app
from tests.api.conftest import Harness, LiveServer, make_harness

# Agent `a1` (profile `support`) may send mail to @example.com and refund; a refund over
# 50 pauses for a person; nothing allows `mail.send` elsewhere (tests/api/conftest.py).
ALLOWED = ("mail.send", {"to": "bob@example.com", "subject": "hi", "body": "hello"})
DENIED = ("mail.send", {"to": "eve@elsewhere.net", "subject": "hi", "body": "hello"})
PAUSED = ("billing.refund", {"amount": 80})


@dataclass(frozen=True)
class Served:
    harness: Harness
    url: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    harness = make_harness(tmp_path_factory.mktemp("client"))
    try:
        with LiveServer(create_app(harness.service)) as url:
            yield Served(harness, url)
    finally:
        harness.service.store.close()
