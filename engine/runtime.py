"""Run-time semantics of conditions, shared by compiled code and the reference interpreter.

Values that the checker could not type (`any`: context, metadata, map members) are
checked here; anything that does not fit raises `EvalError`, and an error never grants.
Equality across different kinds of value is false, not an error (`1 == "1"` is false,
and so is `true == 1`).

An `EvalError`'s message holds kinds (`a number`), paths (`args.url`) and function names,
never a value: the value may be a secret argument (a connection's `credential`), and the
message goes into the decision, its log row and the command line's output. A function's
error names the expression it was given (`host(args.credential)`), as the policy writes
it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from policy.ast import name_text


class EvalError(Exception):
    """A condition could not be evaluated (missing value, wrong type)."""


class ShapeError(Exception):
    """The call does not match the tool's signature."""


def kind(value: Any) -> str:
    """The DSL kind of a run-time value."""
    t = type(value)
    if t is bool:
        return "bool"
    if t is int or t is float or t is Decimal:
        return "number"
    if t is str:
        return "str"
    if value is None:
        return "null"
    if t is list or t is tuple:
        return "list"
    if isinstance(value, Mapping):
        return "map"
    return "other"


def get(obj: Any, root: str, parts: Sequence[str]) -> Any:
    """Read a path; a missing step or a step into a non-map is an error."""
    value = obj
    if value is None:
        raise EvalError(f"`{root}` is not available in this request")
    for at, part in enumerate(parts):
        if not isinstance(value, Mapping):
            raise EvalError(f"`{_walked(root, parts, at)}` reads into a {kind(value)}")
        if part not in value:
            raise EvalError(f"missing `{_walked(root, parts, at)}`")
        value = value[part]
    return value


def _walked(root: str, parts: Sequence[str], at: int) -> str:
    """The path read up to its `at`th part, as a message shows it (`args."x.y"`)."""
    return ".".join((root, *(name_text(p) for p in parts[: at + 1])))


def has(obj: Any, parts: Sequence[str]) -> bool:
    value = obj
    for part in parts:
        if not isinstance(value, Mapping) or part not in value:
            return False
        value = value[part]
    return True


def as_bool(value: Any) -> bool:
    if type(value) is not bool:
        raise EvalError(f"expected a condition (bool), got a {kind(value)}")
    return value


def num(value: Any) -> Any:
    t = type(value)
    if t is int or (t is float and value - value == 0.0):  # (a finite float: inline)
        return value
    if t is float or t is Decimal:
        return finite(value)
    raise EvalError(f"expected a number, got a {kind(value)}")


def finite(number: float | Decimal) -> Any:
    """A NaN or an infinity (an in-process caller's context or a stored value may hold one;
    the HTTP service refuses them) compares as no number does: `NaN > 5` and `NaN <= 5`
    are both false, so a hook `where context.risk > 5` would let it through. An error
    instead, which never grants."""
    if isinstance(number, Decimal):
        if number.is_finite():
            return number
    elif number - number == 0.0:  # (NaN and the infinities give NaN)
        return number
    raise EvalError("expected a finite number, got NaN or an infinity")


def text(value: Any) -> str:
    if type(value) is not str:
        raise EvalError(f"expected a string, got a {kind(value)}")
    return value


def seq(value: Any) -> Sequence[Any]:
    if type(value) is not list and type(value) is not tuple:
        raise EvalError(f"expected a list, got a {kind(value)}")
    return value


def eq(a: Any, b: Any) -> bool:
    ka, kb = kind(a), kind(b)
    if ka != kb:
        return False
    if ka == "list":
        return len(a) == len(b) and all(eq(x, y) for x, y in zip(a, b, strict=True))
    if ka == "map":
        return a.keys() == b.keys() and all(eq(a[k], b[k]) for k in a)
    if ka == "number" and (type(a) is not int or type(b) is not int):
        return bool(num(a) == num(b))  # (a NaN is an error here too: see `finite`)
    return bool(a == b)


def contains(items: Any, value: Any) -> bool:
    return any(eq(item, value) for item in seq(items))


def lt(a: Any, b: Any) -> bool:
    return bool(num(a) < num(b))


def le(a: Any, b: Any) -> bool:
    return bool(num(a) <= num(b))


def gt(a: Any, b: Any) -> bool:
    return bool(num(a) > num(b))


def ge(a: Any, b: Any) -> bool:
    return bool(num(a) >= num(b))


def startswith(a: Any, b: Any) -> bool:
    return text(a).startswith(text(b))


def endswith(a: Any, b: Any) -> bool:
    return text(a).endswith(text(b))


def substring(a: Any, b: Any) -> bool:
    return text(b) in text(a)


def like(value: Any, pattern: Any) -> bool:
    """Glob match where `*` is any run of characters; linear, no backtracking regex."""
    return glob(text(value), text(pattern))


def glob(value: str, pattern: str) -> bool:
    pieces = pattern.split("*")
    if len(pieces) == 1:
        return value == pattern
    first, *middle, last = pieces
    if len(value) < len(first) + len(last):
        return False
    if not value.startswith(first) or not value.endswith(last):
        return False
    # Greedy leftmost placement of each middle piece is optimal for `*`-only globs.
    pos, end = len(first), len(value) - len(last)
    for piece in middle:
        found = value.find(piece, pos, end)
        if found < 0:
            return False
        pos = found + len(piece)
    return True


def items(value: Any, arg: str = "x", kind_: str = "all") -> Sequence[Any]:
    """The list an `all` or `any` reads; `arg` is the list as the policy writes it."""
    if type(value) is not list and type(value) is not tuple:
        raise EvalError(f"`{kind_}` reads a list, and `{arg}` is a {kind(value)}")
    return value


def length(value: Any, arg: str = "x") -> int:
    """`len(value)`; `arg` is the argument as the policy writes it (`args.cc`)."""
    k = kind(value)
    if k in ("str", "list", "map"):
        return len(value)
    raise EvalError(f"`len({arg})` takes a string, list or map, got a {k}")


def lower(value: Any, arg: str = "x") -> str:
    """`lower(value)`; `arg` is the argument as the policy writes it."""
    if type(value) is not str:
        raise EvalError(f"`lower({arg})` takes a string, got a {kind(value)}")
    return value.lower()


# URL parsers disagree on a URL with a backslash, whitespace, a control character or a
# user part: `https://evil.com\.example.com/` is host `evil.com\.example.com` to Python
# and `evil.com` to a browser's (WHATWG) parser, so `host(url) endswith ".example.com"`
# would pass a URL that fetches evil.com. Such a URL, or a host that is not plain ASCII
# letters, digits, `-`, `_` and `.` (or an IPv6 address), is an error: it never grants.
_AMBIGUOUS_URL = re.compile(r"[\x00-\x20\x7f\\]")
_PLAIN_HOST = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*|[0-9a-f.]*:[0-9a-f:.]*")
# A host whose last label is a number (`2130706433`, `0x7f000001`, `127.1`, `0177.0.0.1`)
# is an IPv4 address to a browser's parser, in any of several notations: only the
# dotted-decimal one is read, and only as it is written canonically.
_NUMERIC_LAST = re.compile(r"(?:^|\.)(?:0x[0-9a-f]*|[0-9]+)$")


def host(value: Any, arg: str = "url") -> str:
    """The host of the URL `value`; `arg` is the argument as the policy writes it
    (`args.url`), which the errors name: never the URL or its host, which may be a secret."""
    if type(value) is not str:
        raise EvalError(f"`host({arg})` takes a string, got a {kind(value)}")
    url = value
    if _AMBIGUOUS_URL.search(url):
        raise EvalError(
            f"`host({arg})` does not read a URL with a backslash, a space or a control character"
        )
    try:
        parts = urlsplit(url)
        name = parts.hostname
    except ValueError:
        raise EvalError(f"`host({arg})` cannot read the URL") from None
    if not name:
        raise EvalError(f"`host({arg})` found no host in the URL")
    if "@" in parts.netloc:
        raise EvalError(f"`host({arg})` does not read a URL with a user part (`user@`)")
    if not _PLAIN_HOST.fullmatch(name):
        raise EvalError(
            f"`host({arg})` reads plain hosts only (ASCII letters, digits, `-`, `_` and `.`, "
            "or an IPv6 address)"
        )
    if ":" not in name and _NUMERIC_LAST.search(name) and not _canonical_ipv4(name):
        raise EvalError(f"`host({arg})` reads an IPv4 address only as four decimal numbers")
    return name


def _canonical_ipv4(name: str) -> bool:
    try:
        return str(ipaddress.IPv4Address(name)) == name
    except ValueError:
        return False


def describe(exc: BaseException) -> str:
    """A message for an exception raised while evaluating a condition. An `EvalError`'s
    own (it holds no value); a KeyError is an argument missing (compiled code reads
    `a["name"]` with the policy's names only); any other exception is named by its type
    alone, as its text may quote a value."""
    if isinstance(exc, EvalError):
        return str(exc)
    if isinstance(exc, KeyError):
        key = exc.args[0] if exc.args else None
        return f"missing `args.{name_text(key)}`" if isinstance(key, str) else "missing value"
    if isinstance(exc, RecursionError):
        return "value nested too deeply"
    return f"the condition failed to evaluate ({type(exc).__name__})"
