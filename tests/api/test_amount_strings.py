"""A USD amount sent as a string (`expected_cost`, a budget's `amount`, a thread's
`max_cost`) is read only when it is written as a JSON number is: Python's `Decimal` read
`"٥"` as 5, `"1_0"` as 10 and `" 5 "` as 5, none of which the same amount sent as a
number may be."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import jiter
import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.http.errors import status_of
from api.service.budget import amount_text, to_micros
from api.service.errors import ServiceError
from api.service.ops import command_of
from tests.api.conftest import Harness, N, expect, with_number

SEND = {"tool": "mail.send", "args": {"to": "bob@example.com", "subject": "s", "body": "b"}}
ODD = [
    "٥",  # ARABIC-INDIC DIGIT FIVE
    "１",  # FULLWIDTH DIGIT ONE
    "1_0",
    " 5 ",
    "5 ",
    "\t5",
    "5\n",
    "+5",
    ".5",
    "5.",
    "05",
    "0x10",
    "NaN",
    "-NaN",
    "sNaN",
    "Infinity",
    "-Infinity",
    "inf",
    "1e",
    "1e+",
    "e3",
    "",
    "5 USD",
]
PLAIN = ["5", "0.25", "1.50", "0", "1e3", "1E+2", "2.5e-1", "1e9", "1000000000.000000"]


def _errors_say_how(response: httpx.Response, loc: list[str]) -> None:
    expect(response, 422, "invalid-body")
    (error,) = response.json()["errors"]
    assert error["loc"] == loc and error["type"] == "value_error"
    assert "written as a JSON number" in error["message"] and "`0.25`" in error["message"]


def _nothing_written(harness: Harness) -> None:
    store = harness.service.store
    assert store.last_seq() == 0
    assert [r.id for r in store.scan("agents")] == ["a1"] and not list(store.scan("threads"))
    a1 = store.get("agents", "a1")
    assert a1 is not None and a1["budget"] is None
    assert store.spent("agent:a1", 0) == 0


@pytest.mark.parametrize("amount", ODD)
def test_an_odd_string_amount_is_refused_over_http(
    live: httpx.Client, harness: Harness, amount: str
) -> None:
    auth = harness.auth()
    budget = {"amount": amount, "period": "total"}
    agent = {"name": "b", "profile": "wide", "identity": harness.identity, "budget": budget}
    _errors_say_how(live.post("/v1/agents", json=agent, headers=auth), ["budget", "amount"])
    patched = live.patch("/v1/agents/a1", json={"budget": budget}, headers=auth)
    _errors_say_how(patched, ["budget", "amount"])
    thread = live.post("/v1/threads", json={"agent": "a1", "max_cost": amount}, headers=auth)
    _errors_say_how(thread, ["max_cost"])
    call = {"agent": "a1", **SEND, "expected_cost": amount}
    _errors_say_how(live.post("/v1/decisions", json=call, headers=auth), ["expected_cost"])
    batch = live.post("/v1/decisions/batch", json={"calls": [{"agent": "a1", **SEND}, call]},
                      headers=auth)  # fmt: skip
    _errors_say_how(batch, ["calls", "1", "expected_cost"])
    _nothing_written(harness)


@pytest.mark.parametrize("amount", ["٥", "1_0", " 5 ", "NaN", "Infinity", "+5", ".5"])
def test_an_odd_string_amount_is_refused_by_the_commands(harness: Harness, amount: str) -> None:
    """Reached without the HTTP bodies (in process, or as a rewrite hook's or an approved
    request's arguments): the tools' commands refuse it, saying what an amount looks
    like."""
    for refused in _refused_by_the_commands(harness, amount):
        (error,) = refused.extra["errors"]
        assert "written as a JSON number" in error["message"]
    _nothing_written(harness)


def _refused_by_the_commands(harness: Harness, amount: Any) -> list[ServiceError]:
    """`amount` as a budget to agents.create and agents.update and as a thread's max_cost
    to threads.create, each read into its command as a rewrite's or an approval's
    arguments are (api.service.ops.command_of): each `invalid-rewrite`, at the amount."""
    budget = {"amount": amount, "period": "total"}
    cases: list[tuple[str, dict[str, Any], list[str]]] = [
        ("agents.create", {"name": "b", "profile": "wide", "identity": harness.identity,
                           "budget": budget}, ["budget", "amount"]),
        ("agents.update", {"id": "a1", "budget": budget}, ["budget", "amount"]),
        ("threads.create", {"agent": "a1", "max_cost": amount}, ["max_cost"]),
    ]  # fmt: skip
    errors = []
    for tool, args, loc in cases:
        with pytest.raises(ServiceError) as refused:
            command_of(tool, args)
        assert (status_of(refused.value.code), refused.value.code) == (403, "invalid-rewrite")
        assert [error["loc"] for error in refused.value.extra["errors"]] == [loc]
        errors.append(refused.value)
    return errors


@pytest.mark.parametrize("amount", ["-0.0000001", "-1e-1000000000", Decimal("-0.0000005")])
def test_a_negative_amount_under_a_micro_usd_is_refused_by_the_commands(
    harness: Harness, amount: Any
) -> None:
    """An amount is from 0 up: one just under 0 rounded up to 0 micro-USD as the bound was
    checked, so it was taken and stored, a cap that then denied every call (its budget
    rounded down to -1 micro-USD). The bodies refuse it over HTTP, and the commands every
    other way (in process, a rewrite's or an approved request's arguments)."""
    assert len(_refused_by_the_commands(harness, amount)) == 3
    _nothing_written(harness)


@pytest.mark.parametrize("amount", PLAIN)
def test_plain_string_amounts_and_numbers_are_still_taken(
    live: httpx.Client, harness: Harness, amount: str
) -> None:
    auth = harness.auth()
    value = Decimal(amount)
    for sent in (amount, N):  # as a string and as the JSON number of the same text
        budget = {"amount": sent, "period": "total"}
        agent = {"name": "b", "profile": "wide", "identity": harness.identity, "budget": budget}
        made = live.post("/v1/agents", content=with_number(agent, amount), headers=auth)
        assert made.status_code == 201, made.text
        assert Decimal(str(made.json()["budget"]["amount"])) == value
        thread = with_number({"agent": made.json()["id"], "max_cost": sent}, amount)
        opened = live.post("/v1/threads", content=thread, headers=auth)
        assert opened.status_code == 201, opened.text
        assert Decimal(str(opened.json()["max_cost"])) == value
        call = {"agent": made.json()["id"], **SEND, "thread": opened.json()["id"],
                "expected_cost": sent}  # fmt: skip
        decided = live.post("/v1/decisions", content=with_number(call, amount), headers=auth)
        assert decided.status_code == 200, decided.text
        assert decided.json()["effect"] == "allow"  # (the cost is the agent's and thread's cap)
        spent = harness.service.store.spent(f"thread:{opened.json()['id']}", 0)
        assert spent == to_micros(value)


@given(st.text(alphabet="0123456789.eE+-_٥１xN", max_size=8))
def test_a_string_amount_is_taken_when_json_reads_its_text_as_a_number(text: str) -> None:
    try:
        parsed = jiter.from_json(text.encode(), allow_inf_nan=False, float_mode="lossless-float")
        number = type(parsed) is int or type(parsed) is jiter.LosslessFloat
    except ValueError:
        number = False
    try:
        taken = amount_text(text) == text
    except ValueError:
        taken = False
    assert taken == number, text
