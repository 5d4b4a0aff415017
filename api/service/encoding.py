"""JSON out: orjson, with the standard library for the few values orjson refuses.

orjson refuses integers beyond 64 bits and strings with lone surrogates (both can come in
as a call's arguments); those are written by the standard library (surrogates as
`\\ud800` escapes), so a strange argument is never a 500. A finite `Decimal` (an argument
whose exact value no float holds: `0.1`, `1e-400`) is written as a JSON number with its
exact digits. Reading goes through the standard library when exactness matters: orjson
reads an integer beyond 64 bits as a float; and a number that is not what orjson would
write for its float comes back as the `Decimal` of its text, so what was written as a
Decimal is read back with the same digits.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import orjson

# What orjson would write its own way goes through str(), as the standard library's
# `default=str` always did.
ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def _default(value: Any) -> Any:
    """A finite Decimal as a JSON number with its exact digits; anything else as str()."""
    if type(value) is Decimal and value.is_finite():
        return orjson.Fragment(str(value).encode())  # str() of a finite Decimal is JSON
    return str(value)


def dumps(body: Any) -> bytes:
    """Compact JSON as UTF-8 bytes; a finite Decimal as a JSON number, anything else
    orjson does not write (a NaN Decimal, ...) as its str()."""
    try:
        return orjson.dumps(body, default=_default, option=ORJSON_OPTIONS)
    except TypeError:
        return _slow(body)


def _slow(value: Any) -> bytes:
    """What orjson refused (an integer beyond 64 bits, a lone surrogate somewhere): an
    object or array taken apart, each part written by orjson where it can (`_part`), the
    rest by the standard library, so a Decimal inside stays a number."""
    if isinstance(value, dict):
        return b"{%s}" % b",".join(_key(k) + b":" + _part(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return b"[%s]" % b",".join(_part(v) for v in value)
    return json.dumps(value, default=str).encode()


def _part(value: Any) -> bytes:
    """A part of a refused value: whole by orjson when it can (one refused argument in a
    batch of 1,000 decisions re-encodes its own decision only), else taken apart."""
    try:
        return orjson.dumps(value, default=_default, option=ORJSON_OPTIONS)
    except TypeError:
        return _slow(value)


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
