"""Amounts in USD: `expected_cost`, budgets and `max_cost` are 0 to 10^9 (a 422 past it,
quickly, whatever the number's size), and a ledger sum past 64 bits is over every cap."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.service.budget import MAX_MICROS, MAX_USD, cap_micros, to_micros
from policy.store import SPENT_OVERFLOW
from tests.api.conftest import Harness, N, expect, with_number

SEND = {"tool": "mail.send", "args": {"to": "bob@example.com", "subject": "s", "body": "b"}}
TOO_LARGE: list[Any] = [
    9_223_372_036_855,  # the reviewer's: past int64 in micro-USD
    10**30,
    1_000_000_001,
    "1000000000.000001",
    "9223372036855",
    "1e30",
    "1e5000",
    "1e999990",  # int(Decimal) of it took ~44 s on the event loop
    "1e1000000",
    "-1e999990",
    1e300,
]


def _nothing_written(harness: Harness) -> None:
    store = harness.service.store
    assert store.last_seq() == 0
    assert [store.spent(f"agent:{a}", 0) for a in ("a1", "w")] == [0, 0]


@pytest.mark.parametrize("cost", TOO_LARGE)
def test_an_expected_cost_past_the_bound_is_a_quick_422(
    live: httpx.Client, harness: Harness, cost: Any
) -> None:
    harness.add_agent("w", "wide")
    auth = harness.auth()
    for agent in ("a1", "w"):
        call = {"agent": agent, **SEND, "expected_cost": cost}
        started = time.monotonic()
        expect(live.post("/v1/decisions", json=call, headers=auth), 422, "invalid-body")
        batch = {"calls": [{"agent": agent, **SEND}, call]}
        expect(live.post("/v1/decisions/batch", json=batch, headers=auth), 422, "invalid-body")
        assert time.monotonic() - started < 2
    _nothing_written(harness)


def test_an_expected_cost_of_the_bound_itself_is_charged(
    live: httpx.Client, harness: Harness
) -> None:
    harness.add_agent("w", "wide")
    for cost in (1_000_000_000, "1e9", "0.0000001", "1e-1000000000", "-0"):
        call = {"agent": "w", **SEND, "expected_cost": cost}
        response = live.post("/v1/decisions", json=call, headers=harness.auth())
        assert response.status_code == 200 and response.json()["effect"] == "allow"
    # 1e-7 and 1e-1000000000 are charged a whole micro-USD each (a cost rounds up)
    assert harness.service.store.spent("agent:w", 0) == 2 * 10**15 + 2


def test_costs_under_a_micro_usd_still_reach_the_cap(live: httpx.Client, harness: Harness) -> None:
    """A cost rounds up to whole micro-USD, a cap down: rounded to the nearest, a cost of
    0.0000004 was charged 0, and a thousand of them passed a cap of 0.000001."""
    harness.add_agent("m", "wide", budget={"amount": "0.000001", "period": "total"})
    tiny = {"agent": "m", **SEND, "expected_cost": "0.0000004"}
    batch = live.post("/v1/decisions/batch", json={"calls": [tiny] * 20}, headers=harness.auth())
    effects = [d["effect"] for d in batch.json()["decisions"]]
    assert effects == ["allow"] + ["deny"] * 19
    assert harness.service.store.spent("agent:m", 0) == 1
    assert cap_micros("0.0000019") == 1 and to_micros("0.0000011") == 2


@pytest.mark.parametrize("amount", ["1e999990", "1e1000000", "1000000001", 10**30, "1e5000", 1e300])
def test_budgets_and_max_cost_past_the_bound_are_refused(
    live: httpx.Client, harness: Harness, amount: Any
) -> None:
    auth = harness.auth()
    budget = {"amount": amount, "period": "total"}
    started = time.monotonic()
    agent = {"name": "b", "profile": "wide", "identity": harness.identity, "budget": budget}
    expect(live.post("/v1/agents", json=agent, headers=auth), 422, "invalid-body")
    expect(live.patch("/v1/agents/a1", json={"budget": budget}, headers=auth), 422,
           "invalid-body")  # fmt: skip
    thread = {"agent": "a1", "max_cost": amount}
    expect(live.post("/v1/threads", json=thread, headers=auth), 422, "invalid-body")
    assert time.monotonic() - started < 2
    store = harness.service.store
    assert [r.id for r in store.scan("agents")] == ["a1"] and not list(store.scan("threads"))
    a1 = store.get("agents", "a1")
    assert a1 is not None and a1["budget"] is None


def _overflow_then_cap(live: httpx.Client, harness: Harness) -> None:
    """A cap put on an agent whose charges sum past 64 bits: every call of it is denied for
    its budget (fail closed), with a 200, and a batch with another agent's calls goes
    through."""
    auth = harness.auth()
    capped = live.patch("/v1/agents/w", json={"budget": {"amount": "100", "period": "total"}},
                        headers=auth)  # fmt: skip
    assert capped.status_code == 200, capped.text
    assert harness.service.store.spent("agent:w", 0) == SPENT_OVERFLOW
    before = harness.service.store.last_seq()
    for cost in (None, 0, 1):
        call = {"agent": "w", **SEND, **({} if cost is None else {"expected_cost": cost})}
        response = live.post("/v1/decisions", json=call, headers=auth)
        assert response.status_code == 200, response.text
        decision = response.json()  # spent is over the cap already, so even a free call
        assert decision["effect"] == "deny"
        assert any(r["kind"] == "budget" and "agent `w` budget 100 USD" in r["message"]
                   for r in decision["reasons"])  # fmt: skip
    mixed = {"calls": [{"agent": "w", **SEND, "expected_cost": 5},
                       {"agent": "n", **SEND, "expected_cost": 5}]}  # fmt: skip
    response = live.post("/v1/decisions/batch", json=mixed, headers=auth)
    assert response.status_code == 200, response.text
    assert [d["effect"] for d in response.json()["decisions"]] == ["deny", "allow"]
    assert harness.service.store.last_seq() == before + 5


def test_a_ledger_past_64_bits_denies_once_capped(live: httpx.Client, harness: Harness) -> None:
    """Charges made before costs had a bound (9 * 10^12 USD twice, the reviewer's), on an
    agent with no cap: once capped, its calls are denied, not a 500 forever."""
    harness.add_agent("w", "wide")
    harness.add_agent("n", "wide")
    harness.service.store.charge(["agent:w"], 9 * 10**18, 1)
    harness.service.store.charge(["agent:w"], 9 * 10**18, 2)
    _overflow_then_cap(live, harness)


def test_bounded_costs_past_64_bits_deny_once_capped(live: httpx.Client, harness: Harness) -> None:
    """The same through the API alone: 9,224 charges of the largest cost (10^9 USD) pass
    2^63 micro-USD."""
    harness.add_agent("w", "wide")
    harness.add_agent("n", "wide")
    call = {"agent": "w", **SEND, "expected_cost": 1_000_000_000}
    for size in (1000,) * 9 + (224,):
        response = live.post("/v1/decisions/batch", json={"calls": [call] * size},
                             headers=harness.auth())  # fmt: skip
        assert response.status_code == 200, response.text
    _overflow_then_cap(live, harness)


def _usd(micros: int) -> Decimal:
    return Decimal(micros).scaleb(-6)


def test_amounts_of_more_than_28_digits_round_the_right_way(
    live: httpx.Client, harness: Harness
) -> None:
    """A cost a hair over a cap is over it, however many digits the hair takes: scaled to
    micro-USD in Decimal's 28 digits, 1.0000000000000000000000000000001 USD was rounded
    to 1,000,000 micro-USD before its ceiling was taken, and a cap of
    0.9999999999999999999999999999999 USD rounded up to 1,000,000, so a call over the
    cap was allowed."""
    hair = "1.0000000000000000000000000000001"
    under = "0.9999999999999999999999999999999"
    assert (to_micros(hair), cap_micros(hair)) == (1_000_001, 1_000_000)
    assert (to_micros(under), cap_micros(under)) == (1_000_000, 999_999)
    harness.add_agent("one", "wide", budget={"amount": "1", "period": "total"})
    harness.add_agent("less", "wide", budget={"amount": under, "period": "24h"})
    auth = harness.auth()
    for agent, cost in (("one", hair), ("less", "1")):
        for sent in (cost, N):  # as a string and as a JSON number
            call = with_number({"agent": agent, **SEND, "expected_cost": sent}, cost)
            response = live.post("/v1/decisions", content=call, headers=auth)
            assert response.status_code == 200, response.text
            decision = response.json()
            assert decision["effect"] == "deny", (agent, sent)
            assert decision["reasons"][-1]["kind"] == "budget"
    assert [harness.service.store.spent(f"agent:{a}", 0) for a in ("one", "less")] == [0, 0]


amounts = st.one_of(
    st.decimals(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(),
    st.builds(lambda m, e: f"{m}e{e}", st.integers(-99, 99), st.integers(-(10**6), 10**6)),
    st.text(max_size=12),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(amounts)
def test_amounts_convert_quickly_within_their_bounds(amount: Any) -> None:
    started = time.monotonic()
    try:
        micros = to_micros(amount)
    except ValueError:
        micros = None
    try:
        cap = cap_micros(amount)
    except ValueError:
        cap = None
    assert time.monotonic() - started < 0.5
    if micros is not None:
        assert abs(micros) <= MAX_USD * 1_000_000
        # compared in USD, exactly (a micro-USD count scaled down by 10^6 is exact; the
        # amount scaled up is rounded to the context's 28 digits)
        value = Decimal(str(amount))
        assert _usd(micros - 1) < value <= _usd(micros)  # a cost rounds up
        assert cap is not None and _usd(cap) <= value < _usd(cap + 1)  # a cap down
    if cap is not None:
        assert -MAX_MICROS <= cap <= MAX_MICROS < SPENT_OVERFLOW
        value = Decimal(str(amount))
        if value >= Decimal(MAX_MICROS) / 1_000_000:
            assert cap == MAX_MICROS
