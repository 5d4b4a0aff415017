"""The command line reads and writes numbers as the service does (api/service/encoding.py):
`--args` and `--context` numbers exact, a number past a double's range refused, and
every JSON it prints writes a Decimal as a JSON number with all its digits."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.cli import main
from api.service.encoding import dumps_text

ROOT = Path(__file__).resolve().parent.parent
WORKSPACE = str(ROOT / "fixtures" / "workspace")
REFUND = ["decide", "--workspace", WORKSPACE, "--profile", "finance-desk", "--tool",
          "billing.refund"]  # fmt: skip
NARROW = """
toolset pay {
  tool refund(amount: decimal)
}
role small {
  allow pay.refund where args.amount <= 0.1
}
role slightly-more {
  allow pay.refund where args.amount < 0.1000000000000000000001
}
profile caller {
  roles small
  hooks none
}
"""


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _exact(text: str) -> Any:
    """JSON as written: a number with a fraction as the Decimal of its text, a string a str."""
    return json.loads(text, parse_float=Decimal)


def _refund(amount: str) -> str:
    return '{"order": "o-1", "amount": ' + amount + ', "reason": "x"}'  # the text as is


def test_decide_reads_and_prints_the_exact_amount(capsys: pytest.CaptureFixture[str]) -> None:
    """`amount <= 100.00`: 100.000000000000000000000001 was read as 100.0 and allowed, and
    printed as the float; the hook pauses over 50, and a hair over 50 is over it."""
    for amount, effect in (
        ("100.000000000000000000000001", "deny"),
        ("50.000000000000000000000001", "pause"),
        ("100.00", "pause"),
        ("20.5", "allow"),
        ("0.1", "allow"),
    ):
        code, out, _ = _run(capsys, *REFUND, "--args", _refund(amount))
        assert code == 0
        data = _exact(out)
        assert data["effect"] == effect, amount
        if effect != "deny":  # (a denied call has no arguments to run with)
            assert data["args"]["amount"] == Decimal(amount)
    code, out, _ = _run(capsys, *REFUND, "--args", _refund("50.000000000000000000000001"))
    assert '"amount": 50.000000000000000000000001' in out  # a number, with its digits
    code, out, _ = _run(
        capsys, "explain", *REFUND[1:], "--args", _refund("50.000000000000000000000001")
    )
    assert code == 0 and "result: PAUSE" in out  # (its trace gave `Decimal('50.00...01')`)
    assert "  arguments to use: {" in out and '"amount":50.000000000000000000000001,' in out


def test_context_numbers_are_exact_too(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "c.charter").write_text(
        "toolset t {\n  tool go()\n}\nrole r {\n  allow t.go where context.limit <= 100.00\n}\n"
        "profile p {\n  roles r\n  hooks none\n}\n",
        encoding="utf-8",
    )
    argv = ["decide", "--workspace", str(tmp_path), "--profile", "p", "--tool", "t.go"]
    for limit, effect in (("100.000000000000000000000001", "deny"), ("1e2", "allow")):
        code, out, _ = _run(capsys, *argv, "--context", '{"limit": ' + limit + "}")
        assert code == 0 and _exact(out)["effect"] == effect, limit


@pytest.mark.parametrize("text", ["1e-400", "-1e400", "[1, 1e999999999999999999999]"])
def test_a_number_past_a_double_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], text: str
) -> None:
    """1e-400 was read as 0.0 (and allowed): refused, as the service refuses it."""
    with pytest.raises(SystemExit) as info:
        main([*REFUND, "--args", _refund(text)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("charter: --args: the number `") and "range of a double" in err
    assert "\n  = help: a number here is 0 or of a size from about 5e-324 to 1.8e308" in err


@pytest.mark.parametrize(
    ("option", "text"),
    [("--args", "9" * 310), ("--args", "-" + "9" * 4301), ("--args", "[1, " + "1" * 5000 + "]"),
     ("--args", "-" + "9" * 5000), ("--context", "-" + "9" * 5000)],
    ids=lambda v: v if v.startswith("--") else f"{v[:4]}..({len(v)})",
)  # fmt: skip
def test_an_integer_past_a_double_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], option: str, text: str
) -> None:
    """As the service reads it: 310 digits were taken, and past 4,300 Python's own
    message ("Exceeds the limit (4300 digits) for integer string conversion", which said
    `use sys.set_int_max_str_digits()`) was shown; it says how many digits it has."""
    args = _refund(text) if option == "--args" else _refund("1")
    context = ["--context", '{"n": ' + text + "}"] if option == "--context" else []
    with pytest.raises(SystemExit) as info:
        main([*REFUND, "--args", args, *context])
    out, err = capsys.readouterr()
    assert info.value.code == 2 and out == "", (out, err)
    integer = text.removeprefix("[1, ").removesuffix("]")
    digits = len(integer.lstrip("-"))
    # the whole message: neither Python's own words nor a traceback
    assert err == (
        f"charter: {option}: the integer `{integer[:40]}...` has too many digits ({digits}): "
        "it is beyond the range of a double\n  = help: a number here is 0 or of a size from "
        "about 5e-324 to 1.8e308 (an integer has at most 309 digits)\n"
    )


def test_an_integer_within_a_double_is_read_exactly(capsys: pytest.CaptureFixture[str]) -> None:
    # the least integer a float does not round to minus infinity (a negative refund passes)
    least = str(-(2**1024 - 2**970 - 1))
    code, out, _ = _run(capsys, *REFUND, "--args", _refund(least))
    assert code == 0 and _exact(out)["args"]["amount"] == int(least)


def test_test_results_print_decimal_arguments_as_numbers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The fixture's `amount: 20.50` was printed as the string "20.50"."""
    code, out, _ = _run(capsys, "test", "--format", "json", WORKSPACE)
    assert code == 0
    amounts = [
        r["decision"]["args"]["amount"]
        for r in _exact(out)["results"]
        if r["tool"] == "billing.refund" and r["decision"]["args"] is not None
    ]
    assert Decimal("20.50") in amounts and Decimal("75.00") in amounts
    assert all(type(a) in (int, Decimal) for a in amounts), amounts
    assert '"amount": 20.50' in out


def test_fit_prints_a_decimal_counterexample_as_a_number(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A counterexample between 0.1 and 0.1000000000000000000001 was printed as a string,
    so sending it back was a call with a string `amount`."""
    (tmp_path / "p.charter").write_text(NARROW, encoding="utf-8")
    argv = ["fit", "--workspace", str(tmp_path), "--caller", "caller", "--role", "slightly-more"]
    code, out, _ = _run(capsys, *argv, "--format", "json")
    assert code == 1
    amount = _exact(out)["violations"][0]["counterexample"]["args"]["amount"]
    assert type(amount) is Decimal and Decimal("0.1") < amount < Decimal("0.1000000000000000000001")
    code, out, _ = _run(capsys, *argv)
    assert code == 1
    assert f'counterexample: pay.refund {{"amount":{amount}}}' in out
    # and the call it describes is denied to the caller, allowed to the candidate
    argv = ["decide", "--workspace", str(tmp_path), "--profile", "caller", "--tool", "pay.refund"]
    code, out, _ = _run(capsys, *argv, "--args", '{"amount": ' + str(amount) + "}")
    assert code == 0 and _exact(out)["effect"] == "deny"


def test_json_output_is_ascii_and_keeps_big_integers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """orjson refuses integers past 64 bits: the standard library writes those parts,
    indented alike; text stays ASCII (`\\u00e9`), as json.dumps wrote it."""
    (tmp_path / "g.charter").write_text(
        "toolset t {\n  tool go(n: int, s: str, d: decimal)\n}\nrole r {\n  allow t.go\n}\n"
        "profile p {\n  roles r\n  hooks none\n}\n",
        encoding="utf-8",
    )
    argv = ["decide", "--workspace", str(tmp_path), "--profile", "p", "--tool", "t.go"]
    args = json.dumps({"n": 2**70, "s": "caf\u00e9 \U0001f600", "d": 0.5})
    code, out, _ = _run(capsys, *argv, "--args", args[:-1] + ', "e": 0.1000000000000000000001}')
    assert code == 0 and out.isascii()
    data = _exact(out)
    assert data["effect"] == "deny"  # `e` is not an argument of `t.go`
    code, out, _ = _run(capsys, *argv, "--args", args)
    assert code == 0 and out.isascii()
    data = _exact(out)
    assert data["effect"] == "allow" and data["args"] == {
        "n": 2**70,
        "s": "caf\u00e9 \U0001f600",
        "d": Decimal("0.5"),
    }
    assert out == json.dumps(json.loads(out), indent=2) + "\n"  # the layout json.dumps gives


# (hypothesis draws no surrogates, whatever the categories: lone ones are asked for)
ANY_CHAR = st.characters() | st.sampled_from(["\ud800", "\udfff"])
json_values = st.recursive(
    # (no floats: orjson writes some as json.dumps does not, 0.00001 for 1e-05, both JSON)
    st.none() | st.booleans() | st.integers(-(2**80), 2**80) | st.text(ANY_CHAR, max_size=5),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(ANY_CHAR, max_size=3), inner, max_size=3),
    max_leaves=12,
)  # fmt: skip


@given(json_values)
def test_dumps_text_lays_out_json_as_the_standard_library(value: Any) -> None:
    """Whichever parts orjson refuses (an integer past 64 bits, a lone surrogate), the
    text is what json.dumps gives, indented or compact, keys sorted or not."""
    assert dumps_text(value) == json.dumps(value, indent=2)
    assert dumps_text(value, indent=False, sort_keys=True) == json.dumps(
        value, sort_keys=True, separators=(",", ":")
    )


def test_dumps_text_writes_a_decimal_as_a_number_anywhere() -> None:
    value = {"b": [Decimal("0.1"), 2**70, {"d": Decimal("-1E-7")}], "a": "\ud800"}
    assert dumps_text(value, indent=False, sort_keys=True) == (
        '{"a":"\\ud800","b":[0.1,1180591620717411303424,{"d":-1E-7}]}'
    )
    assert _exact(dumps_text(value))["b"][2]["d"] == Decimal("-1E-7")


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json_numbers(
    capsys: pytest.CaptureFixture[str], text: str
) -> None:
    """Python's JSON reader takes them; the command line refuses them as the service does."""
    with pytest.raises(SystemExit) as info:
        main([*REFUND, "--args", _refund(text)])
    assert info.value.code == 2
    assert capsys.readouterr().err == f"charter: --args: `{text}` is not a JSON number\n"


@pytest.mark.parametrize("command", ["fit", "diff"])
@pytest.mark.parametrize("value", ["0", "-5", "3600001", "1.5", "2s", "", "\uff15"])
def test_a_timeout_out_of_range_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], command: str, value: str
) -> None:
    """`--timeout-ms -5` was taken, and every check ended as a timeout, reported as a
    widening (exit 1) instead of a usage error."""
    argv = (
        ["fit", "--workspace", WORKSPACE, "--caller", "support", "--role", "researcher"]
        if command == "fit"
        else ["diff", WORKSPACE, WORKSPACE]
    )
    with pytest.raises(SystemExit) as info:
        main([*argv, "--timeout-ms", value])
    out, err = capsys.readouterr()
    assert info.value.code == 2 and out == ""
    assert err.splitlines()[-1] == (
        f"charter {command}: error: argument --timeout-ms: `{value}` is not a timeout: "
        "give milliseconds, from 1 to 3600000"
    )
