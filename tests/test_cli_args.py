"""`charter decide` and `explain`: `--args` and `--context` are refused as the service
refuses a call's `args` and `context` (api/http/calls.py), each with a usage error
(exit 2) that says what is wrong, never an internal error or Python's own words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from api.cli import main
from api.service.encoding import MAX_DEPTH, check_depth
from api.service.errors import ServiceError

ROOT = Path(__file__).resolve().parent.parent
DECIDE = ["decide", "--workspace", str(ROOT / "fixtures" / "workspace"), "--profile",
          "support", "--tool", "mail.send"]  # fmt: skip
SAMPLE = {"to": "bob@example.com", "subject": "hi", "body": "hello"}


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """What a usage error says; it prints nothing on stdout."""
    with pytest.raises(SystemExit) as info:
        main(list(argv))
    out, err = capsys.readouterr()
    assert info.value.code == 2 and out == "", (out, err)
    assert "Traceback" not in err and "internal error" not in err
    return err


def decided(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def nested(levels: int) -> dict[str, Any]:
    """An object nested `levels` deep as the service counts (the object itself is 1)."""
    value: Any = []
    for _ in range(levels - 2):
        value = [value]
    return {**SAMPLE, "cc": value}


@pytest.mark.parametrize("verb", ["decide", "explain"])
@pytest.mark.parametrize("option", ["--args", "--context"])
def test_nesting_deeper_than_the_service_takes_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], verb: str, option: str
) -> None:
    """2,000 levels were an internal error (RecursionError); the limit is the service's."""
    for text in ("[" * 2000 + "]" * 2000, "{" + '"a": {' * 2000 + "}" * 2001):
        err = refused(capsys, verb, *DECIDE[1:], option, text)
        assert err == f"charter: {option} is nested more than {MAX_DEPTH} levels deep\n"
    deep = nested(MAX_DEPTH + 1)
    with pytest.raises(ServiceError):  # the service refuses the same value
        check_depth(deep, "args")
    err = refused(capsys, verb, *DECIDE[1:], option, json.dumps(deep))
    assert f"nested more than {MAX_DEPTH} levels deep" in err


def test_nesting_the_service_takes_is_decided(capsys: pytest.CaptureFixture[str]) -> None:
    deepest = nested(MAX_DEPTH)
    check_depth(deepest, "args")  # the service takes it
    decision = decided(capsys, *DECIDE, "--args", json.dumps(deepest))
    assert decision["effect"] == "deny"  # `cc` is a list of strings: the shape says no
    decision = decided(capsys, *DECIDE, "--args", json.dumps(SAMPLE),
                       "--context", json.dumps(nested(MAX_DEPTH)))  # fmt: skip
    assert decision["effect"] == "allow"


def test_an_integer_of_the_largest_size_is_read(capsys: pytest.CaptureFixture[str]) -> None:
    args = {**SAMPLE, "n": 2**1024 - 2**970 - 1}  # (the largest a float does not make infinite)
    decision = decided(capsys, *DECIDE, "--args", json.dumps(args))
    assert decision["effect"] == "deny"  # (no argument `n`)
    assert "`mail.send` has no argument `n`" in decision["reasons"][0]["message"]


@pytest.mark.parametrize(
    ("text", "what"),
    [("[1]", "an array"), ('"x"', "a string"), ("1", "a number"), ("true", "a boolean"),
     ("null", "null")],
)  # fmt: skip
def test_args_that_are_not_an_object_are_a_usage_error(
    capsys: pytest.CaptureFixture[str], text: str, what: str
) -> None:
    """`[1]` was decided as if it were arguments."""
    err = refused(capsys, *DECIDE, "--args", text)
    assert err.startswith(f"charter: --args is not a JSON object: it is {what}\n")
    assert "help: name each argument: e.g. `--args '{" in err


def test_context_that_is_not_an_object_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = refused(capsys, *DECIDE, "--args", json.dumps(SAMPLE), "--context", "[1]")
    assert err.startswith("charter: --context is not a JSON object: it is an array\n")
    # `null` is no context, as `"context": null` is in a request
    decision = decided(capsys, *DECIDE, "--args", json.dumps(SAMPLE), "--context", "null")
    assert decision["effect"] == "allow"


@pytest.mark.parametrize("verb", ["decide", "explain"])
@pytest.mark.parametrize("option", ["--args", "--context"])
def test_a_key_twice_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], verb: str, option: str
) -> None:
    """The service refuses a call with a key given twice (400 `duplicate-key`), where the
    command line kept the last of the two."""
    for text in ('{"to": "eve@evil.test", "to": "bob@example.com", "subject": "s", "body": "b"}',
                 '{"to": "bob@example.com", "subject": "s", "body": "b", "x": {"k": 1, "k": 2}}'):  # fmt: skip
        err = refused(capsys, verb, *DECIDE[1:], option, text)
        assert "twice" in err and ("`to`" in err or "`k`" in err), err
