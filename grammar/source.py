"""Source text: one way to turn bytes into the text the parser reads, for every path in.

The CLI (`charter check`, `fmt`, `test`, `serve`) and `PUT /v1/policy` decode a policy
file the same way: the bytes as they are, strict UTF-8, no newline translation (Python's
text mode would turn a lone `\\r` into a line end that the HTTP path does not see). Only
`\\n` ends a line; `\\r\\n` is a line end too (the `\\r` is white space before it), and a
`\\r` that is not followed by `\\n` is refused by the parser (E0018), so no path can read a
line end where another reads none.

A file that is not UTF-8 gives E0015 at the first bad byte's line and column, and the
other files are still read: a workspace reports every file's errors at once. A file over
the size limit (1 MiB) gives E0014, the parser's own diagnostic, and no more than a byte
past the limit is ever read: a 50 MB file would take 175 MB of memory to refuse, and a
special file such as `/dev/zero` never ends.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from grammar import paths as path_rules
from policy import ast
from policy.diagnostics import CharterError, Diagnostic

READ_HELP = "check the file exists and is saved as UTF-8"
MAX_FILE_BYTES = 1 << 20  # (`ParseOptions.max_file_bytes`'s default)
# The longest name a declaration may have (`ParseOptions.max_name_chars`'s default, E0120):
# a role's, profile's, hook's or toolset's name, and a tool's full `toolset.tool`. The HTTP
# API names them by ids of at most this many characters (`api.commands.MAX_ID` is this).
MAX_NAME_CHARS = 256


def too_large(file: str, limit: int) -> Diagnostic:
    """E0014, for the reader and the parser alike."""
    return Diagnostic(
        "E0014",
        f"file is larger than the limit of {limit} bytes",
        ast.Span(file, 1, 1, 1, 1),
        "split the workspace into several files",
    )


class TooLarge(ValueError):
    """A file over the size limit (its E0014)."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


def read_bytes(path: str | Path, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """A file's bytes, reading at most one byte past `max_bytes`: `TooLarge` when there
    is that byte, OSError when the file cannot be read (a directory: IsADirectoryError)."""
    with open(path, "rb") as handle:  # (buffered: `read(n)` reads on until n bytes or EOF)
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TooLarge(too_large(str(path), max_bytes))
    return data


def read_file(path: str | Path, max_bytes: int = MAX_FILE_BYTES) -> str:
    """One file's text, taken as given (a directory is not searched), read and decoded as
    `read_sources` reads each file: OSError when it cannot be read, CharterError with
    E0014 or E0015 (and the text to show its line in) when it is too large or not UTF-8."""
    name = str(path)
    try:
        return decode(read_bytes(path, max_bytes), name)
    except TooLarge as big:
        raise CharterError([big.diagnostic]) from None
    except NotUtf8 as bad:
        raise CharterError([bad.diagnostic], {name: bad.shown}) from None


class NotUtf8(ValueError):
    """Bytes that are not UTF-8, and where the first bad byte is."""

    def __init__(self, diagnostic: Diagnostic, shown: str) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic
        self.shown = shown  # the text with bad bytes replaced, for showing the line


def decode(data: bytes, file: str) -> str:
    """The text of a policy file: strict UTF-8, line ends untouched. Raises `NotUtf8`
    (E0015 at the first bad byte, in lines and code-point columns) otherwise."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        line_start = before.rfind(b"\n") + 1
        column = len(before[line_start:].decode("utf-8")) + 1
        bad = data[exc.start : exc.end]
        shown_bytes = " ".join(f"0x{b:02x}" for b in bad[:4])
        what = "byte" if len(bad) == 1 else "bytes"
        diagnostic = Diagnostic(
            "E0015",
            f"the file is not UTF-8: {what} `{shown_bytes}` cannot be read as text",
            ast.Span(file, line, column, line, column + 1),
            READ_HELP,
        )
        raise NotUtf8(diagnostic, data.decode("utf-8", "replace")) from None


@dataclass(slots=True)
class Sources:
    """What reading a set of paths gave: the files that were read, in path order, a
    diagnostic for each that could not be, and every text to show a diagnostic's line
    in (an undecodable file's with its bad bytes replaced)."""

    files: list[tuple[str, str]] = field(default_factory=list)
    errors: list[Diagnostic] = field(default_factory=list)
    shown: dict[str, str] = field(default_factory=dict)
    # For each path given, the files found there, read or not, each as (the path a policy
    # names it by, as `charter serve --workspace` does: a directory's file relative to
    # it, a file given alone by its name; the name it is read and shown by).
    found: list[list[tuple[str, str]]] = field(default_factory=list)

    def path_problems(self) -> list[Diagnostic]:
        """E0119 (`grammar.paths`) for the paths of each directory's files (and of each
        file given alone) that not every file system holds: a workspace that is another
        on macOS or Windows, or cannot be checked out there at all."""
        return [
            problem
            for group in self.found
            for problem in path_rules.problems([p for p, _ in group], [name for _, name in group])
        ]


def find_files(paths: Iterable[str | Path]) -> list[Path]:
    """Every `*.charter` file under the given paths (a file is taken as given), sorted
    within each directory."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*.charter") if p.is_file()))
        else:
            found.append(path)
    return found


def read_sources(paths: Iterable[str | Path], max_bytes: int = MAX_FILE_BYTES) -> Sources:
    """Read every file; one that cannot be read or decoded, or is larger than
    `max_bytes`, is an error, not a stop."""
    out = Sources()
    for raw in paths:
        root = Path(raw)
        found = find_files([root])
        out.found.append(
            [(p.relative_to(root).as_posix() if p != root else p.name, str(p)) for p in found]
        )
        for path in found:
            _read_one(out, path, max_bytes)
    return out


def _read_one(out: Sources, path: Path, max_bytes: int) -> None:
    """Read `path` into `out`: its text, or the diagnostic of why it cannot be read."""
    name = str(path)
    try:
        data = read_bytes(path, max_bytes)
    except TooLarge as big:
        out.errors.append(big.diagnostic)
        return
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        out.errors.append(
            Diagnostic(
                "E0015",
                f"cannot read `{name}`: {reason.lower()}",
                ast.Span(name, 1, 1, 1, 1),
                READ_HELP,
            )
        )
        return
    try:
        text = decode(data, name)
    except NotUtf8 as bad:
        out.errors.append(bad.diagnostic)
        out.shown[name] = bad.shown
        return
    out.files.append((name, text))
    out.shown[name] = text


# What no path may read differently: a carriage return that ends no line, and a code
# point no UTF-8 text holds (a lone surrogate: a JSON body can carry one as `\ud800`).
_UNREADABLE = re.compile("\r(?!\n)|[\ud800-\udfff]")
MAX_TEXT_PROBLEMS = 10


def text_problems(text: str, file: str) -> list[Diagnostic]:
    """E0018 for each `\\r` not followed by `\\n`, E0015 for each lone surrogate (the
    first `MAX_TEXT_PROBLEMS`): the parser refuses such a text before reading it."""
    out: list[Diagnostic] = []
    for match in _UNREADABLE.finditer(text):
        at = match.start()
        line = text.count("\n", 0, at) + 1
        column = at - text.rfind("\n", 0, at)
        span = ast.Span(file, line, column, line, column + 1)
        if match.group() == "\r":
            out.append(
                Diagnostic(
                    "E0018",
                    "carriage return `U+000D` that does not end a line",
                    span,
                    "only `\\n` or `\\r\\n` ends a line: save the file with one of them",
                )
            )
        else:
            out.append(
                Diagnostic(
                    "E0015",
                    f"lone surrogate `U+{ord(match.group()):04X}` in the text: it is not UTF-8",
                    span,
                    "send the text as UTF-8",
                )
            )
        if len(out) == MAX_TEXT_PROBLEMS:
            break
    return out
