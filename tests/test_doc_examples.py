"""The walk-throughs of README.md and docs/dsl.md, run as printed: the policy they show,
the commands' last lines they quote and the diagnostics they print, character for
character (a doc that drifts from the tool fails here, not in a reader's terminal)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from api.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _blocks(doc: str) -> list[str]:
    """The doc's fenced blocks without a language (policy text and tool output), dedented
    as a numbered list indents them."""
    blocks: list[str] = []
    fence: tuple[str, list[str]] | None = None  # (the opening's indent and language, lines)
    for line in (ROOT / doc).read_text(encoding="utf-8").splitlines(keepends=True):
        stripped = line.strip()
        if fence is None and stripped.startswith("```"):
            fence = (line[: len(line) - len(line.lstrip())] + stripped[3:], [])
        elif fence is not None and stripped == "```":
            indent_and_language, body = fence
            if not indent_and_language.strip():
                blocks.append("".join(x.removeprefix(indent_and_language) for x in body))
            fence = None
        elif fence is not None:
            fence[1].append(line)
    return blocks


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(args)
    printed = capsys.readouterr()
    return code, printed.out + printed.err


def test_the_readme_walk_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    policy, diagnostic = _blocks("README.md")[:2]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rules").mkdir()
    path = tmp_path / "rules" / "mail.charter"
    path.write_text(policy, encoding="utf-8")
    assert _run(["check", "rules/"], capsys)[0] == 0
    assert _run(["test", "rules/"], capsys) == (0, "2 passed, 0 failed\n")
    assert _run(["fmt", "--check", "rules/"], capsys)[0] == 0
    path.write_text(policy.replace("args.to endswith", "args.too endswith"), encoding="utf-8")
    code, out = _run(["check", "rules/"], capsys)
    assert code == 1 and out == diagnostic + "\n1 error\n"


def test_the_dsl_guide_walk_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/dsl.md, "Write your first role": steps 1 to 3 and the failing expectation."""
    mistakes, diagnostics, fixed_role, tests, failure = _blocks("docs/dsl.md")[:5]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rules").mkdir()
    path = tmp_path / "rules" / "mail.charter"
    path.write_text(mistakes, encoding="utf-8")
    assert _run(["check", "rules/"], capsys) == (1, diagnostics)
    fixed = re.sub(r"role mail-helper \{.*?\n\}\n", fixed_role, mistakes, flags=re.S)
    path.write_text(fixed, encoding="utf-8")
    ok = "ok: 1 file, 1 toolset, 1 role, 6 hooks, 1 profile, 0 tests\n"
    assert _run(["check", "rules/"], capsys) == (0, ok)
    path.write_text(fixed + "\n" + tests, encoding="utf-8")
    assert _run(["test", "rules/"], capsys) == (0, "3 passed, 0 failed\n")
    # The failure shown is a fourth expectation, on line 18, that the role does not meet.
    expect = failure.splitlines()[0].split(": ")[-1]
    wrong = f'  {expect} {{ to: "eve@elsewhere.net", subject: "hi", body: "hello" }}\n}}\n'
    path.write_text(fixed + "\n" + tests.removesuffix("}\n") + wrong, encoding="utf-8")
    assert path.read_text(encoding="utf-8").splitlines()[17].startswith(f"  {expect} ")
    assert _run(["test", "rules/"], capsys) == (1, failure)
