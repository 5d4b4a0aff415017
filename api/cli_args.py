"""The options of `charter decide` and `explain` (and the text of `charter token`'s), read
as the service reads the same in a request, so that the command line decides no call the
service would refuse to decide: anything else is a usage error (exit 2) that says what is
wrong, never an internal error or Python's own words.

`--args` and `--context` are read as a call's `args` and `context` (api.http.calls): a
JSON object (`--context null`: none), nested at most `MAX_DEPTH` deep, its numbers exact
(a number with a fraction or an exponent is the float only when that is exactly the
number written, else the Decimal of the text; one a double cannot hold is refused), no
NaN or Infinity, each key once in an object, and no lone surrogate: a `\\ud800` escape that
is not half of a pair names no character, and the service's parser refuses the body
(400 `malformed-json`), as other JSON parsers do. An option's text is UTF-8: Python
gives a byte of the command line that is not as a lone surrogate (U+DC80-U+DCFF), which
no JSON body can carry either. `--tool` is 1 to 256 characters, as a request's `tool`.
"""

from __future__ import annotations

import json
import re
from typing import Any, NoReturn

from api.cli_outcome import usage
from api.service.encoding import MAX_DEPTH, check_depth, exact_integer, exact_number
from api.service.errors import ServiceError
from grammar.literals import lone_surrogate_escape
from grammar.source import MAX_NAME_CHARS

_SURROGATE = re.compile("[\ud800-\udfff]")
UTF8_HELP = "give it as UTF-8 text"


def usage_error(message: str, hint: str | None = None) -> NoReturn:
    """The command line itself is wrong: say so on stderr and exit 2."""
    raise SystemExit(usage(message, hint))


def not_utf8(text: str) -> str | None:
    """What in an option's text is not UTF-8 (`byte `0xff` at column 3`), else None."""
    found = _SURROGATE.search(text)
    if found is None:
        return None
    point = ord(found.group())
    what = (  # (a byte of the command line that is not UTF-8: Python's surrogateescape)
        f"byte `0x{point - 0xDC00:02x}`" if 0xDC80 <= point <= 0xDCFF
        else f"lone surrogate `U+{point:04X}`"
    )  # fmt: skip
    return f"{what} at column {found.start() + 1}"


def text_option(text: str, name: str) -> str:
    why = not_utf8(text)
    if why is not None:
        usage_error(f"--{name} is not UTF-8: {why}", UTF8_HELP)
    return text


def tool_option(text: str) -> str:
    """`--tool`, as a request's `tool`: 1 to 256 characters (no tool is named longer:
    E0120), UTF-8."""
    if not text:
        usage_error("--tool is empty", "name the tool the call is to, e.g. `--tool mail.send`")
    if len(text) > MAX_NAME_CHARS:
        usage_error(
            f"--tool is {len(text)} characters long: no tool's name is longer than {MAX_NAME_CHARS}"
        )
    return text_option(text, "tool")


def _not_a_number(name: str) -> Any:
    """Python's JSON reader takes NaN and Infinity; JSON, and the service, do not."""
    raise ValueError(f"`{name}` is not a JSON number")


def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's pairs, each key once: a key given twice is refused, as the service
    refuses it in a call (400 `duplicate-key`, api.http.body)."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"an object has the key `{key}` twice: give each key once")
            seen.add(key)
    return value


_JSON_KINDS = {list: "an array", str: "a string", bool: "a boolean", int: "a number",
               float: "a number", type(None): "null"}  # fmt: skip
_EXAMPLES = {"args": '{"to": "bob@example.com"}', "context": '{"ci": "green"}'}


def json_object(text: str | None, name: str) -> Any:
    """`--args` or `--context` (`name`), read as the module docstring says."""
    if text is None:
        return None
    text_option(text, name)
    try:
        value = json.loads(
            text, parse_float=exact_number, parse_int=exact_integer,
            parse_constant=_not_a_number, object_pairs_hook=_once,
        )  # fmt: skip
    except json.JSONDecodeError as exc:
        usage_error(f"--{name} is not valid JSON: {exc.msg} at column {exc.colno}")
    except RecursionError:  # (nested some thousand levels: far past the limit below)
        _too_deep(name)
    except ServiceError as exc:
        usage_error(f"--{name}: {exc.message}", exc.extra.get("help"))
    except ValueError as exc:  # NaN, Infinity, a key twice
        usage_error(f"--{name}: {exc}")
    half = lone_surrogate_escape(text)  # (json.loads reads one as a character)
    if half is not None:
        usage_error(
            f"--{name} is not valid JSON: `{half.group(1)}` at column {half.start(1) + 1} is "
            "half of a surrogate pair, not a character",
            "write the character itself, or both halves of the pair "
            "(`\\ud83d\\ude00` is one emoji)",
        )
    if value is None and name == "context":
        return None
    if type(value) is not dict:
        kind = _JSON_KINDS.get(type(value), "a number")
        usage_error(
            f"--{name} is not a JSON object: it is {kind}",
            f"name each {'argument' if name == 'args' else 'value'}: "
            f"e.g. `--{name} '{_EXAMPLES[name]}'`",
        )
    try:  # the service's own check
        check_depth(value, name)
    except ServiceError:
        _too_deep(name)
    return value


def _too_deep(name: str) -> NoReturn:
    usage_error(f"--{name} is nested more than {MAX_DEPTH} levels deep")
