"""Where each top-level declaration of a file starts and ends, without parsing it.

A serving process that loads a stored revision needs the toolsets, the hooks, the
profiles and the roles those profiles select, which at 100,000 roles is about one role in
a hundred: parsing only those (`grammar.parser.parse_ranges`) is what makes a worker
ready in a second or two instead of a parse of every role. This finds them.

The scan relies on what the grammar (grammar/charter.lark) says of a declaration's
outside: a keyword (`toolset`, `role`, `hook`, `profile`, `test`), its name (a `NAME`, or
a string for a test), a head with no brace outside strings and comments (a hook's
patterns and `where` condition: conditions hold no map literal), then a brace-delimited
body whose braces nest only where map values do (parameter defaults, test arguments), in
strings and comments aside. Between declarations there is only white space and comments.

It proposes, it does not decide: a text it cannot split so (not a policy that checks, or
one this scan misreads) gives None, and every range it gives is parsed by the real parser,
which must find exactly that one declaration there (engine/served.py); anything else and
the caller parses the whole text. The property in tests/property/test_outline.py checks
it against the parser's own spans on generated files.
"""

from __future__ import annotations

import re
from typing import NamedTuple

KINDS = ("toolset", "role", "hook", "profile", "test")

_GAP = r"(?:[ \t\f\r\n]++|#[^\n]*+)*+"
_STRING = r'"(?:[^"\\\n]++|\\.)*+"'
# A declaration's start, up to the brace that opens its body (its head: what a hook says
# before `{`, strings and comments included, no brace).
_HEAD = re.compile(
    rf"(?P<kind>toolset|role|hook|profile|test)(?![a-z0-9_-]){_GAP}"
    rf"(?P<name>[a-z][a-z0-9_-]*+|{_STRING})(?:[^{{}}\"#]++|{_STRING}|#[^\n]*+)*+\{{"
)
# A stretch of a body up to its next brace: no brace outside strings and comments.
_FLAT = re.compile(rf'(?:[^{{}}"#]++|{_STRING}|#[^\n]*+)*+[{{}}]')
_SKIP = re.compile(_GAP)


def _skipped(text: str, pos: int) -> int:
    """Where the white space and comments from `pos` on end."""
    gap = _SKIP.match(text, pos)
    assert gap is not None  # (it matches the empty string)
    return gap.end()


class Entry(NamedTuple):
    """One declaration: its keyword, its name as written (a test's with its quotes), and
    the half-open range of the text it covers, from its keyword to its closing brace."""

    kind: str
    name: str
    start: int
    end: int


def outline(text: str) -> list[Entry] | None:
    """The file's declarations in order, or None when the text is not laid out as the
    grammar lays out a file that parses (the caller then parses it whole)."""
    out: list[Entry] = []
    size = len(text)
    head, flat = _HEAD.match, _FLAT.match
    pos = _skipped(text, 0)
    while pos < size:
        found = head(text, pos)
        if found is None:
            return None
        depth = 1
        at = found.end()
        while depth:
            step = flat(text, at)
            if step is None:
                return None
            at = step.end()
            depth += 1 if text[at - 1] == "{" else -1
        out.append(Entry(found["kind"], found["name"], pos, at))
        pos = _skipped(text, at)
    return out
