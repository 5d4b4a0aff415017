"""The policy files the API itself writes: a role made through `/v1/roles` (`roles.create`)
is the file `api/roles/<name>.charter`, holding that role alone.

`roles.update` and `roles.delete` replace or drop that whole file, so every policy the
service takes (an upload, `charter serve --workspace`, a role change) must keep each file
under `api/roles/` to that shape (E0118). A file there that held more (a profile, another
role) had it replaced or dropped with the role: an agent allowed `roles.delete` deleted a
profile that other agents were on, and a `roles.create` of `x` dropped role `other`
declared in `api/roles/x.charter`.

Nor may two of a policy's paths differ only in case (E0119): on a case-insensitive file
system (macOS, a Windows checkout) they are one file, so a revision written out into a
directory (and served again with `charter serve --workspace`) lost one of them. A role's
name is lowercase (an identifier), so two role files never clash; a role's file can clash
with an uploaded file spelled otherwise (`API/roles/x.charter`).
"""

from __future__ import annotations

import re
import unicodedata
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


def _folded(path: str) -> str:
    # Unicode's canonical caseless match (NFD, casefold, composed again): APFS also takes
    # `é` composed and decomposed for one name.
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", path).casefold())


def case_clashes(paths: Iterable[str]) -> list[tuple[str, str]]:
    """Each path that differs only in case (or in how an accented letter is encoded) from
    an earlier one, after it: (earlier, path). The same path twice is no clash (that is a
    duplicate)."""
    out: list[tuple[str, str]] = []
    seen: dict[str, str] = {}
    for path in paths:
        first = seen.setdefault(_folded(path), path)
        if first != path:
            out.append((first, path))
    return out


def clash_message(first: str, second: str) -> str:
    how = "case" if first.casefold() == second.casefold() else "case or Unicode form"
    return (
        f"file paths `{first}` and `{second}` differ only in {how}: on a case-insensitive "
        "file system (macOS, Windows) they are one file"
    )


CLASH_HELP = "rename one of the two files, or merge them into one"


def _case_problems(paths: Iterable[str]) -> list[Diagnostic]:
    """E0119 for each path that clashes with an earlier one (see the module's doc)."""
    return [
        Diagnostic("E0119", clash_message(first, path), ast.Span(path, 1, 1, 1, 1), CLASH_HELP)
        for first, path in case_clashes(paths)
    ]


def check(files: Sequence[tuple[str, str]], parsed: Iterable[ast.SourceFile]) -> None:
    """Raise CharterError (E0118, E0119) when a checked workspace's files (`parsed`, from
    the text `files`) break the rules above."""
    found = [*_case_problems(path for path, _ in files), *problems(parsed)]
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
    found = [*_case_problems(path for path, _ in files), *problems(parsed)]
    if not found:
        return failed
    return CharterError([*failed.diagnostics, *found], failed.sources)
