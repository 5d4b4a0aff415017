"""JSON in and out: orjson, with the standard library for the few values orjson refuses,
and the one rule for a JSON number's exact value.

orjson refuses integers beyond 64 bits and strings with lone surrogates (both can come in
as a call's arguments); those are written by the standard library (surrogates as
`\\ud800` escapes), so a strange argument is never a server error. A finite `Decimal` (an argument
whose exact value no float holds: `0.1`, `1e-400`) is written as a JSON number with its
exact digits, by the service (`dumps`) and by the command line (`dumps_text`) alike.

Reading a request: a number with a fraction or an exponent is the float it parses to
when that float is exactly the number its text says, else the `Decimal` of its text
(`exact_number`); one a double cannot hold is `number-out-of-range`, and so is an
integer past a double's range (`INT_BOUND`; the readers check integers as they walk a
body, `check_depth`, which also bounds its nesting: the service's bodies and the command
line's `--args` alike). Reading back
what was written (`loads`) goes through the standard library: orjson reads an integer
beyond 64 bits as a float; and a number that is not what orjson would write for its float
comes back as the `Decimal` of its text, so what was written as a Decimal is read back
with the same digits.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

import jiter
import orjson

from api.records import Record
from api.service.errors import ServiceError

# What orjson would write its own way goes through str(), as the standard library's
# `default=str` always did.
ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def _default(value: Any) -> Any:
    """A finite Decimal as a JSON number with its exact digits; a domain record as what it
    shows (api.records); anything else as str()."""
    if type(value) is Decimal and value.is_finite():
        return orjson.Fragment(str(value).encode())  # str() of a finite Decimal is JSON
    if isinstance(value, Record):
        return value.shown()
    return str(value)


def dumps(body: Any) -> bytes:
    """Compact JSON as UTF-8 bytes; a finite Decimal as a JSON number, anything else
    orjson does not write (a NaN Decimal, ...) as its str()."""
    try:
        return orjson.dumps(body, default=_default, option=ORJSON_OPTIONS)
    except TypeError:
        return _slow(body, ORJSON_OPTIONS, b"")


_NON_ASCII = re.compile(r"[^\x00-\x7e]")  # (DEL too, as json.dumps escapes it)


def dumps_text(value: Any, *, indent: bool = True, sort_keys: bool = False) -> str:
    """JSON for the command line: what `dumps` writes (a Decimal as a number with all its
    digits), indented by two spaces (else compact), ASCII only as the standard library
    writes it (`\\u00e9`: any terminal prints it, and the text is still JSON)."""
    option = ORJSON_OPTIONS
    if indent:
        option |= orjson.OPT_INDENT_2
    if sort_keys:
        option |= orjson.OPT_SORT_KEYS
    text = _part(value, option, b"").decode()
    # Outside strings JSON is ASCII, so each non-ASCII character is inside one.
    return _NON_ASCII.sub(lambda match: json.dumps(match.group())[1:-1], text)


def _slow(value: Any, option: int, pad: bytes) -> bytes:
    """What orjson refused (an integer beyond 64 bits, a lone surrogate somewhere): an
    object or array taken apart, each part written by orjson where it can (`_part`), the
    rest by the standard library, so a Decimal inside stays a number. Indented (`pad`
    the indent of the line it starts on) and with sorted keys as `option` says."""
    indented = bool(option & orjson.OPT_INDENT_2)
    inner = pad + b"  " if indented else b""
    if isinstance(value, Record):
        value = value.shown()
    if isinstance(value, dict):
        items = list(value.items())
        if option & orjson.OPT_SORT_KEYS:
            items.sort(key=lambda item: str(item[0]))
        colon = b": " if indented else b":"
        parts = [_key(k) + colon + _part(v, option, inner) for k, v in items]
        return _join(b"{", parts, b"}", pad if indented else None)
    if isinstance(value, list | tuple):
        parts = [_part(v, option, inner) for v in value]
        return _join(b"[", parts, b"]", pad if indented else None)
    return json.dumps(value, default=str).encode()


def _join(start: bytes, parts: list[bytes], end: bytes, pad: bytes | None) -> bytes:
    """An object's or array's parts, laid out as orjson lays them out: compact (`pad`
    None), or one to a line, indented two spaces past `pad`."""
    if pad is None or not parts:
        return start + b",".join(parts) + end
    inner = pad + b"  "
    return start + b"\n" + inner + (b",\n" + inner).join(parts) + b"\n" + pad + end


def _part(value: Any, option: int, pad: bytes) -> bytes:
    """A part of a refused value: whole by orjson when it can (one refused argument in a
    batch of 1,000 decisions re-encodes its own decision only), else taken apart. orjson
    indents from the left margin: its lines move right by `pad` (a newline in its output
    is layout, never inside a string, where it is escaped)."""
    try:
        written = orjson.dumps(value, default=_default, option=option)
    except TypeError:
        return _slow(value, option, pad)
    return written.replace(b"\n", b"\n" + pad) if pad else written


def _key(key: Any) -> bytes:
    """An object key as the standard library writes it (a number, true, false or null
    as a string of its JSON)."""
    if not isinstance(key, str) and (key is None or isinstance(key, bool | int | float)):
        key = json.dumps(key)
    return json.dumps(key).encode()


def _number(text: str) -> float | Decimal:
    """A JSON number with a fraction or an exponent: the float when orjson writes that
    float as this very text, else the Decimal of the text (its exact digits)."""
    value = float(text)
    if orjson.dumps(value) == text.encode():
        return value
    return Decimal(text)


def loads(raw: bytes | str) -> Any:
    """Exact JSON in (big integers stay integers, written Decimals stay Decimals)."""
    return json.loads(raw, parse_float=_number)


# ---- reading: a JSON number's exact value -------------------------------------------------
LOSSLESS = jiter.LosslessFloat  # what jiter's `float_mode="lossless-float"` gives


def exact_number(number: Any) -> float | Decimal:
    """A JSON number's exact value, from its text: the float it parses to when that is
    exactly the number the text says, else the Decimal of the text; a number beyond the
    range of floats (its float 0 or infinite: 1e-400, 1e400) is a 422. (NaN and Infinity
    never get here: the readers refuse them as not JSON.)"""
    text = str(number)
    value = float(text)
    # The usual case, without a Decimal: a text of at most 15 characters has at most 15
    # significant digits, and no two such decimals round to one normal double (DBL_DIG);
    # a nonzero float below 1e7 that is a multiple of 1/256 is normal and itself such a
    # decimal (at most 7 + 8 digits), so it is exactly the number the text says.
    if (
        -1e7 < value < 1e7
        and (value * 256.0).is_integer()
        and len(text) <= 15
        and value != 0.0  # (1e-400 is 0.0 too)
    ):
        return value
    try:
        exact = Decimal(text)
    except InvalidOperation:  # an exponent past even Decimal's range
        raise out_of_range(text) from None
    if not exact.is_finite() or exact == value:
        return value
    if value == 0.0 or math.isinf(value):
        raise out_of_range(text)
    return exact


def exact_in_place(value: Any) -> None:
    """Each lossless float in a parsed JSON object or array replaced by its exact value."""
    for key, item in value.items() if type(value) is dict else enumerate(value):
        kind = type(item)  # (values replaced, no key added: allowed while iterating)
        if kind is LOSSLESS:
            value[key] = exact_number(item)
        elif kind is dict or kind is list:
            exact_in_place(item)


def out_of_range(text: str) -> ServiceError:
    return ServiceError(
        "number-out-of-range",
        f"the number `{_shown(text)}` is beyond the range of a double (it would be rounded to 0 "
        "or to infinity)",
        help=_RANGE,
    )  # fmt: skip


_RANGE = "a number here is 0 or of a size from about 5e-324 to 1.8e308"


def _shown(text: str) -> str:
    return text[:40] + ("..." if len(text) > 40 else "")


# ---- integers: within a double's range too ----------------------------------------------
# An integer is held to the range a number in any other notation is held to (`1e400` is
# refused, so `1` and 400 zeros is too): the least integer a float rounds to infinity is
# the largest double plus half its last unit. That keeps an integer to 309 digits, which
# the engine compares with a Decimal in about a microsecond and the log writes as fast; at
# Python's own limit of 4,300 digits each took 0.25 ms, and a body of 1 MiB holds 240.
MAX_DEPTH = 32  # how deep a request's JSON (a body, a call's args or context) may nest
INT_BOUND = 2**1024 - 2**970
PARSER_DIGITS = 4300  # what jiter (and Python's int()) read of an integer part, at most


def exact_integer(text: str) -> int:
    """A JSON integer's text as the service reads it (for `json.loads`'s `parse_int`):
    the int, or `number-out-of-range` past a double's range, without converting a text too long for it
    (over 309 digits: past INT_BOUND already, and over 4,300 Python refuses)."""
    digits = len(text) - text.startswith("-")
    if digits > 309:
        raise _too_many_digits(f"the integer `{_shown(text)}`", str(digits), _PAST)
    value = int(text)
    if not -INT_BOUND < value < INT_BOUND:
        raise integer_out_of_range(value)
    return value


def integer_out_of_range(value: int) -> ServiceError:
    text = str(value)  # (at most 4,300 digits: what the parsers give)
    return _too_many_digits(f"the integer `{_shown(text)}`", str(len(text.lstrip("-"))), _PAST)


def digits_out_of_range(raw: bytes, message: str) -> ServiceError:
    """`number-out-of-range` for a number whose integer part the JSON parser would not read (more than
    4,300 digits: its error says "number out of range at line L column C", the column one
    past the 4,301st digit), naming the number when the body shows it there."""
    found = re.search(r"line (\d+) column (\d+)", message)
    if found is not None:
        start = 0
        for _ in range(int(found.group(1)) - 1):  # (JSON's line breaks: \n, or \r\n)
            start = raw.find(b"\n", start) + 1
        at = start + int(found.group(2)) - 1
        head = raw[:at].rstrip(b"0123456789")
        rest = raw[at:].lstrip(b"0123456789")
        number = raw[len(head) - head.endswith(b"-") : len(raw) - len(rest)].decode()
        digits = len(number.lstrip("-"))
        if digits > PARSER_DIGITS:
            if rest[:1] in (b".", b"e", b"E"):  # (its value may be in range: 1 and 4,301
                return _too_many_digits(  # zeros, then e-4000; still not read)
                    f"the number `{_shown(number)}`",
                    f"{digits} before its fraction or exponent", f"at most {PARSER_DIGITS} are read",
                )  # fmt: skip
            return _too_many_digits(f"the integer `{_shown(number)}`", str(digits), _PAST)
    return ServiceError(
        "number-out-of-range",
        f"a number in the body has too many digits (over {PARSER_DIGITS}): {_PAST}",
        help=_INTEGERS,
    )  # fmt: skip


_PAST = "it is beyond the range of a double"
_INTEGERS = f"{_RANGE} (an integer has at most 309 digits)"


def _too_many_digits(named: str, digits: str, why: str) -> ServiceError:
    return ServiceError(
        "number-out-of-range", f"{named} has too many digits ({digits}): {why}",
        help=_INTEGERS,
    )  # fmt: skip


def _walk(value: Any, limit: int, number: type) -> tuple[int, bool]:
    """Nesting depth (stopping early once past `limit`; iterative: no recursion to blow)
    and whether a `number` is inside; an integer past a double's range raises `number-out-of-range`."""
    deepest = 0
    floats = False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            kind = type(item)
            if kind is number:
                floats = True
            elif kind is int and not -INT_BOUND < item < INT_BOUND:
                raise integer_out_of_range(item)
            continue
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest, floats
        stack.extend((child, level + 1) for child in children)
    return deepest, floats


def check_depth(value: Any, what: str, number: type = float) -> bool:
    """`too-deep` for `value` (parsed JSON) nested more than MAX_DEPTH deep,
    `number-out-of-range` for an integer in it past a double's range (`INT_BOUND`); else
    whether a `number` (as its parser reads a JSON number with a fraction or an exponent) is in
    it: the caller may need its exact value."""
    if value is None:
        return False
    if type(value) is dict:  # the common case: an object of plain values (parsed JSON:
        floats = False  # exact types), walked here without a stack
        for item in value.values():
            kind = type(item)
            if kind is number:
                floats = True
            elif kind is dict or kind is list:
                break
            elif kind is int and not -INT_BOUND < item < INT_BOUND:
                raise integer_out_of_range(item)
        else:
            return floats
    deepest, floats = _walk(value, MAX_DEPTH, number)
    if deepest > MAX_DEPTH:
        raise ServiceError("too-deep", f"{what} is nested more than {MAX_DEPTH} levels deep")
    return floats
