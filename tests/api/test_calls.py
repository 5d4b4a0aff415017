"""The fast request reader never accepts what the models refuse, and reads what it
accepts exactly as the models do; both read every JSON number exactly (a float only when
it is exactly the number its text says, else the Decimal of the text)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from api.http import models as m
from api.http.calls import (
    _call,
    _checked,
    _fast_call,
    _models_checked,
    _parsed,
    batch_calls,
    one_call,
)
from api.http.errors import status_of
from api.service.calls import Call
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
    {**OK, "args": {"d": Decimal("100.000000000000000000000001"), "e": Decimal("0.1")}},
    {**OK, "args": {"l": [Decimal("1e-300"), {"x": Decimal("-2.675")}], "f": 1e300}},
    {**OK, "context": {"c": Decimal("0.30000000000000000001"), "f": 20.5}},
    {**OK, "expected_cost": Decimal("100.000000000000000000000001")},
    {**OK, "args": {"tiny": Decimal("1e-400")}},
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


def _encode(value: Any) -> str:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{_encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_encode(v) for v in value) + "]"
    return json.dumps(value)


def _raw(body: Any) -> bytes:
    return _encode(body).encode()


def _fast(raw: bytes) -> Call | str | None:
    """What the fast path reads (None: it leaves the body to the models)."""
    call = _fast_call(_parsed(raw))
    try:
        return None if call is None else _checked([call])[0]
    except ServiceError as exc:
        return f"refused {status_of(exc.code)}"


def _model(raw: bytes) -> Call | str:
    try:
        read = _call(m.DecisionRequest.model_validate_json(raw))
        return _models_checked([read], raw, _parsed(raw), False)[0]
    except ValidationError:
        return "refused 422"
    except ServiceError as exc:
        return f"refused {status_of(exc.code)}"


@pytest.mark.parametrize("body", CASES, ids=[str(i) for i in range(len(CASES))])
def test_fast_path_agrees_with_the_model(body: Any) -> None:
    raw = _raw(body)
    fast = _fast(raw)
    model = _model(raw)
    if fast is not None:
        assert fast == model
        if not isinstance(fast, str):
            assert type(fast.args) is dict
    if isinstance(model, Call):
        _assert_exact(body.get("args") or {}, model.args)
        _assert_exact(body.get("context") or {}, model.context or {})


def _assert_exact(sent: Any, read: Any) -> None:
    """Every number read is the number sent (compared exactly), of an exact type."""
    if isinstance(sent, dict):
        assert isinstance(read, dict) and sent.keys() == read.keys()
        for key, value in sent.items():
            _assert_exact(value, read[key])
    elif isinstance(sent, list):
        assert isinstance(read, list) and len(sent) == len(read)
        for value, got in zip(sent, read, strict=True):
            _assert_exact(value, got)
    elif isinstance(sent, float | Decimal):  # sent as the text of its repr() or str()
        assert type(read) in (float, Decimal)
        assert Decimal(repr(sent) if type(sent) is float else sent) == read  # exactly
    else:
        assert sent == read and type(sent) is type(read)


@st.composite
def number_texts(draw: st.DrawFn) -> str:
    """A JSON number with a fraction or an exponent (of any length, in the range of a
    double: past it, see test_numbers_past_a_double_are_refused)."""
    whole = draw(st.sampled_from(["0", "1", "7", "12", "100", "9007199254740993"]))
    whole = draw(st.one_of(st.just(whole), st.from_regex(r"[1-9][0-9]{0,25}", fullmatch=True)))
    fraction = draw(st.from_regex(r"[0-9]{0,40}", fullmatch=True))
    exponent = draw(st.one_of(st.none(), st.integers(-280, 280)))
    text = draw(st.sampled_from(["", "-"])) + whole
    if fraction or exponent is None:
        text += "." + (fraction or "0")
    if exponent is not None:
        letter = draw(st.sampled_from(["e", "E"]))
        sign = "-" if exponent < 0 else draw(st.sampled_from(["", "+"]))
        text += f"{letter}{sign}{abs(exponent)}"
    return text


@given(st.lists(number_texts(), min_size=1, max_size=4), st.booleans())
def test_every_number_is_read_exactly_on_both_paths(texts: list[str], nested: bool) -> None:
    """For any decimal text: the fast path and the models read the same value, and that
    value is exactly the text's (a float only when the float is the text's number)."""
    numbers = ",".join(texts)
    args = f'{{"l": [{numbers}], "m": {{"x": {texts[0]}}}}}' if nested else f'{{"x": {texts[0]}}}'
    raw = f'{{"agent": "a1", "tool": "t", "args": {args}, "context": {{"c": [{numbers}]}}}}'
    fast = _fast(raw.encode())
    model = _model(raw.encode())
    assert isinstance(fast, Call) and fast == model
    read = [*fast.args["l"], fast.args["m"]["x"]] if nested else [fast.args["x"]]
    sent = [*texts, texts[0]] if nested else [texts[0]]
    assert fast.context is not None
    read += fast.context["c"]
    sent += texts
    for text, value in zip(sent, read, strict=True):
        assert type(value) in (float, Decimal)
        assert value == Decimal(text)  # Decimal against float or Decimal: exact
        if type(value) is float:
            assert Decimal(value) == Decimal(text)


@pytest.mark.parametrize(
    "text",
    [
        "1e-400",
        "-1e-400",
        "1e400",
        "-1e400",
        "1e999999999999999999999",
        "0." + "0" * 400 + "1",
        "1" + "0" * 400 + ".5",
    ],
)
def test_numbers_past_a_double_are_refused(text: str) -> None:
    """A number a float would round to 0 or an infinity is a 422, on both paths (never
    read as 0.0 or inf); zero itself, written any way, is zero."""
    for body in (
        f'{{"agent": "a1", "tool": "t", "args": {{"x": {text}}}}}',
        f'{{"agent": "a1", "tool": "t", "args": {{"x": {text}}}, "expected_cost": 1.5}}',
    ):
        with pytest.raises(ServiceError) as caught:
            one_call(body.encode())
        assert status_of(caught.value.code) == 422 and caught.value.code == "number-out-of-range"
    with pytest.raises(ServiceError):
        batch_calls(
            f'{{"calls": [{{"agent": "a1", "tool": "t", "context": {{"x": [{text}]}}}}]}}'.encode()
        )
    for zero in ("0.0", "-0.0", "0e-400", "0.000e5000"):
        assert (
            one_call(f'{{"agent": "a1", "tool": "t", "args": {{"x": {zero}}}}}'.encode()).args["x"]
            == 0
        )


def test_an_expected_cost_is_read_exactly() -> None:
    raw = b'{"agent": "a1", "tool": "t", "expected_cost": 100.000000000000000000000001}'
    assert one_call(raw).expected_cost == Decimal("100.000000000000000000000001")
    raw = b'{"calls": [{"agent": "a1", "tool": "t", "expected_cost": 0.1}]}'
    assert batch_calls(raw)[0].expected_cost == Decimal("0.1")


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
    body: dict[str, Any]  # JSON bodies of different shapes
    for body in ({"calls": []}, {"calls": [OK], "x": 1}, {"calls": OK}):
        with pytest.raises(ServiceError) as caught:
            batch_calls(json.dumps(body).encode())
        assert caught.value.code == "invalid-body"


def test_nan_goes_the_models_way_and_is_refused_there() -> None:
    """The fast path's strict parse fails; the models read a float NaN, which JSON has no
    place for: 400 `malformed-json`, as for any call of a batch."""
    raw = b'{"agent": "a1", "tool": "t", "args": {"x": NaN}}'
    assert _parsed(raw) is None and _fast_call(_parsed(raw)) is None
    for read, body in ((one_call, raw), (batch_calls, b'{"calls": [%s]}' % raw)):
        with pytest.raises(ServiceError) as caught:
            read(body)
        assert (status_of(caught.value.code), caught.value.code) == (400, "malformed-json")


def test_batch_reads_every_call() -> None:
    calls = batch_calls(json.dumps({"calls": [OK, {**OK, "agent": "a2"}]}).encode())
    assert [c.agent for c in calls] == ["a1", "a2"]
    assert batch_calls(json.dumps({"calls": [OK, {**OK, "expected_cost": "2"}]}).encode())[
        1
    ].expected_cost == Decimal(2)
