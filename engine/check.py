"""The checker: resolves every name and types every condition before anything runs.

Stages (named, in order, like OPA's compiler): `parse` every file, `collect`
declarations, `resolve` tool patterns and references, `type` conditions and rewrites,
`limits`. All diagnostics are collected; a workspace with any error does not compile.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path as FsPath

from engine.checker import DEFAULT_CHECK, Checker, CheckOptions
from engine.collector import collector_paused
from engine.rebuild import reused_files, settled_paths
from engine.workspace import Workspace
from grammar import source
from grammar.parser import parse
from policy import ast
from policy.diagnostics import CharterError, CharterSyntaxError, Diagnostic

__all__ = ["CheckOptions", "check_files", "check_sources", "load", "read_sources"]


def read_sources(paths: Iterable[str | FsPath]) -> list[tuple[str, str]]:
    """(display path, text) for every `*.charter` file under the given paths, sorted;
    CharterError with every file that cannot be read (`grammar.source`)."""
    read = source.read_sources(paths)
    if read.errors:
        raise CharterError(read.errors, read.shown)
    return read.files


def load(paths: Iterable[str | FsPath], options: CheckOptions = DEFAULT_CHECK) -> Workspace:
    """Read and check a workspace. A file that cannot be read is reported with the
    errors of the files that could, which are checked without it; so are the paths
    that not every file system holds (E0119: a directory of `Main.charter` and
    `main.charter`, or `aux.charter`), which the service refuses too."""
    read = source.read_sources(paths, options.parse.max_file_bytes)
    errors = [*read.errors, *read.path_problems()]
    try:
        workspace = check_sources(read.files, options)
    except CharterError as exc:
        raise CharterError([*errors, *exc.diagnostics], read.shown) from None
    if errors:
        raise CharterError(errors, read.shown)
    return workspace


@collector_paused()
def check_sources(
    sources: Iterable[tuple[str, str]],
    options: CheckOptions = DEFAULT_CHECK,
    base: Workspace | None = None,
) -> Workspace:
    """Parse and check a set of files as one workspace; raise CharterError with all errors.
    `base`: a checked workspace these files change (the policy they replace), whose files
    that did not change are neither parsed nor checked again where nothing they depend on
    changed (engine/rebuild.py). The answer is the same with it or without it."""
    files: list[ast.SourceFile] = []
    errors: list[Diagnostic] = []
    sources = list(sources)
    if base is not None and (base.options != options or base.partial):
        base = None  # (checked under other limits, or not whole: nothing of it is taken)
    kept = {} if base is None else reused_files(sources, base)
    for index, (path, text) in enumerate(sources):
        if index >= options.max_files:
            errors.append(
                Diagnostic(
                    "E0016", f"more than {options.max_files} files", ast.Span(path, 1, 1, 1, 1)
                )
            )
            break
        found = kept.get(path)
        if found is not None:
            files.append(found)
            continue
        try:
            files.append(parse(text, path, options.parse))
        except CharterSyntaxError as exc:
            errors.extend(exc.diagnostics)
    return check_files(files, options, dict(sources), errors, base)


@collector_paused()
def check_files(
    files: list[ast.SourceFile],
    options: CheckOptions = DEFAULT_CHECK,
    texts: Mapping[str, str] | None = None,
    errors: Iterable[Diagnostic] = (),
    base: Workspace | None = None,
) -> Workspace:
    """Check files parsed already as one workspace (`check_sources` after parsing; the
    fit check reuses a checked workspace's files instead of parsing them again); raise
    CharterError with all errors, `errors` (what parsing found) first. `texts`: the
    sources for the messages (default: each file's own text). `base`: as for
    `check_sources`."""
    found = list(errors)
    settled = None
    if base is not None and base.options == options and not base.partial:
        settled = settled_paths(files, base)
    if base is None or settled is None:
        checker = Checker(files, options)
    else:  # (the same catalogue: its very mapping, which tells the compiler so)
        checker = Checker(files, options, settled, base.tools, base.tools_by_namespace)
    workspace = checker.run()
    found.extend(checker.errors)
    if found:  # the warnings go with the errors: a failed check still reports them
        shown = dict(texts) if texts is not None else {f.path: f.text for f in files}
        raise CharterError([*found, *checker.warnings], shown)
    return workspace
