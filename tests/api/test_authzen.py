"""The AuthZEN Authorization API 1.0 (`/access/v1/...`, `/.well-known/authzen-configuration`)
against a real server on loopback: the specification's own request and response examples
(tests/api/authzen/*.json, each naming the section it is copied from), then what charter
adds (a pause, the log, tokens, refusals)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import POLICY, Harness, expect

EXAMPLES = sorted((Path(__file__).parent / "authzen").glob("*.json"))

# The specification's examples, as a policy: `alice@example.com` is an agent; each
# resource type a toolset, each action a tool; a resource's id is `context.resource.id`.
SPEC_POLICY = """
toolset todo {
  tool can_read()
}
toolset account {
  tool can_read()
  tool can_write()
  tool can_delete()
}
toolset document {
  tool read()
  tool can_read()
  tool can_edit()
}
role spec-reader {
  allow todo.can_read
  allow account.can_read, account.can_write
  allow document.can_read where context.resource.id == "boxcarring.md"
  allow document.read where context.resource.id != "2"
}
profile people {
  roles spec-reader
  hooks none
}
"""
ALICE = "alice@example.com"


@pytest.fixture
def spec_live(live: httpx.Client, harness: Harness) -> httpx.Client:
    admin = harness.auth()
    assert live.put("/v1/policy", content=POLICY + SPEC_POLICY, headers=admin).status_code == 201
    harness.add_agent(ALICE, "people")
    return live


def _decisions(answer: dict[str, Any]) -> list[bool]:
    if "evaluations" in answer:
        return [item["decision"] for item in answer["evaluations"]]
    return [answer["decision"]]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_the_specifications_examples(spec_live: httpx.Client, harness: Harness, path: Path) -> None:
    example = json.loads(path.read_text("utf-8"))
    assert example["source"].startswith("openid/authzen, ")  # (the section it is from)
    expected = example["response"]
    if example["request"] is None:  # the metadata: its endpoints, at this server's URL
        answer = spec_live.get(example["endpoint"])
        assert answer.status_code == 200
        found = answer.json()
        base = str(spec_live.base_url).rstrip("/")
        assert found["policy_decision_point"] == base
        assert found["access_evaluation_endpoint"] == f"{base}/access/v1/evaluation"
        for key in found:  # (the example's PDP has subject and resource searches instead)
            if key in expected:
                assert found[key].replace(base, "https://pdp.example.com") == expected[key]
        return
    headers = {**harness.auth(), **example.get("headers", {})}
    logged = harness.service.store.last_seq()
    answer = spec_live.post(example["endpoint"], json=example["request"], headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    for name, value in example.get("headers", {}).items():
        assert answer.headers[name] == value
    found = answer.json()
    if "results" in expected:
        assert [r["name"] for r in found["results"]] == [r["name"] for r in expected["results"]]
        return
    assert _decisions(found) == _decisions(expected)
    # every evaluation answered was decided by charter, and logged as a decision
    contexts = found.get("evaluations", [found])
    assert all(item["context"]["effect"] in ("allow", "deny") for item in contexts)
    assert harness.service.store.last_seq() == logged + len(contexts)


def test_a_pause_is_false_with_its_approval_and_logged(
    live: httpx.Client, harness: Harness
) -> None:
    call = {
        "subject": {"type": "agent", "id": "a1"},
        "action": {"name": "refund"},
        "resource": {"type": "billing"},
        "context": {"args": {"amount": 80}, "ticket": "T-1"},
    }
    answer = live.post("/access/v1/evaluation", json=call, headers=harness.auth(harness.decide))
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert found["decision"] is False
    assert found["context"]["effect"] == "pause"
    approval = found["context"]["approval_id"]
    pending = live.get(f"/v1/approvals/{approval}", headers=harness.auth()).json()
    assert (pending["status"], pending["args"]) == ("pending", {"amount": 80})
    log = live.get("/v1/decisions?after_seq=0", headers=harness.auth()).json()["decisions"]
    assert (log[-1]["tool"], log[-1]["effect"], log[-1]["approval"]) == (
        "billing.refund", "pause", approval,
    )  # fmt: skip
    # an allow is true, with the decided arguments (the signature's default applied)
    call["context"] = {"args": {"amount": 10}}
    allowed = live.post("/access/v1/evaluation", json=call, headers=harness.auth()).json()
    assert allowed["decision"] is True
    assert allowed["context"]["args"] == {"amount": 10, "reason": ""}


def test_tokens_act_as_for_decisions(live: httpx.Client, harness: Harness) -> None:
    call = {
        "subject": {"type": "agent", "id": "a1"},
        "action": {"name": "refund"},
        "resource": {"type": "billing"},
        "context": {"args": {"amount": 1}},
    }
    expect(live.post("/access/v1/evaluation", json=call), 401, "unauthorized")
    own = harness.auth(harness.agent_token)
    assert live.post("/access/v1/evaluation", json=call, headers=own).json()["decision"]
    harness.add_agent("a2", "wide")
    other = harness.auth(harness.token_for("a2"))
    expect(live.post("/access/v1/evaluation", json=call, headers=other), 403,
           "insufficient-scope")  # fmt: skip
    batch = {"evaluations": [call, {**call, "subject": {"type": "agent", "id": "a2"}}]}
    expect(live.post("/access/v1/evaluations", json=batch, headers=own), 403,
           "insufficient-scope")  # fmt: skip
    search = {"subject": {"type": "agent", "id": "a1"}, "resource": {"type": "billing"}}
    expect(live.post("/access/v1/search/action", json=search, headers=other), 403,
           "insufficient-scope")  # fmt: skip
    found = live.post("/access/v1/search/action", json=search, headers=own).json()["results"]
    assert [r["name"] for r in found] == ["refund"]
    assert found[0]["properties"]["hooks"][0]["name"] == "approve-big"


def test_bad_requests_are_400s_and_unknown_members_are_ignored(
    live: httpx.Client, harness: Harness
) -> None:
    admin = harness.auth()
    call: dict[str, Any] = {
        "subject": {"type": "agent", "id": "a1", "extra": 1},
        "action": {"name": "send"},
        "resource": {"type": "mail"},
        "context": {"args": {"to": "x@example.com", "subject": "s", "body": "b"}},
        "something_new": True,
    }
    assert live.post("/access/v1/evaluation", json=call, headers=admin).json()["decision"]
    logged = harness.service.store.last_seq()
    for broken in (
        {k: v for k, v in call.items() if k != "subject"},
        {**call, "action": {}},
        {**call, "context": {"args": [1]}},
        {**call, "resource": {"type": "x" * 300}},
    ):
        expect(live.post("/access/v1/evaluation", json=broken, headers=admin), 400,
               "authzen-bad-request")  # fmt: skip
    no_default = {"evaluations": [{"subject": call["subject"], "action": call["action"]}]}
    expect(live.post("/access/v1/evaluations", json=no_default, headers=admin), 400,
           "authzen-bad-request")  # fmt: skip
    semantic = {"options": {"evaluations_semantic": "some"}, "evaluations": [call]}
    expect(live.post("/access/v1/evaluations", json=semantic, headers=admin), 400,
           "authzen-bad-request")  # fmt: skip
    assert harness.service.store.last_seq() == logged  # (nothing decided, nothing logged)
    # an unknown agent: 404 alone, false with its error among evaluations
    ghost = {**call, "subject": {"type": "agent", "id": "ghost"}}
    expect(live.post("/access/v1/evaluation", json=ghost, headers=admin), 404,
           "agent-not-found")  # fmt: skip
    both = live.post("/access/v1/evaluations", json={"evaluations": [ghost, call]},
                     headers=admin).json()["evaluations"]  # fmt: skip
    assert both[0] == {
        "decision": False,
        "context": {"error": {"status": 404, "code": "agent-not-found",
                              "message": "agent `ghost` not found"}},
    }  # fmt: skip
    assert both[1]["decision"] is True
    # without `evaluations`: one evaluation, answered as one
    single = live.post("/access/v1/evaluations", json=call, headers=admin).json()
    assert single["decision"] is True and "evaluations" not in single


def test_a_short_circuit_decides_nothing_after_it(live: httpx.Client, harness: Harness) -> None:
    base = {"subject": {"type": "agent", "id": "a1"}, "resource": {"type": "billing"},
            "action": {"name": "refund"}}  # fmt: skip
    refunds = [{"context": {"args": {"amount": n}}} for n in (10, 80, 20)]
    logged = harness.service.store.last_seq()
    first_deny = {**base, "options": {"evaluations_semantic": "deny_on_first_deny"},
                  "evaluations": refunds}  # fmt: skip
    found = live.post("/access/v1/evaluations", json=first_deny, headers=harness.auth()).json()
    assert _decisions(found) == [True, False]  # (the 80 paused: false, and the end)
    assert found["evaluations"][1]["context"]["effect"] == "pause"
    assert harness.service.store.last_seq() == logged + 2
    pending = live.get("/v1/approvals?status=pending", headers=harness.auth()).json()["items"]
    assert len(pending) == 1  # (the 20 was never decided: no approval, no log)
