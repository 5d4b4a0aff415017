"""What `charter check` and `charter fmt` report: warnings next to errors, and the
formatter's canonical line ends (kept apart from tests/test_cli.py's basics)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from api.cli import main

WARNED = "role a {\n  allow search\n}\n\nprofile p {\n  roles a, a, b\n}\n"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_check_reports_warnings_along_with_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "a.charter").write_text(WARNED, encoding="utf-8")
    code, out, err = run(capsys, "check", str(tmp_path))
    assert code == 1 and out == ""
    assert "a.charter:6:12: warning[W0115]: profile `p` lists a role twice" in err
    assert "a.charter:6:15: error[E0104]" in err
    assert err.rstrip().endswith("1 error, 1 warning")
    code, out, _ = run(capsys, "check", "--format", "json", str(tmp_path))
    assert code == 1
    assert [(d["code"], d["severity"]) for d in json.loads(out)] == [
        ("W0115", "warning"),
        ("E0104", "error"),
    ]


@pytest.mark.parametrize(
    "canonical",
    ["role a {\n  allow search\n}\n", "# note\n\nrole a {\n  allow search  # why\n}\n"],
    ids=["role", "comments"],
)
def test_fmt_makes_line_ends_canonical(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, canonical: str
) -> None:
    """The canonical form ends lines with `\\n`: a file that differs only by `\\r\\n`
    would be reformatted, and `--write` writes `\\n`."""
    path = tmp_path / "a.charter"
    path.write_bytes(canonical.replace("\n", "\r\n").encode("utf-8"))
    code, out, _ = run(capsys, "fmt", "--check", str(path))
    assert code == 1 and out == f"would reformat {path}\n"
    code, out, _ = run(capsys, "fmt", "--write", str(path))
    assert code == 0 and out == f"reformatted {path}\n"
    assert path.read_bytes() == canonical.encode("utf-8")
    assert run(capsys, "fmt", "--check", str(path))[:2] == (0, "")
    assert run(capsys, "fmt", "--write", str(path))[:2] == (0, "")
