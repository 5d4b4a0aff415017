"""`/v1/identities` bodies: a `request_id` is one request, whatever token sends it."""

from __future__ import annotations

from typing import Any

import pytest

from api.http.errors import status_of
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


@pytest.mark.parametrize("who", ["admin", "agent"])
def test_identity_metadata_is_capped_after_the_merge(
    client: Any, harness: Harness, who: str
) -> None:
    """An identity's metadata had no cap: PATCH after PATCH, each within the 1 MiB body,
    grew one document that every get and listing reads whole. At most 16 KiB as CBOR
    once merged: past that a 422 `metadata-too-large` naming the size, and nothing is
    written (for an agent's token, on its own identity, not its logged decision either)."""
    headers = harness.auth(harness.agent_token if who == "agent" else None)
    path = f"/v1/identities/{harness.identity}"
    half = "x" * (9 * 1024)
    assert client.patch(path, json={"metadata": {"a": half}}, headers=headers).status_code == 200
    stored, logged = (
        client.get(path, headers=harness.auth()).json(),
        harness.service.store.last_seq(),
    )
    for metadata in ({"b": half}, {"c": "y" * (20 * 1024)}):  # merged / over on its own
        refused = client.patch(path, json={"metadata": metadata, "label": "new"}, headers=headers)
        expect(refused, 422, "metadata-too-large")
        assert "16,384 bytes" in refused.json()["detail"] and refused.json()["help"]
        assert client.get(path, headers=harness.auth()).json() == stored
        assert harness.service.store.last_seq() == logged
    # the same key again replaces its value: within the cap; a `null` makes room
    again = client.patch(path, json={"metadata": {"a": half}}, headers=headers)
    assert again.status_code == 200
    room = client.patch(path, json={"metadata": {"a": None, "b": half}}, headers=headers)
    assert room.status_code == 200 and room.json()["metadata"]["a"] is None


def _nested(levels: int) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for _ in range(levels - 1):
        nested = {"n": nested}
    return nested


def test_metadata_nested_past_what_can_be_stored_is_refused(harness: Harness) -> None:
    """Not through HTTP (a body is 32 levels at most), but the same bound: cbor2's encoder
    crashed the process on metadata some 20,000 levels deep."""
    store = harness.service.store
    fits = identities.update(store, harness.identity, metadata={"deep": _nested(31)})
    assert fits["metadata"]["deep"] == _nested(31)  # 32 levels, the metadata's own object too
    for levels in (32, 100_000):
        with pytest.raises(identities.IdentityError) as refused:
            identities.update(store, harness.identity, metadata={"deep": _nested(levels)})
        assert (status_of(refused.value.code), refused.value.code) == (422, "metadata-too-large")
        assert "more than 32 levels" in refused.value.message
    assert identities.get(store, harness.identity) == fits
    # metadata stored before the cap: the label and name still change, the metadata stays
    doc = store.get(identities.SECRETS, fits["secret_name"])
    assert doc is not None
    big = {**doc["metadata"], "old": "z" * (20 * 1024)}
    store.update(identities.SECRETS, doc["name"], {**doc, "metadata": big}, tag=identities.KIND)
    renamed = identities.update(store, harness.identity, label="renamed")
    assert renamed["label"] == "renamed" and len(renamed["metadata"]["old"]) == 20 * 1024


def test_agent_metadata_is_capped_at_create_and_after_the_merge(
    client: Any, harness: Harness
) -> None:
    """An agent's metadata had no cap either, and every decision holds it (conditions
    read `agent.metadata.*`): the identity's caps apply, to a create's and to a PATCH's
    merge, and a refusal writes nothing."""
    headers = harness.auth()
    half = "x" * (9 * 1024)
    body = {"name": "big", "profile": "support", "identity": harness.identity}
    refused = client.post("/v1/agents", json={**body, "metadata": {"a": half, "b": half}},
                          headers=headers)  # fmt: skip
    expect(refused, 422, "metadata-too-large")
    assert "the agent's metadata" in refused.json()["detail"]
    assert client.get("/v1/agents", headers=headers).json()["items"] == [
        client.get("/v1/agents/a1", headers=headers).json()
    ]
    made = client.post("/v1/agents", json={**body, "metadata": {"a": half}}, headers=headers)
    assert made.status_code == 201, made.text
    path = f"/v1/agents/{made.json()['id']}"
    expect(client.patch(path, json={"metadata": {"b": half}}, headers=headers), 422,
           "metadata-too-large")  # fmt: skip
    assert client.get(path, headers=headers).json()["metadata"] == {"a": half}
    deep: Any = "leaf"
    for _ in range(40):
        deep = {"k": deep}
    with pytest.raises(Exception) as caught:
        harness.add_agent("deep", "support", metadata={"d": deep})
    assert getattr(caught.value, "code", None) == "metadata-too-large"
    room = client.patch(path, json={"metadata": {"a": None, "b": half}}, headers=headers)
    assert room.status_code == 200, room.text
