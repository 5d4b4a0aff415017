"""`charter decide` and `explain` (api/cli_args.py): `--args`, `--context` and `--tool` are
refused as the service refuses a call's `args`, `context` and `tool` (api/http/calls.py),
each with a usage error (exit 2) that says what is wrong, never an internal error or
Python's own words."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.cli import main
from api.cli_args import json_object
from api.http.calls import one_call
from api.http.errors import status_of
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


def _service_refuses(field: str, value_text: str) -> ServiceError:
    """The service's refusal of a call whose `field` is `value_text` (JSON, as written)."""
    body = '{"agent": "a1", "tool": "mail.send", "' + field + '": ' + value_text + "}"
    with pytest.raises(ServiceError) as info:
        one_call(body.encode("utf-8"))
    return info.value


# Lone halves of a surrogate pair, as JSON escapes: (the text, the escape named, its column)
LONE = [
    ('{"to": "\\ud800", "subject": "s", "body": "b"}', "\\ud800", 9),
    ('{"to": "bob@example.com", "subject": "s", "body": "b", "\\uDC00": 1}', "\\uDC00", 57),
    ('{"to": "a\\udbffb", "subject": "s", "body": "b"}', "\\udbff", 10),
    ('{"to": ["\\ude00\\ud83d"], "subject": "s", "body": "b"}', "\\ude00", 10),  # (wrong order)
    ('{"to": "\\ud83d\\ud83d\\ude00", "subject": "s", "body": "b"}', "\\ud83d", 9),
    ('{"to": "\\\\\\ud800", "subject": "s", "body": "b"}', "\\ud800", 11),  # (after a `\\`)
]


@pytest.mark.parametrize("verb", ["decide", "explain"])
@pytest.mark.parametrize("option", ["--args", "--context"])
@pytest.mark.parametrize(("text", "escape", "column"), LONE)
def test_a_lone_surrogate_escape_is_refused_as_the_service_refuses_it(
    capsys: pytest.CaptureFixture[str], verb: str, option: str, text: str, escape: str,
    column: int,
) -> None:  # fmt: skip
    """`{"to": "\\ud800"}` was decided (and its decision printed with the half in it);
    the service refuses such a call as not JSON (400 `malformed-json`), and so does the
    command line now, saying where."""
    refusal = _service_refuses(option[2:], text)
    assert (status_of(refusal.code), refusal.code) == (400, "malformed-json")
    argv = [*DECIDE[1:], "--args", json.dumps(SAMPLE), option, text]
    err = refused(capsys, verb, *argv)
    assert err == (
        f"charter: {option} is not valid JSON: `{escape}` at column {column} is half of a "
        "surrogate pair, not a character\n"
        "  = help: write the character itself, or both halves of the pair "
        "(`\\ud83d\\ude00` is one emoji)\n"
    )


@pytest.mark.parametrize(
    "text",
    ['{"to": "\\ud83d\\ude00@example.com"}', '{"to": "\\\\ud800@example.com"}',
     '{"to": "\\\\\\ud83d\\ude00@example.com"}', '{"\\uD83D\\uDE00": "x", "to": "b@example.com"}'],
)  # fmt: skip
def test_a_surrogate_pair_and_an_escaped_backslash_are_read(
    capsys: pytest.CaptureFixture[str], text: str
) -> None:
    """A pair is one character, and `\\\\ud800` is a backslash and `ud800`: the service
    reads both, and so does the command line."""
    one_call(('{"agent": "a1", "tool": "mail.send", "args": ' + text + "}").encode())
    decision = decided(capsys, *DECIDE, "--args", text)
    assert decision["effect"] == "deny"  # (subject and body are missing)
    assert decision["reasons"][0]["kind"] == "shape"


# Strings that hold lone surrogates as often as not (hypothesis draws none by itself).
awkward = st.text(st.characters() | st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff"]))


@given(st.dictionaries(awkward, awkward | st.lists(awkward, max_size=2), max_size=3))
def test_args_are_read_when_the_service_reads_them(value: dict[str, Any]) -> None:
    """Whatever strings a JSON object holds, written with escapes (as `json.dumps` writes
    a lone surrogate), the command line reads it exactly when the service does."""
    text = json.dumps(value)
    try:
        one_call(('{"agent": "a1", "tool": "t", "args": ' + text + "}").encode())
        service_reads = True
    except ServiceError:
        service_reads = False
    try:
        json_object(text, "args")
        cli_reads = True
    except SystemExit as exit_:
        assert exit_.code == 2
        cli_reads = False
    assert cli_reads == service_reads, text


@pytest.mark.parametrize(
    ("option", "value", "where"),
    [("--args", b'{"to": "caf\xe9"}', "byte `0xe9` at column 12"),
     ("--tool", b"mail.s\xffnd", "byte `0xff` at column 7")],
)  # fmt: skip
def test_an_option_that_is_not_utf8_is_refused_in_a_real_process(
    option: str, value: bytes, where: str
) -> None:
    """A byte of the command line that is not UTF-8 reaches Python as a lone surrogate
    (`\\xff` as U+DCFF): it was decided, and printed as `\\udcff`; no body the service
    reads can hold one."""
    argv = [sys.executable.encode(), b"-m", b"api.cli", *(a.encode() for a in DECIDE)]
    done = subprocess.run(
        [*argv, option.encode(), value], capture_output=True, cwd=ROOT, timeout=60, check=False
    )
    assert (done.returncode, done.stdout) == (2, b""), done
    assert done.stderr.decode() == (
        f"charter: {option} is not UTF-8: {where}\n  = help: give it as UTF-8 text\n"
    )


@pytest.mark.parametrize("verb", ["decide", "explain"])
def test_a_tool_the_service_would_not_take_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], verb: str
) -> None:
    """An empty `--tool`, or one longer than any tool's name, was decided (deny); the
    service refuses such a call (422 `invalid-body`), and a lone surrogate (400)."""
    for tool, says in (
        ("", "charter: --tool is empty\n"),
        ("t" * 257, "charter: --tool is 257 characters long: no tool's name is longer than 256\n"),
        ("mail.s\ud800nd", "charter: --tool is not UTF-8: lone surrogate `U+D800` at column 7\n"),
    ):
        refusal = _service_refuses("tool", json.dumps(tool))
        assert refusal.code in ("invalid-body", "malformed-json"), refusal.code
        argv = [*DECIDE[1:-1], tool, "--args", json.dumps(SAMPLE)]
        assert refused(capsys, verb, *argv).startswith(says)
    decision = decided(capsys, *DECIDE[:-1], "t" * 256)  # (the longest the service takes)
    assert decision["effect"] == "deny" and decision["reasons"][0]["kind"] == "shape"
