"""The bad-inputs corpus: every broken file gives exactly the diagnostics it should.

Each case is a `.charter` file or a directory under `fixtures/bad/`. Its expected
diagnostics (code, file, line, column) are data in `fixtures/bad/expected.json`; the fully
rendered messages are golden files in `fixtures/golden/<case>.txt`. Paths are relative to
`fixtures/bad/`, so the goldens do not depend on where the checkout lives.

Regenerate the goldens after a deliberate change of wording with
`CHARTER_UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_corpus.py` and review the diff.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from engine.check import load
from policy.diagnostics import CharterError, Diagnostic, render_all

ROOT = Path(__file__).resolve().parent.parent
BAD = ROOT / "fixtures" / "bad"
GOLDEN = ROOT / "fixtures" / "golden"
EXPECTED: dict[str, list[dict[str, object]]] = json.loads(
    (BAD / "expected.json").read_text(encoding="utf-8")
)
UPDATE = os.environ.get("CHARTER_UPDATE_GOLDEN") == "1"


def _cases() -> list[str]:
    return sorted(p.name for p in BAD.iterdir() if p.suffix != ".json")


def _name(case: str) -> str:
    return case.removesuffix(".charter")


def _diagnose(case: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Diagnostic], str]:
    monkeypatch.chdir(BAD)
    try:
        workspace = load([case])
    except CharterError as exc:
        return exc.diagnostics, render_all(exc.diagnostics, exc.sources)
    return list(workspace.warnings), render_all(workspace.warnings, workspace.sources)


def test_every_case_has_expectations_and_a_golden() -> None:
    names = {_name(c) for c in _cases()}
    assert len(names) >= 25
    assert names == set(EXPECTED), "fixtures/bad/expected.json must list every case"
    if not UPDATE:
        goldens = {p.stem for p in GOLDEN.glob("*.txt")}
        assert goldens == names, "a golden file is missing or stale"


@pytest.mark.parametrize("case", _cases())
def test_bad_input(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    diagnostics, rendered = _diagnose(case, monkeypatch)
    found = [
        {"code": d.code, "file": d.span.file, "line": d.span.line, "column": d.span.col}
        for d in diagnostics
    ]
    assert found == EXPECTED[_name(case)]
    for diag in diagnostics:
        # Cedar's style: lowercase, no full stop, user input in backticks.
        assert diag.message[0] in '`"' or diag.message[0].islower(), diag.message
        assert not diag.message.endswith("."), diag.message
        if diag.help is not None:
            assert diag.help.strip() and not diag.help[0].isupper(), diag.help
    golden = GOLDEN / f"{_name(case)}.txt"
    text = rendered + "\n"
    if UPDATE:
        golden.write_text(text, encoding="utf-8")
    assert golden.read_text(encoding="utf-8") == text


def test_corpus_covers_every_phase() -> None:
    codes = {d["code"] for diags in EXPECTED.values() for d in diags}
    assert {c for c in codes if re.fullmatch(r"E00\d\d", str(c))}, "syntax errors"
    assert {c for c in codes if re.fullmatch(r"E01\d\d", str(c))}, "name errors"
    assert {c for c in codes if re.fullmatch(r"E02\d\d", str(c))}, "type errors"
    assert "W0115" in codes
    # Several diagnostics are collected from one case, in location order.
    assert any(len(diags) >= 3 for diags in EXPECTED.values())


def test_every_error_code_in_the_code_base_is_documented() -> None:
    used: set[str] = set()
    for package in ("grammar", "policy", "engine", "api"):
        for path in (ROOT / package).rglob("*.py"):
            used |= set(re.findall(r"\"([EW]\d{4})\"", path.read_text(encoding="utf-8")))
    documented = set(
        re.findall(r"^### ([EW]\d{4})\b", (ROOT / "docs" / "errors.md").read_text("utf-8"), re.M)
    )
    assert used, "no codes found: has the layout changed?"
    assert sorted(used - documented) == [], "document these codes in docs/errors.md"
    corpus = {str(d["code"]) for diags in EXPECTED.values() for d in diags}
    assert corpus <= documented
