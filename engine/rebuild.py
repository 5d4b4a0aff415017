"""What a change leaves as it was: the check of a new set of files against the checked
workspace it changes (its `base`).

A role's rules and a hook's patterns and conditions are checked against the tool
catalogue alone (the toolsets and the built-in tools): names resolve to tools, and
conditions are typed by those tools' arguments. So when no changed file declares a
toolset, before or after the change, the catalogue is the same, and every role and hook
of an unchanged file checks exactly as it did in `base`, which checked without an error.
Those files are *settled*: parsed once (their `SourceFile` is taken from `base`, the same
objects) and their roles' and hooks' bodies are not checked again. Everything that reads
across files is checked whole each time, as cheap as it is: each declaration's name
(taken twice, reserved, too long), each profile's roles and hooks, each test.

The same objects matter beyond the time saved: the compiler (engine/compile.py) takes a
declaration that is the very object of its base snapshot as compiled already.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.workspace import Workspace
from policy import ast


def reused_files(sources: Sequence[tuple[str, str]], base: Workspace) -> dict[str, ast.SourceFile]:
    """The files of `base` that `sources` holds as they were (same path, same text), by path."""
    before = {f.path: f for f in base.files}
    kept: dict[str, ast.SourceFile] = {}
    for path, text in sources:
        found = before.get(path)
        if found is not None and found.text == text:
            kept[path] = found
    return kept


def _declares_toolset(file: ast.SourceFile | None) -> bool:
    return file is not None and any(isinstance(d, ast.Toolset) for d in file.declarations)


def settled_paths(files: Sequence[ast.SourceFile], base: Workspace) -> frozenset[str] | None:
    """The paths of `files` that are settled against `base` (their very objects are
    `base`'s), or None when the catalogue may have changed (a changed, added or removed
    file declares a toolset): then every file is checked."""
    before: Mapping[str, ast.SourceFile] = {f.path: f for f in base.files}
    now = {f.path for f in files}
    settled: set[str] = set()
    for file in files:
        old = before.get(file.path)
        if old is file:
            settled.add(file.path)
        elif _declares_toolset(file) or _declares_toolset(old):
            return None
    if any(_declares_toolset(f) for p, f in before.items() if p not in now):
        return None
    return frozenset(settled)
