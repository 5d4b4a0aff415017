"""The policy files the API itself writes: a role made through `/v1/roles` (`roles.create`)
is the file `api/roles/<name>.charter`, holding that role alone.

`roles.update` and `roles.delete` replace or drop that whole file, so every policy the
service takes (an upload, `charter serve --workspace`, a role change) must keep each file
under `api/roles/` to that shape (E0118). A file there that held more (a profile, another
role) had it replaced or dropped with the role: an agent allowed `roles.delete` deleted a
profile that other agents were on, and a `roles.create` of `x` dropped role `other`
declared in `api/roles/x.charter`.

Nor may a policy hold paths that not every file system can (E0119, `grammar.paths`): two
that differ only in case (one file on macOS or a Windows checkout, so a revision written
out into a directory, and served again with `charter serve --workspace`, lost one of
them), a file's path that is another's directory, a Windows device name (`aux.charter`).
A role's name is lowercase (an identifier), so two role files never clash; a role's file
can clash with an uploaded file spelled otherwise (`API/roles/x.charter`, or
`API/roles/x.charter/y.charter`), and a role's name can be a device's (`aux`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from contextlib import suppress
from dataclasses import replace

from grammar import paths as path_rules
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


# (a role's name is a file's name: `aux`'s is `api/roles/aux.charter`, a device on Windows)
NAME_HELP = "name the role otherwise: its file `api/roles/<role>.charter` is named for it"


def path_problems(paths: Sequence[str]) -> list[Diagnostic]:
    """E0119 for each path, or pair of them, that not every file system holds (see the
    module's doc and `grammar.paths`)."""
    return [
        replace(d, help=NAME_HELP)
        if d.help == path_rules.PART_HELP and d.span.file.startswith(ROLES_DIR)
        else d
        for d in path_rules.problems(paths)
    ]


def check(files: Sequence[tuple[str, str]], parsed: Iterable[ast.SourceFile]) -> None:
    """Raise CharterError (E0119, E0118) when a checked workspace's files (`parsed`, from
    the text `files`) break the rules above."""
    found = [*path_problems([path for path, _ in files]), *problems(parsed)]
    if found:
        raise CharterError(found, dict(files))


def with_problems(files: Sequence[tuple[str, str]], failed: CharterError) -> CharterError:
    """`failed` (a workspace that does not check) with the E0118s of its files that parse
    and the E0119s of its paths, so that one answer lists every error."""
    parsed = []
    for path, text in files:
        if path.startswith(ROLES_DIR):
            with suppress(CharterError):  # (its syntax error is in `failed` already)
                parsed.append(parse(text, path))
    found = [*path_problems([path for path, _ in files]), *problems(parsed)]
    if not found:
        return failed
    return CharterError([*failed.diagnostics, *found], failed.sources)
