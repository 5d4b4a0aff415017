"""The repository stands on its own: every link of README.md and docs/*.md leads to a file
in it (and to a heading there, when the link names one), every repository file that the
docs and the code cite by path is there, and no file cites a document kept outside it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
# Folders that hold no file of the project: version control, virtualenvs, tool caches
# (every one whose name starts with a dot), what builds and installs leave behind, and
# `make fuzz`'s report (its logs quote libFuzzer's paths).
SKIPPED_DIRS = frozenset({"__pycache__", "build", "dist", "node_modules", "fuzz-report"})

# Citations of documents that live outside the repository (each pattern is written so
# that it does not match its own text in this file).
OUTSIDE = (
    re.compile(r"DESIGN\.md"),
    re.compile(r"DESIGN (?:section|step)"),
    re.compile(r"[Dd]esign car[d]"),
    re.compile(r"seed-fact[s]"),
    re.compile(r"seed[s]/"),
    re.compile(r"\.\./shared\b"),
    re.compile(r"/work/(?:share[d]|note[s])\b"),
)

FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[ \t]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$", re.MULTILINE)
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$", re.MULTILINE)
# A path from the repository's root to one of its files, as prose and comments cite it
# (`engine/reference.py`, docs/fit.md, `tests/api/conftest.py::harness`). Paths of other
# kinds are examples of a policy's own files (`policy/mail.charter`), not citations.
CITED_PATH = re.compile(
    r"(?:grammar|policy|engine|api|fixtures|tests|bench|docs)/[\w./-]*?\.(?:py|md|lark|toml)"
    r"(?![\w/-])"
)
PATH_CHAR = re.compile(r"[\w./-]")


def _files() -> Iterator[Path]:
    """Every file of the working tree but those of the skipped folders."""
    stack = [ROOT]
    while stack:
        folder = stack.pop()
        for entry in sorted(folder.iterdir()):
            name = entry.name
            if name == ".git":  # (a worktree's is a file)
                continue
            if entry.is_dir():
                if not (name.startswith(".") or name in SKIPPED_DIRS or name.endswith(".egg-info")):
                    stack.append(entry)
            elif entry.is_file():
                yield entry


def _text(path: Path) -> str | None:
    """A file's text, or None for a binary file (a database, an image)."""
    data = path.read_bytes()
    return None if b"\0" in data else data.decode("utf-8", errors="replace")


def _prose(markdown: str) -> str:
    """Markdown without its code blocks and code spans, where brackets are not links."""
    return CODE_SPAN.sub("", FENCE.sub("", markdown))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text without markup, lowercased, with
    punctuation dropped and each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"[`*_~]|<[^>]*>", lambda m: "_" if m.group() == "_" else "", text)
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a markdown file's headings (a repeated one gets `-1`, `-2`, ...)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for match in HEADING.finditer(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    prose = _prose(path.read_text(encoding="utf-8"))
    return [m.group(1) for m in (*LINK.finditer(prose), *REFERENCE.finditer(prose))]


def broken_link(doc: Path, target: str) -> str | None:
    """Why `target`, a link in `doc`, leads nowhere in the repository; None if it is fine
    or leads outside it (a URL)."""
    if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
        return None  # https:, mailto:: not a file of the repository
    part, _, anchor = target.partition("#")
    if part.startswith("/"):
        return "a link from the root of a file system, not relative to the document"
    resolved = (doc.parent / part).resolve() if part else doc
    if not resolved.is_relative_to(ROOT):
        return "leads outside the repository"
    where = resolved.relative_to(ROOT).as_posix()
    if not resolved.exists():
        return f"no file `{where}`"
    if anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
        return f"no heading with the anchor `#{anchor}` in `{where}`"
    return None


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(doc: Path) -> None:
    problems = [f"{target}: {why}" for target in links(doc) if (why := broken_link(doc, target))]
    assert problems == []


def test_every_cited_repository_file_exists() -> None:
    missing = []
    for path in _files():
        if path.suffix not in (".md", ".py", ".lark", ".toml") and path.name != "Makefile":
            continue
        text = _text(path) or ""
        for match in CITED_PATH.finditer(text):
            start = match.start()
            if start and PATH_CHAR.match(text, start - 1):
                continue  # the tail of a longer path (`/tmp/docs/x.md`, `a.docs/x.md`)
            if not (ROOT / match.group()).is_file():
                missing.append(f"{path.relative_to(ROOT).as_posix()}: {match.group()}")
    assert missing == []


def test_no_file_cites_a_document_outside_the_repository() -> None:
    found = []
    for path in _files():
        text = _text(path)
        if text is None or not any(pattern.search(text) for pattern in OUTSIDE):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for pattern in OUTSIDE:
                if match := pattern.search(line):
                    where = f"{path.relative_to(ROOT).as_posix()}:{number}"
                    found.append(f"{where}: `{match.group()}`")
    assert found == []


# ---- the checks themselves, on known answers -----------------------------------------


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("1. The model", "1-the-model"),
        ("E0001: unexpected character", "e0001-unexpected-character"),
        ("E0008: `hooks none` combined", "e0008-hooks-none-combined"),
        ("How checking is made fast (`grammar/tables.py`, `engine/check.py`)",
         "how-checking-is-made-fast-grammartablespy-enginecheckpy"),
        ("E0118: a file under `api/roles/` that is not one role",
         "e0118-a-file-under-apiroles-that-is-not-one-role"),
        ("Semantic diff", "semantic-diff"),
        ("[Links](x.md) and snake_case", "links-and-snake_case"),
    ],
)  # fmt: skip
def test_slugs_are_githubs(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    doc = ROOT / "docs" / "design.md"
    assert broken_link(doc, "dsl.md") is None
    assert broken_link(doc, "fit.md#soundness-and-completeness") is None
    assert broken_link(doc, "#1-the-model") is None
    assert broken_link(doc, "https://example.com/x.md") is None
    nowhere = "nowhere" + ".md"  # (written so that it is no citation of a missing file)
    assert broken_link(doc, nowhere) == f"no file `docs/{nowhere}`"
    assert broken_link(doc, "fit.md#no-such-heading") == (
        "no heading with the anchor `#no-such-heading` in `docs/fit.md`"
    )
    assert broken_link(doc, "../../elsewhere.md") == "leads outside the repository"
    markdown = "[a](a.md) `[b](b.md)` ![c](c.png)\n\n```\n[d](d.md)\n```\n[e]: e.md\n"
    (tmp_path / "doc.md").write_text(markdown, encoding="utf-8")
    assert links(tmp_path / "doc.md") == ["a.md", "c.png", "e.md"]


def test_outside_citations_are_found() -> None:
    cited = [
        "see " + "DESIGN" + ".md section 2",
        "as " + "DESIGN" + " step 7 says",
        "the design " + "card fixes the folders",
        "shared/" + "seed" + "s/" + "seed" + "-facts.md",
        "../" + "shared/x",
        "/work/" + "shared/DESIGN",
    ]
    for line in cited:
        assert any(p.search(line) for p in OUTSIDE), line
    for line in ("docs/design.md section 2", "a seed of 32 bytes", "seeds the demo agent"):
        assert not any(p.search(line) for p in OUTSIDE), line
