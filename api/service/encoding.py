"""JSON out: orjson, with the standard library for the few values orjson refuses.

orjson refuses integers beyond 64 bits and strings with lone surrogates (both can come in
as a call's arguments); the standard library writes both (surrogates as `\\ud800`
escapes), so a strange argument is never a 500. Reading goes through the standard
library when exactness matters: orjson reads an integer beyond 64 bits as a float.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

# What orjson would write its own way goes through str(), as the standard library's
# `default=str` always did.
ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def dumps(body: Any) -> bytes:
    """Compact JSON as UTF-8 bytes; anything else (Decimal, ...) as its str()."""
    try:
        return orjson.dumps(body, default=str, option=ORJSON_OPTIONS)
    except TypeError:
        return json.dumps(body, separators=(",", ":"), default=str).encode()


def loads(raw: bytes | str) -> Any:
    """Exact JSON in (big integers stay integers)."""
    return json.loads(raw)
