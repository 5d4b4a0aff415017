"""The approvals' webhooks, delivered: a real receiver on loopback, the harness's service
served by uvicorn, on SQLite and PostgreSQL; each event signed with the key `GET /v1/keys`
publishes, without its secret arguments, delivered again after a failure with the same
id, once whatever the number of processes delivering, and after a restart."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.http.app import create_app
from api.records import Approval
from api.service.core import Service
from api.service.redaction import REDACTED
from api.service.webhookdelivery import Deliverer, deliverer, post
from api.service.webhookoutbox import (
    FAILED,
    KIND,
    LEASE_MS,
    PENDING,
    Backoff,
    WebhookConfig,
    now_ms,
)
from api.service.webhooksign import verify
from policy.serverkeys import from_jwks
from tests.api.conftest import BOTH, POLICY, Harness, LiveServer, opened_again
from tests.api.webhookreceiver import PATH, Received, Receiver, self_signed

STORES = BOTH

DEPLOYS = """
toolset deploy {
  tool push(target: str, token: secret str)
}
role deployer {
  allow deploy.push
}
hook approve-deploys on deploy.push {
  pause "a human approves deploys"
}
profile deploying {
  roles deployer
  hooks approve-deploys
}
"""
TOKEN = "Tk9Qz4Wv7Xj2Pm5Rn8Lb"  # the secret argument: no 6-character piece of it is sent


def _deploying(harness: Harness) -> dict[str, str]:
    """The harness's policy with deploys, each paused for a human; agent `dep`'s header."""
    service = harness.service
    with service.store.atomic():
        service.upload([("policy.charter", POLICY + DEPLOYS)], "test")
    harness.add_agent("dep", "deploying")
    return harness.auth(harness.token_for("dep"))


def _hooks(service: Service, url: str, first_ms: int = 20, attempts: int = 12) -> Deliverer:
    found = deliverer(
        service.store, service.sealer, service.keys, service.read,
        WebhookConfig((url,), Backoff(first_ms, attempts)), service.metrics,
    )  # fmt: skip
    service.webhooks = found
    return found


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as made:
        yield made


def _pause(client: httpx.Client, agent: dict[str, str], target: str = "prod") -> str:
    call = {"agent": "dep", "tool": "deploy.push", "args": {"target": target, "token": TOKEN}}
    paused = client.post("/v1/decisions", json=call, headers=agent)
    assert paused.json()["effect"] == "pause", paused.text
    return str(paused.json()["approval_id"])


def _checked(client: httpx.Client, got: Received) -> dict[str, Any]:
    """The event a delivery carries, once its signature verifies with `GET /v1/keys`."""
    keys = from_jwks(client.get("/v1/keys").json())
    event_id, kid = verify(got.headers, got.body, keys)
    event: dict[str, Any] = json.loads(got.body)
    assert event["id"] == event_id and kid == client.get("/v1/keys").json()["current"]
    assert got.headers["content-type"] == "application/json" and got.path == PATH
    return event


def _no_secret(data: bytes) -> None:
    for i in range(len(TOKEN) - 5):
        assert TOKEN[i : i + 6].encode() not in data


def test_a_pause_and_its_decision_are_delivered_signed_without_secrets(
    harness: Harness, receiver: Receiver
) -> None:
    agent = _deploying(harness)
    hooks = _hooks(harness.service, receiver.url)
    hooks.start()
    try:
        with LiveServer(create_app(harness.service)) as url, httpx.Client(base_url=url) as live:
            approval = _pause(live, agent)
            [opened] = receiver.wait_for(1)
            event = _checked(live, opened)
            assert (event["id"], event["type"]) == (
                f"approval.opened:{approval}",
                "approval.opened",
            )
            shown = live.get(f"/v1/approvals/{approval}", headers=harness.auth()).json()
            assert event["approval"] == shown and shown["status"] == "pending"
            assert event["approval"]["args"] == {"target": "prod", "token": REDACTED}
            assert event["at"] == shown["created_at"]
            decided = live.post(f"/v1/approvals/{approval}/approve", headers=harness.auth())
            assert decided.status_code == 200, decided.text
            _, closed = receiver.wait_for(2)
            event = _checked(live, closed)
            assert (event["id"], event["type"]) == (
                f"approval.decided:{approval}",
                "approval.decided",
            )
            assert event["approval"]["status"] == "approved"
            assert event["at"] == event["approval"]["decided_at"]
    finally:
        hooks.stop()
    for got in receiver.got:
        _no_secret(got.body)
        _no_secret(json.dumps(got.headers).encode())
    assert list(harness.service.store.scan(KIND)) == []  # (delivered: no row left)


def test_a_failing_receiver_gets_the_event_again_with_the_same_id(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    agent = _deploying(harness)
    with (
        Receiver(fail_first=2) as receiver,
        LiveServer(create_app(harness.service)) as url,
        httpx.Client(base_url=url) as live,
    ):
        hooks = _hooks(harness.service, receiver.url, first_ms=40)
        hooks.start()
        try:
            approval = _pause(live, agent)
            receiver.wait_for(1)
        finally:
            hooks.stop()
        first, second, third = receiver.got
        assert [r.status for r in receiver.got] == [500, 500, 204]
        assert {r.headers["webhook-id"] for r in receiver.got} == {f"approval.opened:{approval}"}
        assert first.body == second.body == third.body
        for got in receiver.got:
            _checked(live, got)
        # backed off: at least the lower half of 40 ms, then of 80 ms
        assert second.at - first.at >= 0.02 and third.at - second.at >= 0.04
        metrics = live.get("/metrics").text
        assert 'charter_approval_webhook_attempts_total{result="retry"} 2' in metrics
        assert 'charter_approval_webhook_attempts_total{result="delivered"} 1' in metrics
        assert 'charter_approval_webhook_attempts_total{result="given-up"} 0' in metrics
    assert list(harness.service.store.scan(KIND)) == []
    assert PATH not in caplog.text


def test_a_receiver_that_never_accepts_is_given_up_on(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    agent = _deploying(harness)
    with (
        Receiver(fail_first=10**6) as receiver,
        LiveServer(create_app(harness.service)) as url,
        httpx.Client(base_url=url) as live,
        caplog.at_level(logging.WARNING, "charter.webhooks"),
    ):
        hooks = _hooks(harness.service, receiver.url, first_ms=5, attempts=3)
        approval = _pause(live, agent)
        hooks.start()
        try:
            deadline = time.monotonic() + 10
            while not list(harness.service.store.scan(KIND, tag=FAILED)):
                assert time.monotonic() < deadline
                time.sleep(0.01)
        finally:
            hooks.stop()
        metrics = live.get("/metrics").text
        assert 'charter_approval_webhook_attempts_total{result="given-up"} 1' in metrics
    assert len(receiver.got) == 3
    [row] = list(harness.service.store.scan(KIND, tag=FAILED))
    assert (row.body["attempts"], row.body["last"]) == (3, "HTTP 500")
    assert row.body["target"] == receiver.url.removesuffix(PATH)
    assert PATH.encode() not in json.dumps({k: str(v) for k, v in row.body.items()}).encode()
    assert (
        f"approval.opened:{approval}" in caplog.text and "given up after 3 attempts" in caplog.text
    )
    assert PATH not in caplog.text


def test_each_event_is_delivered_once_by_two_processes(
    harness: Harness, receiver: Receiver
) -> None:
    agent = _deploying(harness)
    with opened_again(harness.db, harness.key_file) as other:
        both = [_hooks(harness.service, receiver.url), _hooks(other, receiver.url)]
        for hooks in both:
            hooks.start()
        try:
            with (
                LiveServer(create_app(harness.service)) as one,
                LiveServer(create_app(other)) as two,
                httpx.Client(base_url=one) as first,
                httpx.Client(base_url=two) as second,
            ):
                made = [
                    _pause(client, agent, f"t{i}") for i in range(4) for client in (first, second)
                ]
                for approval in made[:3]:
                    second.post(f"/v1/approvals/{approval}/reject", headers=harness.auth(),
                                json={"reason": "no"})  # fmt: skip
                receiver.wait_for(len(made) + 3)
                # both keep looking a while longer: nothing is delivered twice
                for hooks in both:
                    hooks.poke()
                time.sleep(0.3)
        finally:
            for hooks in both:
                hooks.stop()
    ids = [r.headers["webhook-id"] for r in receiver.got]
    wanted = {f"approval.opened:{a}" for a in made} | {f"approval.decided:{a}" for a in made[:3]}
    assert sorted(ids) == sorted(wanted)


def test_events_queued_while_nothing_delivers_are_delivered_after_a_restart(
    harness: Harness, receiver: Receiver
) -> None:
    agent = _deploying(harness)
    _hooks(harness.service, receiver.url)  # (queued here, never started: a process that died)
    with LiveServer(create_app(harness.service)) as url, httpx.Client(base_url=url) as live:
        approval = _pause(live, agent)
    assert receiver.got == []
    [row] = list(harness.service.store.scan(KIND, tag=PENDING))
    with opened_again(harness.db, harness.key_file) as restarted:
        hooks = _hooks(restarted, receiver.url)
        hooks.start()
        try:
            [got] = receiver.wait_for(1)
        finally:
            hooks.stop()
    assert got.headers["webhook-id"] == f"approval.opened:{approval}"
    assert json.loads(got.body)["approval"]["id"] == approval == row.body["event"].split(":")[1]


def test_a_claim_whose_holder_died_is_taken_again_after_its_lease(
    harness: Harness, receiver: Receiver
) -> None:
    agent = _deploying(harness)
    outbox = _hooks(harness.service, receiver.url).outbox
    with LiveServer(create_app(harness.service)) as url, httpx.Client(base_url=url) as live:
        _pause(live, agent)
    now = now_ms()
    [dead], _ = outbox.claim("dead", now, 16)
    # (held until its lease ends, and the look says when that is)
    assert outbox.claim("alive", now + LEASE_MS - 1, 16) == ([], now + LEASE_MS)
    [alive], later = outbox.claim("alive", now + LEASE_MS, 16)
    assert later is None
    assert alive.id == dead.id
    assert outbox.settle(dead, None, now_ms()) is None  # the dead holder's word counts for nothing
    assert outbox.settle(alive, None, now_ms()) == "delivered"
    assert list(harness.service.store.scan(KIND)) == []


def test_nothing_is_queued_without_webhooks(harness: Harness) -> None:
    agent = _deploying(harness)
    with LiveServer(create_app(harness.service)) as url, httpx.Client(base_url=url) as live:
        approval = _pause(live, agent)
    assert harness.service.store.get(Approval.KIND, approval) is not None
    assert list(harness.service.store.scan(KIND)) == []


def test_a_round_reads_the_pending_rows_only_when_one_may_be_due(
    harness: Harness, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rounds made by hand, never kicked: the first reads the pending rows, the next
    reads nothing until another process's commit moves the store's data version; the
    row it queued is then read and delivered."""
    agent = _deploying(harness)
    hooks = _hooks(harness.service, receiver.url)
    store = harness.service.store
    reads: list[str] = []
    real = store.scan

    def scan(kind: str, tag: str | None = None) -> Any:
        reads.append(kind)
        return real(kind, tag)

    monkeypatch.setattr(store, "scan", scan)
    assert hooks.round(kicked=False) == 1.0 and reads == [KIND]
    assert hooks.round(kicked=False) == 1.0 and reads == [KIND]  # (nothing moved)
    with opened_again(harness.db, harness.key_file) as other:
        _hooks(other, receiver.url)  # (it queues; this process delivers)
        with LiveServer(create_app(other)) as url, httpx.Client(base_url=url) as live:
            approval = _pause(live, agent)
    deadline = time.monotonic() + 5
    while not receiver.got:
        assert time.monotonic() < deadline
        hooks.round(kicked=False)
        time.sleep(0.01)
    assert receiver.got[0].headers["webhook-id"] == f"approval.opened:{approval}"
    assert list(real(KIND)) == []


def test_an_attempt_that_reaches_no_one_says_why_without_its_url() -> None:
    with socket.socket() as sock:  # (a port nothing listens on)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert post(f"http://127.0.0.1:{port}{PATH}", b"{}", {}) == "connection refused"


def test_a_delivery_after_a_rotation_is_signed_with_the_new_key(
    harness: Harness, receiver: Receiver
) -> None:
    agent = _deploying(harness)
    hooks = _hooks(harness.service, receiver.url)
    hooks.start()
    try:
        with LiveServer(create_app(harness.service)) as url, httpx.Client(base_url=url) as live:
            _pause(live, agent, "before")
            [before] = receiver.wait_for(1)
            old = live.get("/v1/keys").json()["current"]
            rotated = live.post("/v1/keys/rotate", headers=harness.auth())
            assert rotated.status_code in (200, 201), rotated.text
            _pause(live, agent, "after")
            _, after = receiver.wait_for(2)
            keys = live.get("/v1/keys").json()
    finally:
        hooks.stop()
    new = keys["current"]
    assert new != old
    published = from_jwks(keys)  # (the old key stays published: what it signed verifies)
    assert verify(before.headers, before.body, published)[1] == old
    assert verify(after.headers, after.body, published)[1] == new


def test_an_https_receiver_is_reached_only_with_a_certificate_this_host_trusts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receiver's certificate is checked against the CAs the system trusts (here a
    self-signed one: refused), or those `SSL_CERT_FILE` names (then delivered)."""
    cert, key = self_signed(tmp_path)
    with Receiver(tls=(cert, key)) as receiver:
        assert receiver.url.startswith("https://127.0.0.1:")
        refused = post(receiver.url, b"{}", {})
        assert refused is not None and refused.startswith("tls: certificate")
        assert receiver.got == []
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        assert post(receiver.url, b'{"a":1}', {"webhook-id": "e"}) is None
        [got] = receiver.wait_for(1)
    assert (got.body, got.headers["webhook-id"], got.path) == (b'{"a":1}', "e", PATH)
