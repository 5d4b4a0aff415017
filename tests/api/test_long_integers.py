"""An integer a double cannot hold is refused as a number a double cannot hold in any
other notation is: a 422 `number-out-of-range` saying it has too many digits, and nothing
is written. Past 4,300 digits the JSON parsers themselves stop (Python's int-string
limit), and that was a 400 `malformed-json`, though the body is JSON; from 310 digits to
4,300 the integer was taken, where `1e400` was refused, and compared against a Decimal
it cost 0.3 ms a comparison. Integers within the range keep every digit."""

from __future__ import annotations

import sys
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from api import commands as c
from api.http.body import parse
from api.http.calls import batch_calls, one_call
from api.http.errors import status_of
from api.service.errors import ServiceError
from tests.api.conftest import Harness, N, code_of, with_number

PARSER_LIMIT = "9" * 4301  # one digit past what jiter and Python turn into an int
# The least integer whose float is infinite: the float max plus half its last unit.
FIRST_PAST = 2**1024 - 2**970
LARGEST = FIRST_PAST - 1
PAST_A_DOUBLE = [
    PARSER_LIMIT,
    "-" + PARSER_LIMIT,
    "1" + "0" * 5000,
    "9" * 310,
    str(FIRST_PAST),
    str(-FIRST_PAST),
    "1" + "0" * 4301 + ".5",  # (the parsers stop before the fraction)
]
WITHIN = [10**30, -(2**80), int(sys.float_info.max), LARGEST, -LARGEST, 10**308]


def _refused(text: str, exc: ServiceError) -> None:
    assert (status_of(exc.code), exc.code) == (422, "number-out-of-range"), exc.message
    assert "too many digits" in exc.message, exc.message
    assert f"`{text[:20]}" in exc.message  # (its first digits, in backticks)
    assert "1.8e308" in exc.extra["help"]


def test_the_largest_integers_a_double_holds_are_exact() -> None:
    assert float(LARGEST) == sys.float_info.max
    with pytest.raises(OverflowError):
        float(FIRST_PAST)


@pytest.mark.parametrize("text", PAST_A_DOUBLE, ids=lambda t: f"{t[:3]}..({len(t)})")
def test_every_reader_refuses_an_integer_past_a_double(text: str) -> None:
    """The decisions' fast path and models' path, a batch, and a management body."""
    call = {"agent": "a1", "tool": "t", "args": {"priority": N}}
    bodies: list[Callable[[], object]] = [
        lambda: one_call(with_number(call, text)),
        lambda: one_call(with_number({**call, "thread": None}, text)),  # the models' path
        lambda: one_call(with_number({**call, "args": {}, "context": {"deep": [{"x": N}]}}, text)),
        lambda: batch_calls(with_number({"calls": [call, call]}, text)),
        lambda: batch_calls(with_number({"calls": [{**call, "turn": None}]}, text)),
        lambda: parse(c.AgentUpdate, with_number({"metadata": {"n": [N]}}, text)),
    ]
    for read in bodies:
        with pytest.raises(ServiceError) as caught:
            read()
        _refused(text, caught.value)


@pytest.mark.parametrize("number", WITHIN, ids=lambda n: f"{str(n)[:3]}..({len(str(n))})")
def test_integers_within_a_double_keep_every_digit(number: int) -> None:
    call = {"agent": "a1", "tool": "t", "args": {"n": number}, "context": {"l": [number]}}
    for read in (
        one_call(with_number(call, "0")),
        one_call(with_number({**call, "turn": None}, "0")),
    ):
        assert read.args["n"] == number and type(read.args["n"]) is int
        assert read.context == {"l": [number]}
    (batched,) = batch_calls(with_number({"calls": [call]}, "0"))
    assert batched.args["n"] == number
    update = parse(c.AgentUpdate, with_number({"metadata": {"n": number}}, "0"))
    assert update.metadata == {"n": number}


@pytest.mark.parametrize("text", [PARSER_LIMIT, "9" * 400])
def test_over_http_nothing_is_written(client: Any, harness: Harness, text: str) -> None:
    """`POST /v1/decisions` with 4,301 nines was a 400 "the body is not valid JSON"."""
    auth = harness.auth()
    store = harness.service.store
    seq, agent = store.last_seq(), store.get("agents", "a1")
    call = {"agent": "a1", "tool": "mail.send", "args": {"to": "b@example.com",
            "subject": "s", "body": "b", "priority": N}}  # fmt: skip
    create = {"name": "m", "profile": "narrow", "identity": harness.identity,
              "metadata": {"limit": N}}  # fmt: skip
    for method, path, doc in (
        ("POST", "/v1/decisions", call),
        ("POST", "/v1/decisions", {**call, "context": {"risk": N}}),
        ("POST", "/v1/decisions/batch", {"calls": [call]}),
        ("POST", "/v1/agents", create),
        ("PATCH", "/v1/agents/a1", {"metadata": {"limit": N}}),
        ("PATCH", f"/v1/identities/{harness.identity}", {"metadata": {"n": N}}),
    ):
        response = client.request(method, path, content=with_number(doc, text), headers=auth)
        assert code_of(response) == (422, "number-out-of-range"), (path, response.text[:300])
        problem = response.json()
        assert "too many digits" in problem["detail"] and f"`{text[:30]}" in problem["detail"]
        assert response.headers["content-type"] == "application/problem+json"
    assert store.last_seq() == seq and store.get("agents", "a1") == agent
    assert [r.id for r in store.scan("agents")] == ["a1"]


def test_a_json_policy_upload_past_the_parser_is_out_of_range(
    client: Any, harness: Harness
) -> None:
    """`PUT /v1/policy` as JSON: a number the parser cannot read is out of range; one it
    reads where the schema wants a string is the schema's 422, as before."""
    auth = {**harness.auth(), "content-type": "application/json"}
    revision = harness.service.store.latest_revision()
    upload = {"files": [{"path": "p.charter", "text": "role r { allow a.b }"}], "note": N}
    response = client.put("/v1/policy", content=with_number(upload, PARSER_LIMIT), headers=auth)
    assert code_of(response) == (422, "number-out-of-range"), response.text[:300]
    response = client.put("/v1/policy", content=with_number(upload, "12"), headers=auth)
    assert code_of(response) == (422, "invalid-body"), response.text[:300]
    assert harness.service.store.latest_revision() == revision


def test_a_decimal_with_a_long_integer_part_is_out_of_range_too() -> None:
    """`1` and 400 zeros, then `.5`, was refused before; the same as an integer now is."""
    for text in ("1" + "0" * 400 + ".5", "1" + "0" * 400):
        with pytest.raises(ServiceError) as caught:
            one_call(with_number({"agent": "a1", "tool": "t", "args": {"x": N}}, text))
        assert caught.value.code == "number-out-of-range"
    exact = one_call(
        with_number({"agent": "a1", "tool": "t", "args": {"x": N}}, "1" + "0" * 300 + ".5")
    )
    assert exact.args["x"] == Decimal("1" + "0" * 300 + ".5")
