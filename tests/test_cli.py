"""The `charter` command, in-process through `api.cli.main` and once as a real process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from api import cli
from api.cli import main, write_atomically
from charter import __version__

ROOT = Path(__file__).resolve().parent.parent
WORKSPACE = str(ROOT / "fixtures" / "workspace")
SAMPLE = '{"to": "bob@example.com", "subject": "hi", "body": "hello"}'


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    (tmp_path / "a.charter").write_text(
        "role a {\n  allow serch\n}\n\nprofile p {\n  roles a, b\n}\n", encoding="utf-8"
    )
    return tmp_path


def test_check_ok(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", WORKSPACE)
    assert code == 0
    assert out.startswith("ok: ") and "8 toolsets" in out


def test_check_errors_exit_1_with_rendered_messages(
    capsys: pytest.CaptureFixture[str], broken: Path
) -> None:
    code, out, err = run(capsys, "check", str(broken))
    assert code == 1 and out == ""
    assert "a.charter:2:9: error[E0101]: no tool is named `serch`" in err
    assert "  = help: did you mean `search`?" in err
    assert "a.charter:6:12: error[E0104]" in err
    assert err.rstrip().endswith("2 errors")


def test_check_json(capsys: pytest.CaptureFixture[str], broken: Path) -> None:
    code, out, _ = run(capsys, "check", "--format", "json", str(broken))
    assert code == 1
    data = json.loads(out)
    assert [d["code"] for d in data] == ["E0101", "E0104"]
    assert set(data[0]) == {
        "code", "severity", "message", "file", "line", "column", "end_line", "end_column", "help",
    }  # fmt: skip
    assert (data[0]["line"], data[0]["column"], data[0]["severity"]) == (2, 9, "error")
    code, out, _ = run(capsys, "check", "--format", "json", WORKSPACE)
    assert code == 0 and json.loads(out) == []


def test_check_shows_twenty_warnings_of_a_code_and_counts_the_rest(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """25 roles no profile selects (W0303) and one hook no profile installs (W0304): as
    text, the first 20 W0303 in file order, a count of the 5 left and how to see them,
    the W0304; `--all-warnings` and JSON give every one; the totals are the same."""
    roles = "".join(f"role unused-{n:02d} {{\n  allow search\n}}\n" for n in range(25))
    (tmp_path / "policy.charter").write_text(
        roles + 'hook idle on search {\n  pause "a person looks"\n}\n'
        "role used {\n  allow search\n}\nprofile p {\n  roles used\n  hooks none\n}\n",
        encoding="utf-8",
    )
    code, out, err = run(capsys, "check", str(tmp_path))
    assert code == 0 and out.startswith("ok: 1 file")
    assert err.count("warning[W0303]: role `unused-") == 20
    assert "role `unused-19`" in err and "role `unused-20`" not in err
    assert "... and 5 more warning[W0303]" in err and "warning[W0304]" in err
    assert "0 errors, 26 warnings" in err
    assert "`--all-warnings` shows every warning" in err
    code, _, err = run(capsys, "check", "--all-warnings", str(tmp_path))
    assert code == 0 and err.count("warning[W0303]: role `unused-") == 25
    assert "more warning" not in err and "--all-warnings" not in err
    assert "0 errors, 26 warnings" in err
    code, out, _ = run(capsys, "check", "--format", "json", str(tmp_path))
    assert [d["code"] for d in json.loads(out)].count("W0303") == 25


def test_fmt_check_and_write(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "a.charter"
    path.write_text("role a{allow search}", encoding="utf-8")
    code, out, _ = run(capsys, "fmt", "--check", str(path))
    assert code == 1 and out == f"would reformat {path}\n"
    code, out, _ = run(capsys, "fmt", str(path))
    assert code == 0 and out == "role a {\n  allow search\n}\n"
    assert path.read_text(encoding="utf-8") == "role a{allow search}"
    code, out, _ = run(capsys, "fmt", "--write", str(path))
    assert code == 0 and out == f"reformatted {path}\n"
    assert path.read_text(encoding="utf-8") == "role a {\n  allow search\n}\n"
    assert run(capsys, "fmt", "--check", str(path))[0] == 0
    assert run(capsys, "fmt", "--check", WORKSPACE)[0] == 0


def test_fmt_refuses_broken_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "a.charter"
    path.write_text("role a {", encoding="utf-8")
    code, _, err = run(capsys, "fmt", "--write", str(path))
    assert code == 1 and "error[E0002]" in err
    assert path.read_text(encoding="utf-8") == "role a {"


SURROGATE = 'role a {\n    allow search where args.query == "\\ud800"\n}\n'


@pytest.mark.parametrize("verb", [["fmt", "--write"], ["fmt"], ["fmt", "--check"], ["test"]])
def test_a_lone_surrogate_escape_is_an_error_not_a_crash(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, verb: list[str]
) -> None:
    path = tmp_path / "a.charter"
    path.write_text(SURROGATE, encoding="utf-8")
    code, _, err = run(capsys, *verb, str(path))
    assert code == 1 and "error[E0003]" in err and "surrogate" in err
    assert "Traceback" not in err
    assert path.read_text(encoding="utf-8") == SURROGATE


def test_fmt_write_replaces_a_file_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.charter"
    path.write_text("role a{allow search}", encoding="utf-8")
    path.chmod(0o640)
    with pytest.raises(UnicodeEncodeError):
        write_atomically(path, "role a {}\n# \ud800\n")  # cannot be encoded: nothing written

    def fail(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.replace", fail)
    with pytest.raises(OSError):
        write_atomically(path, "role a {}\n")
    monkeypatch.undo()
    assert path.read_text(encoding="utf-8") == "role a{allow search}"
    assert [p.name for p in tmp_path.iterdir()] == ["a.charter"]  # no temporary file left
    write_atomically(path, "role a {}\n")
    assert path.read_text(encoding="utf-8") == "role a {}\n"
    assert path.stat().st_mode & 0o777 == 0o640


@pytest.fixture
def three(tmp_path: Path) -> Path:
    (tmp_path / "a.charter").write_text("role a {\n  allow serch\n}\n", encoding="utf-8")
    (tmp_path / "b.charter").write_bytes(b"role b {\n  allow search # caf\xe9\n}\n")
    (tmp_path / "c.charter").write_text("role c {\n  allow exec\n}\n", encoding="utf-8")
    return tmp_path


def test_a_file_that_is_not_utf8_does_not_hide_the_others(
    capsys: pytest.CaptureFixture[str], three: Path
) -> None:
    code, _, err = run(capsys, "check", str(three))
    assert code == 1 and err.rstrip().endswith("3 errors")
    assert "a.charter:2:9: error[E0101]" in err and "c.charter:2:9: error[E0101]" in err
    assert "b.charter:2:21: error[E0015]: the file is not UTF-8: byte `0xe9`" in err
    code, out, err = run(capsys, "fmt", "--check", str(three))
    assert code == 1 and "b.charter:2:21: error[E0015]" in err
    assert out == "" and err.rstrip().endswith("1 error")  # a and c are canonical
    (three / "a.charter").write_text("role a{allow serch}", encoding="utf-8")
    code, out, _ = run(capsys, "fmt", "--check", str(three))
    assert code == 1 and "would reformat" in out and "a.charter" in out


def test_a_lone_carriage_return_is_refused_by_every_verb(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "a.charter"
    data = b"role a {\n  allow search # note\rallow execute\n}\nprofile p {\n  roles a\n}\n"
    path.write_bytes(data)
    for verb in (["check"], ["fmt", "--write"], ["test"]):
        code, _, err = run(capsys, *verb, str(path))
        assert code == 1 and "a.charter:2:22: error[E0018]" in err, verb
    assert path.read_bytes() == data
    path.write_bytes(data.replace(b"\r", b"\n").replace(b"\n", b"\r\n"))  # CRLF throughout
    code, out, _ = run(capsys, "fmt", str(path))
    assert (
        code == 0
        and out
        == "role a {\n  allow search  # note\n  allow execute\n}\n\nprofile p {\n  roles a\n}\n"
    )


def test_an_internal_error_is_one_line_and_exit_3(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*args: object) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr("api.cli.compile_workspace", boom)
    code, _, err = run(capsys, "test", WORKSPACE)
    assert code == 3 and "Traceback" not in err and "secret" not in err
    assert err == "charter: internal error (RuntimeError); this is a bug, please report it\n"


def test_test_passes_on_the_fixtures(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "test", WORKSPACE)
    assert code == 0
    last = out.rstrip().splitlines()[-1]
    passed = int(last.split()[0])
    assert passed >= 40 and last == f"{passed} passed, 0 failed"


def test_test_failure_shows_expected_actual_and_reasons(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shutil.copytree(WORKSPACE, tmp_path / "ws")
    (tmp_path / "ws" / "zz-wrong.charter").write_text(
        'test "wrong" {\n  profile support\n'
        '  expect allow mail.send { to: "eve@elsewhere.net", subject: "hi", body: "x" }\n}\n',
        encoding="utf-8",
    )
    code, out, _ = run(capsys, "test", str(tmp_path / "ws"))
    assert code == 1
    lines = out.rstrip().splitlines()
    assert lines[-1].endswith(" passed, 1 failed")
    assert any(line.startswith("FAIL ") and 'test "wrong"' in line for line in lines)
    assert "  expected `allow`, got `deny`" in lines
    assert any("near miss" in line and "mail-support" in line for line in lines)
    code, out, _ = run(capsys, "test", "--format", "json", str(tmp_path / "ws"))
    data = json.loads(out)
    assert code == 1 and data["failed"] == 1 and data["passed"] >= 40


def test_decide_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["decide", "--workspace", WORKSPACE, "--profile", "support", "--tool", "mail.send"]
    code, out, _ = run(capsys, *argv, "--args", SAMPLE)
    data = json.loads(out)
    assert code == 0 and data["effect"] == "allow"
    assert data["args"]["cc"] == [] and data["reasons"][0]["role"] == "mail-support"
    assert set(data) == {"effect", "args", "reasons", "errors", "near_misses"}
    code, out, _ = run(
        capsys, *argv, "--args", '{"to": "eve@elsewhere.net", "subject": "s", "body": "b"}'
    )
    assert json.loads(out)["effect"] == "deny"


def test_decide_with_context(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "decide", "--workspace", WORKSPACE, "--profile", "engineering", "--tool", "github.merge_pr",
        "--args", '{"repo": "acme/web", "number": 7}', "--context", '{"ci": "green"}',
    )  # fmt: skip
    assert code == 0 and json.loads(out)["effect"] == "pause"


def test_decide_rejects_bad_json(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(
            [
                "decide",
                "--workspace",
                WORKSPACE,
                "--profile",
                "support",
                "--tool",
                "x",
                "--args",
                "{",
            ]
        )
    assert info.value.code == 2
    assert "--args is not valid JSON" in capsys.readouterr().err


def test_decide_names_an_unknown_profile_with_a_suggestion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["decide", "--workspace", WORKSPACE, "--profile", "suport", "--tool", "mail.send"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "no profile `suport`" in err and "did you mean `support`?" in err


def test_explain_trace(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "explain", "--workspace", WORKSPACE, "--profile", "support", "--tool", "mail.send",
        "--args", SAMPLE,
    )  # fmt: skip
    assert code == 0
    assert out.startswith("decide `mail.send` for profile `support`")
    assert "  1. shape: ok" in out and "  2. denies win:" in out and "  3. allows add up:" in out
    assert "role `mail-support`" in out and "-> true" in out
    assert "result: ALLOW" in out


SEED = "5e" * 32
CREDENTIAL = "ghp_credential_never_shown"


@pytest.mark.parametrize("command", ["decide", "explain"])
def test_decide_and_explain_redact_secret_arguments(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """The command line shows a call's secret arguments as the service does, `[redacted]`
    (a seed, a credential; in a call denied for its shape every tool's): its output goes
    where a decision's goes, into a CI log or a ticket. Other arguments are shown."""
    argv = [command, "--workspace", WORKSPACE, "--profile", "platform-admin"]
    calls = [
        ("identities.import", {"seed": SEED, "label": "mine"}, "allow"),
        ("connections.create", {"name": "n", "toolset": "t", "credential": CREDENTIAL}, "allow"),
        ("identities.create", {"seed": SEED}, "deny"),
    ]
    for tool, args, effect in calls:
        code, out, _ = run(capsys, *argv, "--tool", tool, "--args", json.dumps(args))
        assert code == 0 and SEED not in out and CREDENTIAL not in out, out
        if command == "decide":
            data = json.loads(out)
            assert data["effect"] == effect
            if effect == "allow":
                secret = "seed" if tool == "identities.import" else "credential"
                assert data["args"] == {**args, secret: "[redacted]"}
        else:
            assert f"result: {effect.upper()}" in out
            assert effect == "deny" or '"[redacted]"' in out


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["check"])
    assert info.value.code == 2


def test_the_console_script_runs_as_a_real_process() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "api.cli", "test", WORKSPACE],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().splitlines()[-1].endswith(" passed, 0 failed")


# A process of the command line that may not grow past 1 GiB of address space (a file
# read whole, only to be refused for its size, can need more); its peak RSS in KiB is the
# last line of its stderr.
LIMITED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from api.cli import main
code = main(sys.argv[1:])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(code)
"""


def run_limited(*argv: str) -> tuple[int, str, int]:
    done = subprocess.run(
        [sys.executable, "-c", LIMITED, *argv],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
    )  # fmt: skip
    *lines, peak = done.stderr.rstrip().splitlines() or ["0"]
    assert done.stdout == "", done.stdout
    return done.returncode, "\n".join(lines), int(peak) if peak.isdigit() else -1


TOO_LARGE = "/dev/zero:1:1: error[E0014]: file is larger than the limit of 1048576 bytes"


def test_a_file_that_never_ends_is_refused_in_bounded_memory() -> None:
    """`/dev/zero` was read to its end, which it has not: MemoryError (or the OOM killer).
    Only 1 MiB and a byte are read, and the file is E0014. The one run in a process of
    bounded memory: the other verbs read through the same reader, tested in-process."""
    code, err, _ = run_limited("check", "/dev/zero")
    assert code == 1, err
    assert TOO_LARGE in err and "internal error" not in err


@pytest.mark.parametrize("verb", [["check"], ["fmt"], ["fmt", "--write"], ["test"]])
def test_a_file_that_never_ends_is_refused_for_its_size(
    capsys: pytest.CaptureFixture[str], verb: list[str]
) -> None:
    code, out, err = run(capsys, *verb, "/dev/zero")
    assert code == 1 and out == "", (out, err)
    assert TOO_LARGE in err and "internal error" not in err


@pytest.mark.slow
def test_a_large_file_costs_no_more_to_refuse_than_one_just_over_the_limit(
    tmp_path: Path,
) -> None:
    """A 50 MB file cost 175 MB of memory to be refused; now only its first 1 MiB and a
    byte are read, as for a file of that size."""
    small, big = tmp_path / "small.charter", tmp_path / "big.charter"
    for path, size in ((small, (1 << 20) + 1), (big, 50 << 20)):
        with path.open("wb") as handle:
            handle.truncate(size)  # (sparse: no disk for the zeros)
    results = [run_limited("check", str(path)) for path in (small, big)]
    assert all(code == 1 and "error[E0014]" in err for code, err, _ in results), results
    (_, _, small_kib), (_, _, big_kib) = results
    assert 0 < big_kib < small_kib + 10_000, (small_kib, big_kib)  # not 50 MB more


@pytest.mark.slow
@pytest.mark.parametrize("verb", [["fmt", "--write"], ["fmt"], ["fmt", "--check"]])
def test_fmt_never_writes_a_file_too_large_to_parse(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    verb: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A compact file just under the limit grows past it once laid out: `--write` wrote
    a file `charter check` refuses (E0014), and `--check` offered to. It is an error now.
    (With the limit at 64 KiB for the test: the same check, a sixteenth of the work of
    formatting a file just under 1 MiB.)"""
    limit = 64 << 10
    monkeypatch.setattr(cli, "MAX_FILE_BYTES", limit)
    rule = 'allow search where args.query=="x"or args.limit<3\n'
    text = "role a{\n" + rule * ((limit - 1000) // len(rule)) + "}\n"
    path = tmp_path / "a.charter"
    path.write_text(text, encoding="utf-8")
    code, out, err = run(capsys, *verb, str(path))
    assert code == 1 and "error[E0014]" in err and "formatted" in err
    assert out == "" and path.read_text(encoding="utf-8") == text


def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    """`charter tools ... | head -1`: the pipe closes before the listing is written."""
    read, write = os.pipe()
    os.close(read)  # (the reader is gone before the first byte)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "api.cli", "tools", "--workspace", "fixtures/workspace",
             "--profile", "support", "--all"],
            stdout=write, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    finally:
        os.close(write)
    assert done.returncode == 0
    assert done.stderr == ""


def test_version_is_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    """`charter --version` (and `python -m charter --version`, tests/test_wheel.py)."""
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"charter {__version__}\n"
    assert __version__.count(".") == 2 and all(part.isdigit() for part in __version__.split("."))
