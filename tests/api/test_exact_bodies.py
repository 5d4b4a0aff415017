"""Every JSON body is read as a decision request is (api/http/body.py): numbers exact (a
float only when it is exactly the number its text says, else the Decimal of the text),
`number-out-of-range` for a number a double cannot hold, at most 32 levels deep. An
agent's `metadata`, which conditions read as `agent.metadata.*`, keeps the number it was
given through the store (CBOR) and back out as a JSON number with all its digits."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from tests.api.conftest import POLICY, REVIEWED, Harness, N, code_of, with_number

CAPPED = """
toolset pay {
  tool refund(amount: decimal)
}
role capped {
  allow pay.refund where agent.metadata.limit <= 100.00
}
profile capped {
  roles capped
  hooks none
}
role limited-managers {
  allow agents.*
  allow pay.refund where agent.metadata.limit <= 100.00
}
profile limited-manager {
  roles limited-managers
  hooks none
}
"""
OVER = "100.000000000000000000000001"  # a float reads it as 100.0


def _upload(client: Any, harness: Harness) -> None:
    put = client.put("/v1/policy", content=POLICY + CAPPED, headers=harness.auth())
    assert put.status_code == 201, put.text


def _refund(client: Any, harness: Harness, agent: str) -> str:
    call = {"agent": agent, "tool": "pay.refund", "args": {"amount": 1}}
    response = client.post("/v1/decisions", json=call, headers=harness.auth())
    assert response.status_code == 200, response.text
    effect: str = response.json()["effect"]
    return effect


def _exact_json(text: str) -> Any:
    return json.loads(text, parse_float=Decimal)


def test_an_agents_metadata_is_compared_exactly(client: Any, harness: Harness) -> None:
    """`agent.metadata.limit <= 100.00` with a limit of 100.000000000000000000000001 is
    false: the limit was read as the float 100.0 and the refund allowed."""
    _upload(client, harness)
    body = with_number({"name": "m", "profile": "capped", "identity": harness.identity,
                        "metadata": {"limit": N}}, OVER)  # fmt: skip
    created = client.post("/v1/agents", content=body, headers=harness.auth())
    assert created.status_code == 201, created.text
    agent = created.json()["id"]
    assert _refund(client, harness, agent) == "deny"
    assert f'"limit":{OVER}' in created.text
    # the store keeps the Decimal (CBOR's decimal fraction), and GET writes its digits
    stored = harness.service.store.get("agents", agent)
    assert stored is not None and type(stored["metadata"]["limit"]) is Decimal
    assert stored["metadata"]["limit"] == Decimal(OVER)
    got = client.get(f"/v1/agents/{agent}", headers=harness.auth())
    assert f'"limit":{OVER}' in got.text
    assert _exact_json(got.text)["metadata"]["limit"] == Decimal(OVER)
    listed = client.get("/v1/agents", headers=harness.auth())
    assert f'"limit":{OVER}' in listed.text
    # written any other way, the same number decides the same; 100 itself is allowed
    for text, effect in (("1.00000000000000000000000001e2", "deny"), ("100.00", "allow"),
                         ("99.99999999999999999999999", "allow"), ("1e2", "allow")):  # fmt: skip
        patch = b'{"metadata": {"limit": %s}}' % text.encode()
        changed = client.patch(f"/v1/agents/{agent}", content=patch, headers=harness.auth())
        assert changed.status_code == 200, changed.text
        assert _exact_json(changed.text)["metadata"]["limit"] == Decimal(text)
        assert _refund(client, harness, agent) == effect, text


def test_management_numbers_past_a_double_are_refused(client: Any, harness: Harness) -> None:
    """1e-400 in metadata was kept as 0.0, 1e400 as an infinity (answered as null): both
    are a 422 now, and nothing is written; nesting past 32 levels is a 400."""
    _upload(client, harness)
    auth = harness.auth()
    before = harness.service.store.get("agents", "a1")
    for text, shown in (("1e-400", "1e-400"), ("-1e400", "-1e400"), ('[{"x": 1e400}]', "1e400")):
        patch = b'{"metadata": {"limit": %s}}' % text.encode()
        response = client.patch("/v1/agents/a1", content=patch, headers=auth)
        assert code_of(response) == (422, "number-out-of-range"), response.text
        assert f"`{shown}`" in response.json()["detail"] and "1.8e308" in response.json()["help"]
        create = with_number({"name": "m", "profile": "capped", "identity": harness.identity,
                              "metadata": {"x": N}}, text)  # fmt: skip
        response = client.post("/v1/agents", content=create, headers=auth)
        assert code_of(response) == (422, "number-out-of-range"), response.text
        identity = client.patch(f"/v1/identities/{harness.identity}", content=patch, headers=auth)
        assert code_of(identity) == (422, "number-out-of-range"), identity.text
    deep: Any = 0.5
    for _ in range(40):
        deep = {"d": deep}
    response = client.patch("/v1/agents/a1", json={"metadata": deep}, headers=auth)
    assert code_of(response) == (400, "too-deep")
    assert harness.service.store.get("agents", "a1") == before
    assert [r.id for r in harness.service.store.scan("agents")] == ["a1"]


def test_amounts_keep_every_digit(client: Any, harness: Harness) -> None:
    """A budget's amount and a thread's `max_cost` were read as the Decimal of a float:
    100.000000000000000000000001 was kept as `100`, and 1000000000.0000000000000001 (past
    the bound) as the bound itself."""
    auth = harness.auth()
    thread = client.post(
        "/v1/threads", content=b'{"agent": "a1", "max_cost": %s}' % OVER.encode(), headers=auth
    )
    assert thread.status_code == 201, thread.text
    assert thread.json()["max_cost"] == OVER
    budget = b'{"budget": {"amount": 0.1000000000000000000001, "period": "24h"}}'
    changed = client.patch("/v1/agents/a1", content=budget, headers=auth)
    assert changed.status_code == 200, changed.text
    assert changed.json()["budget"] == {"amount": "0.1000000000000000000001", "period": "24h"}
    past = b"1000000000.0000000000000001"
    response = client.post("/v1/threads", content=b'{"agent": "a1", "max_cost": %s}' % past,
                           headers=auth)  # fmt: skip
    assert code_of(response) == (422, "invalid-body")
    response = client.patch(
        "/v1/agents/a1", content=b'{"budget": {"amount": %s, "period": "24h"}}' % past,
        headers=auth,
    )  # fmt: skip
    assert code_of(response) == (422, "invalid-body")
    assert len(list(harness.service.store.scan("threads"))) == 1


def test_an_identitys_metadata_keeps_its_digits(client: Any, harness: Harness) -> None:
    auth = harness.auth()
    patch = b'{"metadata": {"score": 0.30000000000000000001, "half": 0.5}}'
    changed = client.patch(f"/v1/identities/{harness.identity}", content=patch, headers=auth)
    assert changed.status_code == 200, changed.text
    got = client.get(f"/v1/identities/{harness.identity}", headers=auth)
    assert '"score":0.30000000000000000001' in got.text and '"half":0.5' in got.text


def test_a_child_with_a_string_for_a_number_differs(live: Any, harness: Harness) -> None:
    """The fit check compares the attributes conditions read as the engine does: the
    string "0.1" is not the number 0.1 (it wrote both as `"0.1"` once the number was a
    Decimal), and 0.10 is the number 0.1."""
    _upload(live, harness)
    harness.add_agent("boss", "limited-manager", metadata={"limit": Decimal("0.1")})
    boss = harness.auth(harness.token_for("boss"))
    child = {"name": "boss", "profile": "limited-manager", "metadata": {"limit": "0.1"}}
    refused = live.post("/v1/agents", json=child, headers=boss)
    assert code_of(refused) == (403, "agent-attribute-differs"), refused.text
    same = b'{"name": "boss", "profile": "limited-manager", "metadata": {"limit": 0.10}}'
    made = live.post("/v1/agents", content=same, headers=boss)
    assert made.status_code == 201, made.text
    assert '"limit":0.10' in made.text


def test_a_paused_update_is_sealed_and_run_with_the_exact_number(
    live: Any, harness: Harness
) -> None:
    """An agent's `agents.update` is decided as a call (its arguments logged and sealed in
    the approval, CBOR) and run when a human approves: the number it gave, all along."""
    admin = harness.auth()
    assert live.put("/v1/policy", content=POLICY + REVIEWED, headers=admin).status_code == 201
    harness.add_agent("rev", "reviewed")
    agent = harness.auth(harness.token_for("rev"))
    patch = with_number({"metadata": {"limit": N}}, OVER)
    paused = live.patch("/v1/agents/rev", content=patch, headers=agent)
    assert paused.status_code == 202, paused.text
    assert f'"limit":{OVER}' in paused.text  # the decision's arguments
    approval = paused.json()["approval_id"]
    shown = live.get(f"/v1/approvals/{approval}", headers=admin)
    assert f'"limit":{OVER}' in shown.text
    logged = live.get("/v1/decisions?after_seq=0&limit=10", headers=admin)
    assert f'"limit":{OVER}' in logged.text
    assert (harness.service.store.get("agents", "rev") or {})["metadata"] == {}
    approved = live.post(f"/v1/approvals/{approval}/approve", headers=admin)
    assert approved.status_code == 200, approved.text
    stored = harness.service.store.get("agents", "rev")
    assert stored is not None and stored["metadata"] == {"limit": Decimal(OVER)}
    assert f'"limit":{OVER}' in live.get("/v1/agents/rev", headers=admin).text


NOT_NUMBERS = ("NaN", "Infinity", "-Infinity")
SIZED = """
toolset pay {
  tool refund(amount: decimal)
}
role payer {
  allow pay.refund
}
hook big-risk on pay.refund where context.risk > 5 {
  deny "too risky"
}
profile payer {
  roles payer
  hooks big-risk
}
"""


def test_nan_and_infinity_are_not_json(client: Any, harness: Harness) -> None:
    """The models' parser takes them and JSON does not; no condition compares one as a
    number (`NaN > 5` is false, so the hook above would let the call through): every
    body that holds one is a 400 and decides, logs and changes nothing."""
    put = client.put("/v1/policy", content=POLICY + SIZED, headers=harness.auth())
    assert put.status_code == 201, put.text
    harness.add_agent("p1", "payer")
    auth = harness.auth()
    risky = {"agent": "p1", "tool": "pay.refund", "args": {"amount": 1}, "context": {"risk": 9}}
    assert client.post("/v1/decisions", json=risky, headers=auth).json()["effect"] == "deny"
    seq, agent = harness.service.store.last_seq(), harness.service.store.get("agents", "a1")
    for text in NOT_NUMBERS:
        call = {**risky, "context": {"risk": N}}
        for path, doc in (
            ("/v1/decisions", call),
            ("/v1/decisions", {**call, "thread": None}),  # (the models' path)
            ("/v1/decisions/batch", {"calls": [call]}),
            ("/v1/decisions/batch", {"calls": [risky, {**call, "turn": None}]}),
        ):
            response = client.post(path, content=with_number(doc, text), headers=auth)
            assert code_of(response) == (400, "malformed-json"), (path, text, response.text)
            assert "not JSON numbers" in response.json()["detail"]
        patch = with_number({"metadata": {"limit": N}}, text)
        assert code_of(client.patch("/v1/agents/a1", content=patch, headers=auth)) == (
            400, "malformed-json",
        )  # fmt: skip
    assert harness.service.store.last_seq() == seq
    assert harness.service.store.get("agents", "a1") == agent
