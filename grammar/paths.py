"""Policy file paths that every file system can hold (E0119).

A policy's files are named by relative paths (`teams/support.charter`, parts between `/`),
so that a revision can be written out into a directory (a checkout, `charter serve
--workspace`) and read back as the same policy. Some sets of paths cannot be:

- two paths that differ only in case, or in how an accented letter is encoded
  (`A.charter` and `a.charter`): one file on a case-insensitive file system (macOS, a
  Windows checkout), where one of them was lost;
- a file's path that is another file's directory (`x.charter` and `x.charter/y.charter`,
  or `X.charter` and `x.charter/y.charter` on such a file system): no directory holds a
  file and a directory of one name;
- one directory spelled two ways (`Roles/a.charter` and `roles/b.charter`): on such a
  file system they are one directory, spelled as whichever came first, so a checkout
  reads one of the files back under another path (`API/roles/x.charter` beside a role
  made through the API would come back as the API's own `api/roles/x.charter`);
- a part that Windows takes for a device (`CON`, `PRN`, `AUX`, `NUL`, `CONIN$`,
  `CONOUT$`, `COM1` to `COM9`, `LPT1` to `LPT9`, in any case, with any extension:
  `con.charter`, `aux/x.charter`), or that ends in a dot or a space, which Windows drops
  (`teams./x.charter` is `teams/x.charter` there);
- a part holding a character no Windows name holds: `<`, `>`, `:`, `"`, `|`, `?`, `*`, a
  backslash (a separator there) or a control character. (`a:b.charter` is, on NTFS, the
  stream `b.charter` of a file `a`, which no directory listing shows.)

`PUT /v1/policy` refuses such an upload with a 400 `bad-path` (api.http.policy); the
service (`charter serve --workspace`, a role made through the API) and `charter check`
give E0119. Each check is one pass over the paths (dictionary look-ups, linear in their
total length): a policy holds up to 10,000 files.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from policy import ast
from policy.diagnostics import Diagnostic

# Windows's reserved device names (with the superscript digits it takes for digits too).
DEVICES = frozenset(
    ["con", "prn", "aux", "nul", "conin$", "conout$"]
    + [f"{port}{digit}" for port in ("com", "lpt") for digit in "123456789\u00b9\u00b2\u00b3"]
)
PART_HELP = "rename that part of the path"
# What no Windows file name holds (a backslash separates parts there), and the other control
# characters, which `PUT /v1/policy` refuses too (api.http.policy).
_NOT_WINDOWS = re.compile(r'[<>:"|?*\\\x00-\x1f\x7f-\x9f]')


def fold(path: str) -> str:
    """Unicode's canonical caseless match (NFD, casefold, composed again): APFS also takes
    `é` composed and decomposed for one name. (`/` is neither folded nor composed, so a
    path folds part by part.)"""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", path).casefold())


def part_problem(path: str) -> str | None:
    """Why a Windows checkout cannot hold `path` (a character no Windows name holds, a
    device name or a part ending in a dot or a space; see the module's doc), or None: the
    end of a message that names it."""
    for part in path.split("/"):
        held = _NOT_WINDOWS.search(part)
        if held is not None:
            char = held.group()
            shown = (
                "a backslash" if char == "\\"
                else f"`{char}`" if char.isprintable() else f"`U+{ord(char):04X}`"
            )  # fmt: skip
            part = re.sub(r"[\x00-\x1f\x7f-\x9f]", lambda m: f"\\x{ord(m.group()):02x}", part)
            return (
                f"has the part `{part}`, which holds {shown}: no Windows name holds `<`, `>`, "
                '`:`, `"`, `|`, `?`, `*`, a backslash or a control character'
            )
        if part.endswith((".", " ")):
            end = "dot" if part.endswith(".") else "space"
            return (
                f"has the part `{part}`, which ends in a {end}: Windows drops the dots and "
                "spaces a name ends in, so a checkout there names it otherwise"
            )
        # (`con.charter`, `con.tar.charter` and `con .charter` are the device `CON` too)
        device = part.split(".", 1)[0].rstrip(" ")
        if device.lower() in DEVICES:
            return (
                f"has the part `{part}`, which Windows takes for the device `{device.upper()}` "
                "(as it does `CON`, `PRN`, `AUX`, `NUL`, `CONIN$`, `CONOUT$`, `COM1` to `COM9` "
                "and `LPT1` to `LPT9`, in any case and with any extension): no Windows "
                "directory holds it"
            )
    return None


@dataclass(frozen=True, slots=True)
class Clash:
    """Two paths that no directory on every file system holds both of: `first` comes
    before `second` in the policy's order. `file`, when set, is the one of them that is
    the other's directory (else they differ only in case)."""

    first: str
    second: str
    file: str = ""
    # Set for one directory spelled two ways: its spelling in `first`, then in `second`.
    directories: tuple[str, str] | None = None

    @property
    def message(self) -> str:
        if self.directories is not None:
            one, other = self.directories
            return (
                f"the directory `{one}` of `{self.first}` and the directory `{other}` of "
                f"`{self.second}` differ only in case or Unicode form: on a case-insensitive "
                "file system (macOS, Windows) they are one directory, and a checkout reads "
                "one of the files back under another path"
            )
        if not self.file:
            first, second = self.first, self.second
            how = "case" if first.casefold() == second.casefold() else "case or Unicode form"
            return (
                f"file paths `{first}` and `{second}` differ only in {how}: on a "
                "case-insensitive file system (macOS, Windows) they are one file"
            )
        file = self.file
        inner = self.second if file == self.first else self.first
        directory = "/".join(inner.split("/")[: file.count("/") + 1])
        if directory == file:
            return (
                f"file path `{file}` is also the directory of `{inner}`: no directory holds "
                "a file and a directory of one name"
            )
        how = "case" if file.casefold() == directory.casefold() else "case or Unicode form"
        return (
            f"file path `{file}` and the directory `{directory}` of `{inner}` differ only "
            f"in {how}: on a case-insensitive file system (macOS, Windows) they are one "
            "name, and no directory holds a file and a directory of one name"
        )

    @property
    def help(self) -> str:
        if self.directories is not None:
            return "spell the directory the same way in every path"
        if self.file:
            return "rename the file or the directory, or move the files under it elsewhere"
        return "rename one of the two files, or merge them into one"


def clashes(paths: Sequence[str]) -> list[Clash]:
    """Each clash among `paths` (see the module's doc), in the order of the later path of
    each: a path that differs only in case from an earlier one, and a file's path that is
    another's directory (once for each such file, with the first path under it), and a
    path that spells a directory otherwise than an earlier one (once, for its deepest such
    directory). The same path twice is no clash (that is a duplicate)."""
    folded = [fold(path) for path in paths]
    files: dict[str, int] = {}
    dirs: dict[str, int] = {}  # each folded directory, and the first path under it
    found: list[tuple[int, Clash]] = []
    spellings: list[tuple[int, Clash]] = []  # (after the others of the same path)
    for index, (path, key) in enumerate(zip(paths, folded, strict=True)):
        first = files.setdefault(key, index)
        if paths[first] != path:
            found.append((index, Clash(paths[first], path)))
            continue  # (its folded directories are the earlier path's, seen: one clash)
        end = key.rfind("/")
        while end > 0:
            seen = dirs.setdefault(key[:end], index)
            if seen != index:  # (a directory seen before has its parents seen)
                spelled = _directory(path, key[:end].count("/"))
                before = _directory(paths[seen], key[:end].count("/"))
                if spelled != before:  # (only the deepest: its parents may be alike)
                    clash = Clash(paths[seen], path, directories=(before, spelled))
                    spellings.append((index, clash))
                break
            end = key.rfind("/", 0, end)
    for index, key in enumerate(folded):
        under = dirs.get(key)
        if under is not None and files[key] == index:
            early, late = sorted((index, under))
            found.append((late, Clash(paths[early], paths[late], paths[index])))
    found += spellings
    found.sort(key=lambda item: item[0])
    return [clash for _, clash in found]


def _directory(path: str, slashes: int) -> str:
    """`path`'s directory of `slashes` + 1 parts, as `path` spells it (a folded path has
    as many parts: folding leaves `/` as it is)."""
    return "/".join(path.split("/")[: slashes + 1])


def problems(paths: Sequence[str], shown: Sequence[str] | None = None) -> list[Diagnostic]:
    """E0119 for each path of `paths` that a Windows checkout cannot hold, then for each
    clash (at 1:1 of its later path). `shown`: the name each path's diagnostic is at (the
    file as read: `policy/aux.charter` for the path `aux.charter`), default the path."""
    where = dict(zip(paths, shown or paths, strict=True))
    out: list[Diagnostic] = []
    for path in paths:
        problem = part_problem(path)
        if problem is not None:
            out.append(
                Diagnostic(
                    "E0119",
                    f"file path `{path}` {problem}",
                    ast.Span(where[path], 1, 1, 1, 1),
                    PART_HELP,
                )
            )
    for clash in clashes(paths):
        span = ast.Span(where[clash.second], 1, 1, 1, 1)
        out.append(Diagnostic("E0119", clash.message, span, clash.help))
    return out
