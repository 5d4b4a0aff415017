"""`charter webhooks list` and `retry`, beside the harness's serving service (SQLite and
PostgreSQL): a delivery given up on is listed (where it goes, never its path), queued
again by `retry`, and delivered then."""

from __future__ import annotations

import json

import httpx
import pytest

from api.cli import main
from api.http.app import create_app
from api.service.webhookoutbox import FAILED, KIND, PENDING, now_ms
from tests.api.conftest import BOTH, Harness, LiveServer
from tests.api.test_webhookdelivery import _deploying, _hooks, _pause
from tests.api.webhookreceiver import PATH, Receiver

STORES = BOTH


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


def test_a_delivery_given_up_on_is_listed_and_queued_again(
    harness: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = _deploying(harness)
    db = str(harness.db)
    with Receiver() as receiver:
        hooks = _hooks(harness.service, receiver.url, attempts=1)
        with LiveServer(create_app(harness.service)) as url, httpx.Client(base_url=url) as live:
            approval = _pause(live, agent)
        event = f"approval.opened:{approval}"
        assert _run(capsys, "webhooks", "list", "--db", db).splitlines() == [
            f"pending  {event}  to {receiver.url.removesuffix(PATH)}: 0 attempt(s)"
        ]
        (claim,), _ = hooks.outbox.claim("t", now_ms(), 16)
        assert hooks.outbox.settle(claim, "HTTP 503", now_ms()) == FAILED  # (its one attempt)
        listed = _run(capsys, "webhooks", "list", "--db", db, "--failed", "--format", "json")
        [shown] = json.loads(listed)["deliveries"]
        assert shown["event"] == event and shown["status"] == "failed"
        assert (shown["attempts"], shown["last"], shown["due"]) == (1, "HTTP 503", None)
        assert PATH not in listed and shown["target"] == receiver.url.removesuffix(PATH)
        assert _run(capsys, "webhooks", "retry", "--db", db) == (
            "1 failed delivery(ies) queued again\n"
        )
        [again] = list(harness.service.store.scan(KIND, tag=PENDING))
        assert (
            again.body["attempts"] == 0 and list(harness.service.store.scan(KIND, tag=FAILED)) == []
        )
        hooks.start()
        try:
            [got] = receiver.wait_for(1)
        finally:
            hooks.stop()
    assert got.headers["webhook-id"] == event
    assert _run(capsys, "webhooks", "list", "--db", db) == "no delivery is pending or failed\n"
    assert _run(capsys, "webhooks", "retry", "--db", db) == "0 failed delivery(ies) queued again\n"


def test_a_database_that_is_not_there_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["webhooks", "list", "--db", "/nonexistent/x.db"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "no database file at `/nonexistent/x.db`" in err
