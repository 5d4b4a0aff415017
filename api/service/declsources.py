"""The text of a profile or toolset written through the API from a request's fields.

A profile is written from its fields (`roles`, `hooks`, `budget`: `profiles.create` and
`profiles.update`), never from text, so its file is rendered here, in the form
`charter fmt` gives. Every name is an identifier before it is written (`invalid-name`):
a name with a newline or a brace in it would write declarations of its own into the file.
A toolset is written from its source, and a request's `url` is put into it: in place of
the url the source declares, or added as its last item. What is rendered is checked as
every change is, by the operation (a source that does not check is `policy-invalid`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from decimal import Decimal

from api.service.errors import ServiceError
from grammar.parser import parse
from policy import ast
from policy.diagnostics import CharterError

_NAME = re.compile(r"[a-z][a-z0-9_-]*")  # an identifier (docs/dsl.md)
SPECIAL_HOOKS = ("default", "none")


def require_name(name: str, what: str) -> None:
    """`invalid-name` unless `name` is an identifier (`what` says whose)."""
    if not _NAME.fullmatch(name):
        shown = json.dumps(name)[1:-1][:80]
        raise ServiceError(
            "invalid-name",
            f"{what} `{shown}` is not a name: a lowercase letter, then lowercase letters, "
            "digits, `_` or `-`",
        )


def profile_text(
    name: str,
    roles: Sequence[str],
    hooks: Sequence[str],
    budget: tuple[Decimal, str] | None,
    rate: tuple[int, str] | None = None,
) -> str:
    """Profile `name`'s file: its `roles` line, its `hooks` line (none for the default
    hooks alone, as an author writes it), its `budget` line and its `rate` line."""
    require_name(name, "the profile's name")
    for role in roles:
        require_name(role, "a role")
    for hook in hooks:
        require_name(hook, "a hook")
    lines = [f"profile {name} {{", "  roles " + ", ".join(roles) if roles else "  roles"]
    if list(hooks) != ["default"]:
        lines.append("  hooks " + (", ".join(hooks) if hooks else "none"))
    if budget is not None:
        amount, period = budget
        lines.append(f"  budget {format(amount, 'f')} usd per {period}")
    if rate is not None:
        calls, every = rate
        lines.append(f"  rate {calls} calls per {every}")
    return "\n".join([*lines, "}", ""])


def profile_fields(
    profile: ast.Profile,
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[Decimal, str] | None, tuple[int, str] | None]:
    """A profile's `roles`, `hooks`, budget and rate, as `profile_text` takes them."""
    budget, rate = profile.budget, profile.rate
    return (
        profile.roles,
        profile.hooks,
        None if budget is None else (Decimal(budget.amount), budget.period),
        None if rate is None else (rate.calls, rate.period),
    )


def toolset_text(name: str, source: str, url: str | None, path: str) -> str:
    """Toolset `name`'s `source` with `url` its url (None: as the source says). A source
    that does not parse is given back as it is: the operation's check says why."""
    if url is None:
        return source
    try:
        parsed = parse(source, path)
    except CharterError:  # (the operation reports it)
        return source
    found = [d for d in parsed.declarations if isinstance(d, ast.Toolset) and d.name == name]
    if len(found) != 1:
        return source  # (the operation refuses it: `toolset-source-mismatch`)
    decl = found[0]
    literal = json.dumps(url)
    lines = source.split("\n")  # (as the parser numbers lines; a `\r` kept as it is)
    if decl.url is not None:  # its string literal replaced
        at = decl.url_span
        return _spliced(lines, at.line, at.col, at.end_line, at.end_col, literal)
    # Added before the closing brace, the declaration's last character.
    end = decl.span
    return _spliced(lines, end.end_line, end.end_col - 1, end.end_line, end.end_col - 1,
                    f"\n  url {literal}\n")  # fmt: skip


def _spliced(lines: list[str], line: int, col: int, end_line: int, end_col: int, text: str) -> str:
    """`lines` with the text from (line, col) up to (end_line, end_col), 1-based and the
    end excluded, replaced by `text`."""
    before = "\n".join([*lines[: line - 1], lines[line - 1][: col - 1]])
    after = "\n".join([lines[end_line - 1][end_col - 1 :], *lines[end_line:]])
    return before + text + after
