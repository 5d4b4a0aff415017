"""engine/lints.py: each lint fires on fixtures/lints at its line, and none fires on
fixtures/workspace; `charter check` prints them, and `--no-lint` skips them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from engine.check import check_sources, load
from engine.lints import LintOptions, lint

ROOT = Path(__file__).resolve().parents[1]
LINTS, WORKSPACE = ROOT / "fixtures" / "lints", ROOT / "fixtures" / "workspace"

EXPECTED = [  # (code, line, column) in fixtures/lints/policy.charter, in file order
    ("W0301", 2, 26),  # a contradiction
    ("W0302", 3, 27),  # a tautology
    ("W0305", 7, 3),  # code without `execute`
    ("W0303", 10, 6),  # a role no profile selects
    ("W0304", 18, 6),  # a hook no profile installs
    ("W0304", 22, 38),  # a hook whose condition never holds
    ("W0307", 26, 39),  # a deny hook on a context key, unguarded
    ("W0304", 30, 6),  # a hook on tools its profiles never allow
    ("W0306", 41, 3),  # `hooks` without `default`
]


def test_each_lint_fires_on_its_fixture() -> None:
    found = [(d.code, d.span.line, d.span.col) for d in lint(load([LINTS]))]
    assert found == EXPECTED
    assert all(d.severity == "warning" and d.help for d in lint(load([LINTS])))


def test_no_lint_fires_on_the_fixtures_workspace() -> None:
    assert lint(load([WORKSPACE])) == []


def test_without_the_solver_only_its_lints_are_left_out() -> None:
    found = [d.code for d in lint(load([LINTS]), LintOptions(solver=False))]
    assert found == ["W0305", "W0303", "W0304", "W0304", "W0306"]


def test_a_solver_out_of_time_claims_nothing() -> None:
    codes = {d.code for d in lint(load([LINTS]), LintOptions(total_ms=0))}
    assert not codes & {"W0301", "W0302", "W0307"}


def test_a_rule_on_many_tools_is_not_asked_about() -> None:
    toolset = "toolset t {\n" + "".join(f"  tool t{i}(n: int)\n" for i in range(20)) + "}\n"
    policy = "role r {\n  allow t.* where args.n < 1 and args.n > 1\n}\nprofile p {\n  roles r\n}\n"
    ws = check_sources([("t.charter", toolset), ("p.charter", policy)])
    assert lint(ws, LintOptions(max_tools=16)) == []
    assert [d.code for d in lint(ws, LintOptions(max_tools=20))] == ["W0301"]


def _check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", "check", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_charter_check_prints_the_lints_and_still_passes() -> None:
    done = _check(str(LINTS))
    assert done.returncode == 0
    assert "fixtures/lints/policy.charter:2:26: warning[W0301]" in done.stderr
    assert "0 errors, 9 warnings" in done.stderr
    shown = json.loads(_check(str(LINTS), "--format", "json").stdout)
    assert [w["code"] for w in shown] == [code for code, _, _ in EXPECTED]
    assert _check(str(LINTS), "--no-lint").stderr == ""
