"""The policy files the API itself writes: a role made through `/v1/roles` (`roles.create`)
is the file `api/roles/<name>.charter`, holding that role alone.

`roles.update` and `roles.delete` replace or drop that whole file, so every policy the
service takes (an upload, `charter serve --workspace`, a role change) must keep each file
under `api/roles/` to that shape (E0118). A file there that held more (a profile, another
role) had it replaced or dropped with the role: an agent allowed `roles.delete` deleted a
profile that other agents were on, and a `roles.create` of `x` dropped role `other`
declared in `api/roles/x.charter`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from contextlib import suppress

from grammar.parser import parse
from policy import ast
from policy.diagnostics import CharterError, Diagnostic

ROLES_DIR = "api/roles/"
_NAME = re.compile(r"[a-z][a-z0-9_-]*")  # an identifier (docs/dsl.md)
HELP = (
    "a file under `api/roles/` is a role made through the API: name it "
    "`api/roles/<role>.charter` and declare that role alone in it, or move the file elsewhere"
)


def role_path(name: str) -> str:
    return f"{ROLES_DIR}{name}.charter"


def _kind(decl: ast.Declaration) -> str:
    return type(decl).__name__.lower()


def problems(files: Iterable[ast.SourceFile]) -> list[Diagnostic]:
    """E0118 for each file under `api/roles/` that is not its own role alone: one for
    each declaration other than that role, and one when the role is not there."""
    out: list[Diagnostic] = []
    for source in files:
        if not source.path.startswith(ROLES_DIR):
            continue
        name = source.path[len(ROLES_DIR) :].removesuffix(".charter")
        if not _NAME.fullmatch(name) or role_path(name) != source.path:
            out.append(
                Diagnostic(
                    "E0118",
                    f"`{source.path}` is under `api/roles/` but is not named for a role",
                    ast.Span(source.path, 1, 1, 1, 1),
                    HELP,
                )
            )
            continue
        own = False
        for decl in source.declarations:
            if isinstance(decl, ast.Role) and role_path(decl.name) == source.path:
                own = True
                continue
            out.append(
                Diagnostic(
                    "E0118",
                    f"{_kind(decl)} `{decl.name}` in `{source.path}`, which holds role "
                    f"`{name}` alone",
                    decl.span,
                    HELP,
                )
            )
        if not own:
            out.append(
                Diagnostic(
                    "E0118",
                    f"`{source.path}` does not declare role `{name}`",
                    ast.Span(source.path, 1, 1, 1, 1),
                    HELP,
                )
            )
    return out


def check(files: Sequence[tuple[str, str]], parsed: Iterable[ast.SourceFile]) -> None:
    """Raise CharterError (E0118) when a checked workspace's files (`parsed`, from the
    text `files`) break the rule above."""
    found = problems(parsed)
    if found:
        raise CharterError(found, dict(files))


def with_problems(files: Sequence[tuple[str, str]], failed: CharterError) -> CharterError:
    """`failed` (a workspace that does not check) with the E0118s of its files that parse,
    so that one answer lists every error."""
    parsed = []
    for path, text in files:
        if path.startswith(ROLES_DIR):
            with suppress(CharterError):  # (its syntax error is in `failed` already)
                parsed.append(parse(text, path))
    found = problems(parsed)
    if not found:
        return failed
    return CharterError([*failed.diagnostics, *found], failed.sources)
