"""What a serving process loads of a stored revision: what its decisions read, no more.

A revision was checked whole when it was stored; a process that loads it to decide needs
every toolset (the tool catalogue), every hook, every profile, and the roles those
profiles select: at 100,000 roles in profiles of 10, about one role in a hundred. So
`load_served` finds each file's declarations without parsing them (grammar/outline.py),
parses only those (grammar/parser.py `parse_ranges`), and checks what it parsed as one
workspace. Its answer decides exactly as the whole workspace does (the declarations are
the same, with the same spans: tests/property/test_served.py), and a worker holds and
parses a fraction of the policy (docs/operations.md "Policy size").

The workspace it gives is `partial` (it keeps each file's outline): its `roles` are the
selected ones, its `tests` none, and each of its files holds the whole text but only the
declarations parsed. What needs the rest (a role's view, a change of the policy, the fit
check of a candidate text) asks the snapshot for the whole workspace, checked from the
texts when first asked (engine/compile.py `Snapshot.workspace`).

`base`: the partial workspace of the revision before, as engine/rebuild.py takes a whole
one. A file whose text did not change keeps its outline and its parsed declarations (the
very objects, so the compiler keeps what it compiled of them), and one that needs no
declaration more is settled: its bodies are not checked again. While no file declaring a
toolset changed, the catalogue is the base's very mapping.

Whatever it cannot take as the grammar lays it out (a text the outline cannot split, a
range that does not parse to the one declaration the outline named there, a name twice, a
selected role nowhere, a check that fails), it answers None: the caller checks the whole
text, which reports what is wrong as any check does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from engine.checker import DEFAULT_CHECK, Checker, CheckOptions
from engine.collector import collector_paused
from engine.workspace import Workspace
from grammar.outline import Entry, outline
from grammar.parser import RangeRefused, parse_ranges
from policy import ast

_KINDS: dict[type, str] = {
    ast.Toolset: "toolset", ast.Role: "role", ast.Hook: "hook", ast.Profile: "profile",
}  # fmt: skip
_ALWAYS = frozenset(("toolset", "hook", "profile"))  # what every decision may read
Key = tuple[str, str]  # (kind, name)


@collector_paused()
def load_served(
    sources: Sequence[tuple[str, str]],
    options: CheckOptions = DEFAULT_CHECK,
    base: Workspace | None = None,
) -> Workspace | None:
    """The partial workspace of `sources` (a stored revision's files, in order), or None
    when it cannot be taken so (see the module's docstring)."""
    if len(sources) > options.max_files:
        return None
    before = _reusable(base)
    outlines: dict[str, list[Entry]] = {}
    reused: dict[str, ast.SourceFile] = {}
    for path, text in sources:
        kept = before.get(path)
        if kept is not None and kept[0].text == text:
            reused[path] = kept[0]
            outlines[path] = list(kept[1])
            continue
        found = outline(text)
        if found is None:
            return None
        outlines[path] = found
    if not _declared_once(outlines.values()):
        return None
    try:
        known = {path: _declared(file) for path, file in reused.items()}
        for path, text in sources:
            _take(path, text, [e for e in outlines[path] if e.kind in _ALWAYS], known, options)
        selected = {
            name
            for declarations in known.values()
            for decl in declarations.values()
            if isinstance(decl, ast.Profile)
            for name in decl.roles
        }
        roles = {e.name for entries in outlines.values() for e in entries if e.kind == "role"}
        if not selected <= roles:
            return None
        files: list[ast.SourceFile] = []
        settled: set[str] = set()
        for path, text in sources:
            wanted = [
                e for e in outlines[path] if e.kind in _ALWAYS or (e.kind == "role" and e.name in selected)
            ]  # fmt: skip
            _take(path, text, wanted, known, options)
            declarations = tuple(known[path][(e.kind, e.name)] for e in wanted)
            old = reused.get(path)
            if old is not None and _same_objects(old.declarations, declarations):
                files.append(old)
                settled.add(path)
            else:
                files.append(ast.SourceFile(path, declarations, text))
    except RangeRefused:
        return None
    if base is not None and before and _same_catalogue(outlines, base, reused):
        checker = Checker(files, options, frozenset(settled), base.tools, base.tools_by_namespace)
    else:
        checker = Checker(files, options)
    workspace = checker.run()
    if checker.errors:
        return None
    return dataclasses.replace(workspace, outlines=outlines)


def _reusable(base: Workspace | None) -> dict[str, tuple[ast.SourceFile, Sequence[Entry]]]:
    """A partial base's files with their outlines, by path (none from a whole one)."""
    if base is None or base.outlines is None:
        return {}
    outlines = base.outlines
    return {f.path: (f, outlines[f.path]) for f in base.files if f.path in outlines}


def _same_objects(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _declared_once(outlines: Iterable[Sequence[Entry]]) -> bool:
    seen: set[Key] = set()
    for entries in outlines:
        for entry in entries:
            if entry.kind == "test":
                continue
            if (entry.kind, entry.name) in seen:
                return False
            seen.add((entry.kind, entry.name))
    return True


def _declared(file: ast.SourceFile) -> dict[Key, ast.Declaration]:
    return {(_KINDS[type(d)], d.name): d for d in file.declarations if type(d) in _KINDS}


def _take(
    path: str,
    text: str,
    entries: list[Entry],
    known: dict[str, dict[Key, ast.Declaration]],
    options: CheckOptions,
) -> None:
    """Parse the declarations at `entries` that `known[path]` lacks, each confirmed to be
    the declaration the outline named there (RangeRefused if not), into `known[path]`."""
    have = known.setdefault(path, {})
    missing = [e for e in entries if (e.kind, e.name) not in have]
    if not missing:
        return
    parsed = parse_ranges(text, path, [(e.start, e.end) for e in missing], options.parse)
    for entry, declaration in zip(missing, parsed.declarations, strict=True):
        if _KINDS.get(type(declaration)) != entry.kind or declaration.name != entry.name:
            raise RangeRefused(f"{path}: `{entry.name}` is not at {entry.start}")
        have[(entry.kind, entry.name)] = declaration


def _same_catalogue(
    outlines: Mapping[str, Sequence[Entry]], base: Workspace, reused: Mapping[str, ast.SourceFile]
) -> bool:
    """Whether every file that declares a toolset, now or in `base`, is one of `base`'s
    as it was: then the catalogue is `base`'s."""
    assert base.outlines is not None

    def declaring(found: Mapping[str, Sequence[Entry]]) -> set[str]:
        return {p for p, entries in found.items() if any(e.kind == "toolset" for e in entries)}

    now = declaring(outlines)
    return now == declaring(base.outlines) and now <= set(reused)
