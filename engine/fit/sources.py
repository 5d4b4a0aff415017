"""Candidate DSL text checked against the caller's workspace.

The candidate text is checked together with the parts of the caller's workspace it may
refer to: toolsets (for a role), plus roles and hooks (for a profile). Declarations the
candidate redefines, and every profile and test, are left out; the workspace's files
are not parsed again (their declarations keep their source locations).
"""

from __future__ import annotations

import dataclasses

from engine.check import check_files
from engine.workspace import Workspace
from grammar.parser import parse
from policy import ast
from policy.diagnostics import CharterError, Diagnostic

CANDIDATE_FILE = "<candidate>"


def _kept_file(file: ast.SourceFile, wanted: set[str], replaced: set[str]) -> ast.SourceFile:
    """The parsed file with only toolsets and the `wanted` roles and hooks left in it.
    Its parsed declarations are reused: parsing the workspace again was 90% of a fit
    check (160 ms on the 1,000-role benchmark workspace, for a one-line role)."""
    kept = tuple(
        decl
        for decl in file.declarations
        if isinstance(decl, ast.Toolset)
        or (
            isinstance(decl, ast.Role | ast.Hook)
            and decl.name in wanted
            and decl.name not in replaced
        )
    )
    return dataclasses.replace(file, declarations=kept)


def candidate_workspace(
    workspace: Workspace, source: str, kind: str, path: str = CANDIDATE_FILE
) -> tuple[Workspace, list[ast.Role] | ast.Profile]:
    """The workspace the candidate lives in, and the candidate's role(s) or profile."""
    if kind not in ("role", "profile"):
        raise CharterError(
            [
                Diagnostic(
                    "E0904", f"unknown candidate kind `{kind}`", help="use `role` or `profile`"
                )
            ]
        )
    parsed = parse(source, path)  # raises CharterSyntaxError (a CharterError)
    declared = {d.name for d in parsed.declarations if not isinstance(d, ast.Test)}
    # Only what a candidate profile names is needed (re-checking 1,000 roles is slow).
    wanted = {
        name
        for d in parsed.declarations
        if isinstance(d, ast.Profile) and kind == "profile"
        for name in (*d.roles, *d.hooks)
    }
    files = [_kept_file(f, wanted, declared) for f in workspace.files]
    checked = check_files([*files, parsed])
    if kind == "role":
        roles = [d for d in parsed.declarations if isinstance(d, ast.Role)]
        others = [d for d in parsed.declarations if not isinstance(d, ast.Role)]
        if not roles or others:
            raise _shape_error("a role candidate is one or more `role` declarations", parsed)
        return checked, [checked.roles[r.name] for r in roles]
    profiles = [d for d in parsed.declarations if isinstance(d, ast.Profile)]
    if len(profiles) != 1:
        raise _shape_error("a profile candidate declares exactly one `profile`", parsed)
    return checked, checked.profiles[profiles[0].name]


def _shape_error(what: str, parsed: ast.SourceFile) -> CharterError:
    span = parsed.declarations[0].span if parsed.declarations else ast.Span(parsed.path, 1, 1, 1, 1)
    return CharterError(
        [Diagnostic("E0901", f"{what}; found something else", span, "check the candidate text")],
        {parsed.path: parsed.text},
    )
