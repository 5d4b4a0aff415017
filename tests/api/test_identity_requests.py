"""`/v1/identities` bodies: a `request_id` is one request, whatever token sends it."""

from __future__ import annotations

from typing import Any

import pytest

from policy import identities
from tests.api.conftest import Harness, expect


def _identities(harness: Harness) -> int:
    return sum(1 for _ in harness.service.store.scan(identities.SECRETS))


@pytest.mark.parametrize("who", ["admin", "agent"])
def test_a_request_id_reused_with_another_body_is_refused(
    client: Any, harness: Harness, who: str
) -> None:
    """As Stripe's idempotency keys: the same `request_id` with another `label` answered
    200 with the identity the first request made, as if this one had been; now a 409
    that writes nothing (no identity, and for an agent's token no logged decision, as
    its allowed `identities.create` is rolled back with the refusal). The same request
    again still answers the first identity."""
    headers = harness.auth(harness.agent_token if who == "agent" else None)
    first = client.post("/v1/identities", json={"request_id": "r1", "label": "ops"},
                        headers=headers)  # fmt: skip
    assert first.status_code == 201, first.text
    made, logged = _identities(harness), harness.service.store.last_seq()
    for body in ({"request_id": "r1", "label": "dev"}, {"request_id": "r1"}):
        refused = client.post("/v1/identities", json=body, headers=headers)
        expect(refused, 409, "request-id-reused")
        assert "`r1`" in refused.json()["detail"] and "label `ops`" in refused.json()["detail"]
        assert refused.json()["help"]
    assert (_identities(harness), harness.service.store.last_seq()) == (made, logged)
    again = client.post("/v1/identities", json={"request_id": "r1", "label": "ops"},
                        headers=headers)  # fmt: skip
    assert (again.status_code, again.json()) == (200, first.json())


def test_a_request_id_kept_without_its_body_replays_as_before(harness: Harness) -> None:
    """A request id written before its body was kept has nothing to compare with: it
    replays the identity it made, as it always did."""
    store, sealer = harness.service.store, harness.service.sealer
    view, _ = identities.create(store, sealer, "old", request_id="r0")
    store.update(identities.IDEMPOTENCY, "r0", {"account_id": view["id"]})  # as written then
    again, created = identities.create(store, sealer, "other", request_id="r0")
    assert (again["id"], created) == (view["id"], False)
