"""Syntax errors that read like English: human names for the grammar's terminals, the
expected-token set reduced to what a person needs, and help lines for common slips.

Lark's LALR tables merge states, so the raw "expected" set of an error lists tokens that
could only follow in some other context. `syntax_errors.syntax_diagnostic` asks the interactive
parser which tokens it really `accepts()`, and `describe_expected` then folds families of
tokens (everything that can start a value, the comparison operators, the declaration
keywords) into one phrase each.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from lark import Token

_NAMES: dict[str, str] = {
    "NAME": "a name",
    "STRING": "a string",
    "INT": "an integer",
    "DECIMAL": "a decimal",
    "ALLOW": "`allow`",
    "DENY": "`deny`",
    "EXPECT_EFFECT": "`allow`, `deny`, `pause` or `invalid`",
    "COMPARE_OP": "a comparison (`==`, `!=`, `<`, `in`, `startswith`, ...)",
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
    "_WHERE": "`where`",
    "$END": "end of file",
}

# Families folded into one phrase, tried in order; each needs all of `core` present and
# swallows every member of `members` that is present.
_NUMBER = frozenset({"INT", "DECIMAL"})
_LITERAL = frozenset({"STRING", "INT", "DECIMAL", "TRUE", "FALSE", "NULL", "LSQB", "LBRACE"})
_OPERAND = frozenset({*_LITERAL, "NAME", "LPAR"}) - {"LBRACE"}
_DECLARATIONS = frozenset({"TOOLSET", "ROLE", "HOOK", "PROFILE", "TEST"})
_FAMILIES: tuple[tuple[frozenset[str], frozenset[str], str], ...] = (
    (
        _DECLARATIONS,
        _DECLARATIONS | {"$END"},
        "a declaration (`toolset`, `role`, `hook`, `profile` or `test`)",
    ),
    (
        frozenset({"COMPARE_OP", "AND", "OR"}),
        frozenset({"COMPARE_OP", "NOT_KW", "AND", "OR"}),
        "a comparison (`==`, `<`, `in`, `startswith`, ...), `and`, `or`",
    ),
    (frozenset({"COMPARE_OP"}), frozenset({"COMPARE_OP", "NOT_KW"}), _NAMES["COMPARE_OP"]),
    (_OPERAND | {"NOT_KW"}, _OPERAND | {"NOT_KW"}, "a condition"),
    (_OPERAND, _OPERAND, "a value (a string, number, list, or a path such as `args.to`)"),
    (_LITERAL, _LITERAL, "a value (a string, number, `true`, `false`, `null`, list or map)"),
    (_NUMBER, _NUMBER, "a number"),
)
_ENDS_A_RULE = frozenset({"ALLOW", "DENY", "RBRACE"})


def describe_terminal(name: str) -> str:
    if name in _NAMES:
        return _NAMES[name]
    # Anonymous keyword terminals are named after their text by lark, e.g. `TOOLSET`.
    return f"`{name.lower()}`"


def _join(names: list[str]) -> str:
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " or " + names[-1]


def describe_expected(expected: Iterable[str]) -> str:
    """The expected tokens as a short phrase: families folded, at most six items."""
    left = set(expected)
    phrases: list[str] = []
    for core, members, phrase in _FAMILIES:
        if core <= left:
            phrases.append(phrase)
            left -= members
    if "COMPARE_OP" not in expected and "AND" in left and "OR" in left:
        phrases.append("`and` or `or`")
        left -= {"AND", "OR"}
    # After a complete condition, the next rule or the block's end may follow.
    if phrases and left >= _ENDS_A_RULE:
        phrases.append("the end of the rule")
        left -= _ENDS_A_RULE
    names = phrases + sorted({describe_terminal(n) for n in left})
    if len(names) > 6:
        names = [*names[:5], "..."]
    return _join(names)


def describe_token(token: Token) -> str:
    if token.type == "STRING":
        return f"string {token}"
    return f"`{token}`"


def keywords(expected: Iterable[str]) -> list[str]:
    """The literal words among the expected tokens (`role`, `allow`, `usd`, ...)."""
    words: list[str] = []
    for name in expected:
        text = describe_terminal(name)
        for part in text.replace(",", " ").replace(" or ", " ").split():
            if part.startswith("`") and part.endswith("`") and part[1:-1].isalnum():
                words.append(part[1:-1])
    return sorted(set(words))


def token_help(token: Token, expected: set[str]) -> str | None:
    """A help line for an unexpected token, when a likely slip can be named."""
    text = str(token)
    if token.type == "EQUAL" and "COMPARE_OP" in expected:
        return "compare with `==`; a single `=` only appears in `rewrite` and defaults"
    if token.type == "NAME":
        close = difflib.get_close_matches(text, keywords(expected), n=1, cutoff=0.6)
        if close:
            return f"did you mean `{close[0]}`?"
        if expected == {"USD"}:
            return "budgets are in US dollars: `budget 5 usd per 24h`"
        if expected == {"PERIOD"}:
            return "a budget is per `24h`, `7d` or `total`"
        if "COMMA" in expected and ("RBRACE" in expected or "RPAR" in expected):
            return f"separate items with `,`; or `{text}` is a typo"
        if "RBRACE" in expected:
            return f"`{text}` does not start a line here; check the spelling or close the block with `}}`"
    if token.type == "VBAR":  # (a type's `| null`; between conditions, `or`)
        return "write `or` to join conditions; `|` only appears in a type's `| null`"
    if token.type == "RBRACE" and expected >= _OPERAND:
        return "the condition is incomplete: finish it, or remove the `where`"
    return None


def character_help(char: str) -> tuple[str, str | None]:
    """(message, help) for a character that starts no token."""
    if char == '"':
        return (
            "unterminated string",
            'close the string with `"` on the same line; write a quote inside it as `\\"`',
        )
    if char == "'":
        return ("unexpected character `'`", 'strings use double quotes: "like this"')
    if char == "&":
        return ("unexpected character `&`", "write `and` to join conditions")
    if char == "|":
        return ("unexpected character `|`", "write `or` to join conditions")
    if char == "!":
        return ("unexpected character `!`", "write `not` to negate, or `!=` for not equal")
    if char == "\ufeff":  # a Windows editor's "UTF-8" may begin the file with one
        return (
            "unexpected byte order mark `U+FEFF`",
            "save the file as UTF-8 without a byte order mark (BOM)",
        )
    if char.isupper():
        return (
            f"unexpected character `{char}`",
            "names are lowercase: `[a-z][a-z0-9_-]*`",
        )
    shown = char if char.isprintable() and not char.isspace() else repr(char)
    return (f"unexpected character `{shown}`", None)
