"""Human names for the grammar's terminals, so syntax errors read like English."""

from __future__ import annotations

from collections.abc import Iterable

from lark import Token

_NAMES: dict[str, str] = {
    "NAME": "a name",
    "STRING": "a string",
    "INT": "an integer",
    "DECIMAL": "a decimal",
    "ALLOW": "`allow`",
    "DENY": "`deny`",
    "EXPECT_EFFECT": "`allow`, `deny` or `pause`",
    "COMPARE_OP": "a comparison (`==`, `<`, `in`, `startswith`, ...)",
    "SCALAR_TYPE": "a type (`str`, `int`, `decimal`, `bool`, `map`, `list[T]`)",
    "PERIOD": "`24h`, `7d` or `total`",
    "STAR": "`*`",
    "TOOL_ALL": "`tool:*`",
    "HOOKS_DEFAULT": "`default`",
    "HOOKS_NONE": "`none`",
    "NOT_KW": "`not`",
    "OPTIONAL": "`?`",
    "LBRACE": "`{`",
    "RBRACE": "`}`",
    "LPAR": "`(`",
    "RPAR": "`)`",
    "LSQB": "`[`",
    "RSQB": "`]`",
    "COMMA": "`,`",
    "COLON": "`:`",
    "DOT": "`.`",
    "EQUAL": "`=`",
    "$END": "end of file",
}


def describe_terminal(name: str) -> str:
    if name in _NAMES:
        return _NAMES[name]
    # Anonymous keyword terminals are named after their text by lark, e.g. `TOOLSET`.
    return f"`{name.lower()}`"


def describe_expected(expected: Iterable[str]) -> str:
    names = sorted({describe_terminal(n) for n in expected})
    if len(names) > 6:
        names = [*names[:6], "..."]
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " or " + names[-1]


def describe_token(token: Token) -> str:
    if token.type in ("STRING",):
        return f"string {token}"
    return f"`{token}`"
