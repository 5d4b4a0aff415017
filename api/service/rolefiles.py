"""The policy files the API itself writes: a role made through `/v1/roles` (`roles.create`)
is the file `api/roles/<name>.charter`, holding that role alone; a profile, hook or
toolset made through `/v1/profiles`, `/v1/hooks` or `/v1/toolsets` is the same under
`api/profiles/`, `api/hooks/` or `api/toolsets/` (OWN_DIRS).

`.update` and `.delete` replace or drop that whole file, so every policy the service
takes (an upload, `charter serve --workspace`, a change through the API) must keep each
file under those directories to that shape (E0118). A file there that held more (a
profile, another role) had it replaced or dropped with its own declaration: an agent
allowed `roles.delete` deleted a profile that other agents were on, and a `roles.create`
of `x` dropped role `other` declared in `api/roles/x.charter`.

Nor may a policy hold paths that not every file system can (E0119, `grammar.paths`): two
that differ only in case (one file on macOS or a Windows checkout, so a revision written
out into a directory, and served again with `charter serve --workspace`, lost one of
them), a file's path that is another's directory, a Windows device name (`aux.charter`).
A declaration's name is lowercase (an identifier), so two such files never clash; one can
clash with an uploaded file spelled otherwise (`API/roles/x.charter`, or
`API/roles/x.charter/y.charter`), and a name can be a device's (`aux`).
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

# Each kind the API writes (as the routes name it), its directory and its declaration.
OWN_DIRS: dict[str, str] = {
    "roles": "api/roles/",
    "profiles": "api/profiles/",
    "hooks": "api/hooks/",
    "toolsets": "api/toolsets/",
}
DECLS: dict[str, type[ast.Role | ast.Profile | ast.Hook | ast.Toolset]] = {
    "roles": ast.Role,
    "profiles": ast.Profile,
    "hooks": ast.Hook,
    "toolsets": ast.Toolset,
}
ONE = {"roles": "role", "profiles": "profile", "hooks": "hook", "toolsets": "toolset"}
ROLES_DIR = OWN_DIRS["roles"]
_NAME = re.compile(r"[a-z][a-z0-9_-]*")  # an identifier (docs/dsl.md)


def _help(kind: str) -> str:
    one, where = ONE[kind], OWN_DIRS[kind]
    return (
        f"a file under `{where}` is a {one} made through the API: name it "
        f"`{where}<{one}>.charter` and declare that {one} alone in it, or move the file "
        "elsewhere"
    )


HELP = _help("roles")


def own_path(kind: str, name: str) -> str:
    """The file of `name`, a declaration of `kind` (`roles`, ...) made through the API."""
    return f"{OWN_DIRS[kind]}{name}.charter"


def role_path(name: str) -> str:
    return own_path("roles", name)


def kind_of(path: str) -> str | None:
    """The kind whose directory holds `path`; None for a file outside them all."""
    return next((kind for kind, where in OWN_DIRS.items() if path.startswith(where)), None)


def is_own(path: str) -> bool:
    """Whether `path` is under one of the directories the API writes."""
    return kind_of(path) is not None


def _kind(decl: ast.Declaration) -> str:
    return type(decl).__name__.lower()


def _problems_of(kind: str, source: ast.SourceFile) -> list[Diagnostic]:
    one, where, help = ONE[kind], OWN_DIRS[kind], _help(kind)
    name = source.path[len(where) :].removesuffix(".charter")
    if not _NAME.fullmatch(name) or own_path(kind, name) != source.path:
        return [
            Diagnostic(
                "E0118",
                f"`{source.path}` is under `{where}` but is not named for a {one}",
                ast.Span(source.path, 1, 1, 1, 1),
                help,
            )
        ]
    out: list[Diagnostic] = []
    own = False
    for decl in source.declarations:
        if isinstance(decl, DECLS[kind]) and own_path(kind, decl.name) == source.path:
            own = True
            continue
        out.append(
            Diagnostic(
                "E0118",
                f"{_kind(decl)} `{decl.name}` in `{source.path}`, which holds {one} `{name}` alone",
                decl.span,
                help,
            )
        )
    if not own:
        out.append(
            Diagnostic(
                "E0118",
                f"`{source.path}` does not declare {one} `{name}`",
                ast.Span(source.path, 1, 1, 1, 1),
                help,
            )
        )
    return out


def problems(files: Iterable[ast.SourceFile]) -> list[Diagnostic]:
    """E0118 for each file under one of OWN_DIRS that is not its own declaration alone:
    one for each other declaration, and one when its own is not there."""
    out: list[Diagnostic] = []
    for source in files:
        kind = kind_of(source.path)
        if kind is not None:
            out += _problems_of(kind, source)
    return out


def name_help(kind: str) -> str:
    # (a name is a file's name: `aux`'s is `api/roles/aux.charter`, a device on Windows)
    one = ONE[kind]
    return f"name the {one} otherwise: its file `{OWN_DIRS[kind]}<{one}>.charter` is named for it"


NAME_HELP = name_help("roles")


def path_problems(paths: Sequence[str]) -> list[Diagnostic]:
    """E0119 for each path, or pair of them, that not every file system holds (see the
    module's doc and `grammar.paths`)."""
    out = []
    for d in path_rules.problems(paths):
        kind = kind_of(d.span.file)
        if d.help == path_rules.PART_HELP and kind is not None:
            d = replace(d, help=name_help(kind))
        out.append(d)
    return out


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
        if is_own(path):
            with suppress(CharterError):  # (its syntax error is in `failed` already)
                parsed.append(parse(text, path))
    found = [*path_problems([path for path, _ in files]), *problems(parsed)]
    if not found:
        return failed
    return CharterError([*failed.diagnostics, *found], failed.sources)
