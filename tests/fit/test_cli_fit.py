"""The `charter fit`, `charter tools` and `charter diff` verbs, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from api.cli import main

FIXTURE = "fixtures/fit"


def test_fit_prints_a_counterexample_for_the_widening_role(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["fit", "--workspace", FIXTURE, "--caller", "support", "--role", "mail-partners"])
    out = capsys.readouterr().out
    assert code == 1
    assert "widens: role `mail-partners` allows `mail.send`" in out
    assert "counterexample: mail.send" in out


def test_fit_says_fits_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", "--workspace", FIXTURE, "--caller", "support", "--profile", "helper"]) == 0
    assert capsys.readouterr().out.strip() == "fits"
    args = ["fit", "--workspace", FIXTURE, "--caller", "support", "--profile", "loose"]
    assert main([*args, "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["fits"] is False
    assert {v["kind"] for v in data["violations"]} == {"drops-deny", "drops-hook", "budget"}


def test_fit_file_and_bad_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "r.charter"
    good.write_text(
        'role t {\n  allow mail.send where args.to == "a@example.com" and len(args.cc) == 0\n}\n'
    )
    assert main(["fit", "--workspace", FIXTURE, "--caller", "support", "--file", str(good)]) == 0
    bad = tmp_path / "bad.charter"
    bad.write_text("role t {\n  allow nosuch.tool\n}\n")
    wide = tmp_path / "wide.charter"
    wide.write_text("role t {\n  allow mail.send\n}\n")
    assert main(["fit", "--workspace", FIXTURE, "--caller", "support", "--file", str(wide)]) == 1
    assert f"at {wide}:2:3" in capsys.readouterr().out
    assert main(["fit", "--workspace", FIXTURE, "--caller", "support", "--file", str(bad)]) == 1
    assert "nosuch.tool" in capsys.readouterr().err


def test_fit_file_is_read_as_check_reads_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file that is not UTF-8 was an internal error (UnicodeDecodeError); it is E0015
    where `charter check` puts it. A missing file stays exit 2."""
    latin = tmp_path / "latin.charter"
    latin.write_bytes(b"role t {\n  allow mail.send # caf\xe9\n}\n")
    argv = ["fit", "--workspace", FIXTURE, "--caller", "support", "--file"]
    assert main([*argv, str(latin)]) == 1
    err = capsys.readouterr().err
    assert f"{latin}:2:24: error[E0015]: the file is not UTF-8: byte `0xe9`" in err
    assert "2 |   allow mail.send # caf\ufffd" in err and "internal error" not in err
    assert main([*argv, str(tmp_path / "nope.charter")]) == 2
    assert capsys.readouterr().err == (
        f"charter: cannot read `{tmp_path / 'nope.charter'}`: no such file or directory\n"
    )
    assert main([*argv, "/dev/zero"]) == 1  # (read to its end: MemoryError)
    out, err = capsys.readouterr()
    assert out == "" and "/dev/zero:1:1: error[E0014]" in err, (out, err)


def test_tools_lists_allow_narrow_and_hooks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools", "--workspace", FIXTURE, "--profile", "support"]) == 0
    out = capsys.readouterr().out
    assert 'narrow mail.send where args.to endswith "@example.com" and len(args.cc) == 0' in out
    assert "hook `approve-role-create` pause" in out
    assert main(["tools", "--workspace", FIXTURE, "--profile", "support", "--format", "json"]) == 0
    statuses = {t["tool"]: t["status"] for t in json.loads(capsys.readouterr().out)}
    assert statuses["agents.list"] == "allow" and statuses["scripts.run"] == "deny"


def test_diff_exits_1_when_access_widened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = Path(FIXTURE, "policy.charter").read_text()
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "p.charter").write_text(text.replace("<= 50", "<= 70"))
    assert main(["diff", FIXTURE, FIXTURE]) == 0
    assert "no access changed" in capsys.readouterr().out
    assert main(["diff", FIXTURE, str(tmp_path / "new")]) == 1
    assert "wider: profile `support`: `mail.search`" in capsys.readouterr().out
