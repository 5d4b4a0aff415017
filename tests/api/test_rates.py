"""A profile's `rate N calls per P` (docs/dsl.md, "Profiles"): each agent on it makes at
most N allowed calls in any window of P; the next is denied with a `rate` reason and is
not counted, pauses are not counted, and each agent is counted apart. Counted in the
store's ledger, in the transaction that logs the call, on SQLite and on PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from api.service.logrows import expand
from engine.check import check_sources
from engine.compile import compile_workspace
from engine.fit import fit_profile
from tests.api.conftest import BOTH, POLICY, Harness
from tests.store.tables import sound

STORES = BOTH

RATED = """
profile rated {
  roles mailer, refunder
  hooks approve-big
  rate 3 calls per 1h
}
"""
MAIL = {"to": "bob@example.com", "subject": "s", "body": "b"}


@pytest.fixture
def rated(harness: Harness) -> Harness:
    with harness.service.store.atomic():
        harness.service.upload([("policy.charter", POLICY + RATED)], "rated")
    harness.add_agent("r1", "rated")
    harness.add_agent("r2", "rated")
    return harness


def _call(
    agent: str, tool: str = "mail.send", args: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {"agent": agent, "tool": tool, "args": args or MAIL}


def test_the_rate_denies_the_call_past_it_and_counts_each_agent_apart(
    client: Any, rated: Harness
) -> None:
    auth = rated.auth()
    paused = client.post(
        "/v1/decisions", json=_call("r1", "billing.refund", {"amount": 90}), headers=auth
    )
    assert paused.json()["effect"] == "pause"  # (a pause is not counted)
    effects = [
        client.post("/v1/decisions", json=_call("r1"), headers=auth).json() for _ in range(5)
    ]
    assert [d["effect"] for d in effects] == ["allow"] * 3 + ["deny"] * 2
    last = effects[-1]["reasons"][-1]
    assert last["kind"] == "rate"
    assert last["message"] == "the call is over the profile `rated` rate 3 calls per 1h"
    assert rated.service.store.spent("calls:r1", 0) == 3  # (the denied calls are not counted)
    other = client.post("/v1/decisions/batch", json={"calls": [_call("r2")] * 4}, headers=auth)
    assert [d["effect"] for d in other.json()["decisions"]] == ["allow"] * 3 + ["deny"]
    rows = sound(rated.service.store.read_decisions(0, 100))
    assert [expand(row)["effect"] for _, row in rows][-4:] == ["allow"] * 3 + ["deny"]


def test_a_profile_with_a_looser_rate_does_not_fit() -> None:
    text = (
        POLICY
        + RATED
        + """
profile loose {
  roles mailer
  hooks approve-big
  rate 4 calls per 1h
}
profile often {
  roles mailer
  hooks approve-big
  rate 3 calls per 1m
}
profile none {
  roles mailer
  hooks approve-big
}
profile tight {
  roles mailer
  hooks approve-big
  rate 2 calls per 24h
}
"""
    )
    snap = compile_workspace(check_sources([("p.charter", text)]))
    kinds = {
        name: [
            v.kind for v in fit_profile(snap, "rated", snap, name).violations if v.kind == "rate"
        ]
        for name in ("loose", "often", "none", "tight")
    }
    assert kinds == {"loose": ["rate"], "often": ["rate"], "none": ["rate"], "tight": []}
