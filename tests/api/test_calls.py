"""The fast request reader never accepts what the models refuse, and reads what it
accepts exactly as the models do."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from api.http import models as m
from api.http.calls import _call, _fast_call, _parsed, batch_calls, one_call
from api.service.errors import ServiceError

OK = {"agent": "a1", "tool": "mail.send", "args": {"to": "x"}}
CASES: list[Any] = [
    OK,
    {"agent": "a1", "tool": "t"},
    {"agent": "a1", "tool": "t", "turn": "tu"},
    {"agent": "a1", "tool": "t", "thread": "th"},
    {"agent": "a1", "tool": "t", "context": {"k": 1}},
    {"agent": "a1", "tool": "t", "expected_cost": 2},
    {**OK, "thread": "th", "turn": "tu", "connection": "c", "context": {"k": [1, {"a": 2}]}},
    {**OK, "thread": None, "turn": None, "connection": None, "context": None},
    {**OK, "expected_cost": 3},
    {**OK, "expected_cost": 0},
    {**OK, "expected_cost": None},
    {**OK, "expected_cost": "1.50"},
    {**OK, "expected_cost": 1.5},
    {**OK, "expected_cost": -1},
    {**OK, "expected_cost": True},
    {**OK, "args": {"big": 2**80, "f": 1.5, "n": None, "s": "\u00e9"}},
    {**OK, "args": None},
    {**OK, "args": []},
    {**OK, "context": []},
    {**OK, "thread": 3},
    {**OK, "turn": ["x"]},
    {**OK, "extra": 1},
    {"agent": "", "tool": "t"},
    {"agent": "a" * 256, "tool": "t"},
    {"agent": "a" * 257, "tool": "t"},
    {"agent": "a1", "tool": "t" * 257},
    {"agent": 1, "tool": "t"},
    {"tool": "t"},
    {"agent": "a1"},
    [OK],
    "text",
    None,
]


def _model(body: Any) -> Any:
    try:
        return _call(m.DecisionRequest.model_validate_json(json.dumps(body)))
    except ValidationError:
        return "refused"


@pytest.mark.parametrize("body", CASES, ids=[str(i) for i in range(len(CASES))])
def test_fast_path_agrees_with_the_model(body: Any) -> None:
    fast = _fast_call(_parsed(json.dumps(body).encode()))
    model = _model(body)
    if fast is not None:
        assert model != "refused"
        assert fast == model
        assert type(fast.args) is dict


def test_expected_cost_is_a_decimal() -> None:
    assert one_call(json.dumps({**OK, "expected_cost": 3}).encode()).expected_cost == Decimal(3)
    assert one_call(json.dumps({**OK, "expected_cost": "1.5"}).encode()).expected_cost == Decimal(
        "1.5"
    )


def test_errors_are_the_models() -> None:
    for raw, code in [
        (b"{nope", "malformed-json"),
        (b"", "invalid-body"),
        (b'{"agent": "a1"}', "invalid-body"),
    ]:
        with pytest.raises(ServiceError) as caught:
            one_call(raw)
        assert caught.value.code == code, raw
    deep: Any = 1
    for _ in range(40):
        deep = {"d": deep}
    with pytest.raises(ServiceError) as caught:
        one_call(json.dumps({**OK, "args": deep}).encode())
    assert caught.value.code == "too-deep"
    # a 422 anywhere in a batch wins over a too-deep call before it, as in the model path
    bad = {"calls": [{**OK, "args": deep}, {"agent": "a1"}]}
    with pytest.raises(ServiceError) as caught:
        batch_calls(json.dumps(bad).encode())
    assert caught.value.code == "invalid-body"
    with pytest.raises(ServiceError) as caught:
        batch_calls(json.dumps({"calls": [OK] * 1001}).encode())
    assert caught.value.code == "batch-too-large"
    for body in ({"calls": []}, {"calls": [OK], "x": 1}, {"calls": OK}):
        with pytest.raises(ServiceError) as caught:
            batch_calls(json.dumps(body).encode())
        assert caught.value.code == "invalid-body"


def test_nan_goes_the_models_way() -> None:
    raw = b'{"agent": "a1", "tool": "t", "args": {"x": NaN}}'
    assert _fast_call(_parsed(raw)) is None
    assert one_call(raw).args["x"] != 0  # the model's reading (a float NaN)


def test_batch_reads_every_call() -> None:
    calls = batch_calls(json.dumps({"calls": [OK, {**OK, "agent": "a2"}]}).encode())
    assert [c.agent for c in calls] == ["a1", "a2"]
    assert batch_calls(json.dumps({"calls": [OK, {**OK, "expected_cost": "2"}]}).encode())[
        1
    ].expected_cost == Decimal(2)
