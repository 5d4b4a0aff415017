"""String and number literals: their values, and what is wrong with one that has none.

A string literal uses JSON's escapes. Besides a malformed escape (E0003), two things the
lexer lets through are refused here, each pointed at exactly:

* a raw control character (U+0000-U+001F, U+007F-U+009F: a real tab, a form feed...)
  inside the quotes (E0017): it is invisible or moves the cursor, so it is written as an
  escape (`\\t`, `\\u0007`);
* a `\\uD800`-`\\uDFFF` escape that is not half of a surrogate pair (E0003): it encodes no
  character, so the value could not be written back as UTF-8 text (`charter fmt`) nor
  sent as JSON by every client. A pair (`\\ud83d\\ude00`) is one character and is fine.

A number has at most `MAX_NUMBER_DIGITS` digits (E0019): Python refuses to convert an
integer of more than 4,300 digits, and no argument value needs a hundredth of that.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

MAX_NUMBER_DIGITS = 100

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def epoch_ms(moment: datetime) -> int:
    """An aware time in whole ms since the epoch, by integer arithmetic: a float
    timestamp times 1000 can land 1 ms off, and a test's `time` must survive `charter fmt`."""
    return (moment - _EPOCH) // _MS


def moment_at(ms: int) -> datetime:
    """The UTC time `ms` ms after the epoch, exactly (the inverse of `epoch_ms`)."""
    return _EPOCH + ms * _MS


# The control characters (C0, DEL, C1) a string may not hold raw, as the body of a
# character class: `grammar.fmt` escapes the same set, so what it prints parses.
CONTROL_CHARS = "\x00-\x1f\x7f-\x9f"
CONTROL = re.compile(f"[{CONTROL_CHARS}]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# A string literal's text, piece by piece: a surrogate pair, a lone surrogate escape
# (group 1), any other escape, or a run of plain characters.
_PIECES = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    r"|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})|\\.|[^\\]+",
    re.S,
)


@dataclass(frozen=True, slots=True)
class Problem:
    """What is wrong with a literal, at `offset` (from the token's start) for `length`."""

    code: str
    message: str
    offset: int
    length: int
    help: str


def code_point(char: str) -> str:
    return f"U+{ord(char):04X}"


def escape_for(char: str) -> str:
    """The JSON escape of a character (`\\t`, `\\u0000`), as strings write it."""
    return json.dumps(char)[1:-1]


def string_value(token: str) -> tuple[str, Problem | None]:
    """The value of a string literal (quotes included in `token`), or its problem (then
    the value is the text between the quotes, as written)."""
    control = CONTROL.search(token)
    if control is not None:
        char = control.group()
        return token[1:-1], Problem(
            "E0017",
            f"control character `{code_point(char)}` in a string",
            control.start(),
            1,
            f"write it as the escape `{escape_for(char)}`",
        )
    try:
        value = json.loads(token)
    except ValueError:
        value = None
    if not isinstance(value, str):
        return token[1:-1], Problem(
            "E0003",
            f"invalid escape in string literal `{token}`",
            0,
            len(token),
            'strings use JSON escapes: \\", \\\\, \\n, \\t, \\uXXXX',
        )
    if _SURROGATE.search(value) is not None:
        # An escape made it: parse() refuses a raw surrogate before any literal is built.
        pieces = _PIECES.finditer(token, 1, len(token) - 1)
        half = next(piece for piece in pieces if piece.group(1) is not None)
        return token[1:-1], Problem(
            "E0003",
            f"`{half.group(1)}` is half of a surrogate pair, not a character",
            half.start(1),
            len(half.group(1)),
            "write the character itself, or both halves of the pair "
            "(`\\ud83d\\ude00` is one emoji)",
        )
    return value, None


def lone_surrogate_escape(text: str) -> re.Match[str] | None:
    """The first `\\uD800`-`\\uDFFF` escape in `text` that is not half of a pair (its
    group 1), else None. `text` is a string literal's, or a whole JSON text that parses
    (outside its strings JSON has no backslash, so the pieces keep in step)."""
    return next((piece for piece in _PIECES.finditer(text) if piece.group(1) is not None), None)


def number_problem(text: str) -> Problem | None:
    """A number literal (`-12`, `3.50`) with too many digits."""
    digits = len(text) - text.startswith("-") - ("." in text)
    if digits <= MAX_NUMBER_DIGITS:
        return None
    shown = text if len(text) <= 24 else f"{text[:12]}…{text[-4:]}"
    return Problem(
        "E0019",
        f"number `{shown}` is too large: {digits} digits",
        0,
        len(text),
        f"a number has at most {MAX_NUMBER_DIGITS} digits",
    )
