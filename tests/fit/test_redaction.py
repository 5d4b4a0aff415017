"""A fit or diff counterexample never shows a secret argument: a condition comparing one
with a literal makes the solver's call carry that literal, and it is redacted wherever the
call is shown (JSON, the command line's text), while the engine keeps the real call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from api.cli import main
from engine.check import check_sources
from engine.diff import diff_workspaces
from engine.fit import fit_workspace_profile
from engine.redaction import REDACTED
from engine.workspace import Workspace

KEY = "sk-live-9f8e7d6c"
TOOLS = "toolset vault {\n  tool connect(url: str, api_key: secret str)\n}\n"
CALLER = (
    TOOLS
    + f'role open {{\n  allow vault.connect where args.api_key != "{KEY}"\n}}\n'
    + "profile caller {\n  roles open\n  hooks none\n}\n"
)
LOOSE = (
    TOOLS
    + "role open {\n  allow vault.connect\n}\nprofile caller {\n  roles open\n  hooks none\n}\n"
)


def _ws(text: str) -> Workspace:
    return check_sources([("p.charter", text)])


def test_the_fit_counterexample_hides_the_secret_argument() -> None:
    caller = _ws(CALLER)
    result = fit_workspace_profile(caller, "caller", _ws(LOOSE), "caller", timeout_ms=20_000)
    [widens] = [v for v in result.violations if v.kind == "widens"]
    assert widens.counterexample is not None
    assert widens.counterexample["args"]["api_key"] == KEY  # the engine's call is real
    shown = json.dumps(result.to_json())
    assert KEY not in shown and REDACTED in shown


def test_the_diff_counterexample_hides_the_secret_argument() -> None:
    result = diff_workspaces(_ws(CALLER), _ws(LOOSE), timeout_ms=20_000)
    assert [c for c in result.changes if c.kind == "allow" and c.counterexample]
    shown = json.dumps(result.to_json())
    assert KEY not in shown and REDACTED in shown


def test_the_command_line_shows_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    for folder, text in ((old, CALLER), (new, LOOSE)):
        folder.mkdir()
        (folder / "p.charter").write_text(text)
    for fmt in ("text", "json"):
        assert main(["diff", str(old), str(new), "--format", fmt]) == 1
        out = capsys.readouterr().out
        assert KEY not in out and REDACTED in out
    fit = ["fit", "--workspace", str(old), "--caller", "caller"]
    assert main([*fit, "--file", str(new / "p.charter")]) in (0, 1)
    assert KEY not in capsys.readouterr().out
