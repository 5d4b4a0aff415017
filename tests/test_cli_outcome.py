"""With `--format json`, every outcome of a verb is one JSON document on stdout, nothing on
stderr, with what the text form says and its exit code (api/cli_outcome.py): the
diagnostics of a workspace that does not load, a usage error the verb finds, a bug."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from api.cli import main

ROOT = Path(__file__).resolve().parent.parent
WORKSPACE = ROOT / "fixtures" / "workspace"
FIT = ROOT / "fixtures" / "fit"

# Workspaces that do not load, each for another reason (file name -> text).
BROKEN: dict[str, dict[str, str]] = {
    "names": {"a.charter": "role a {\n  allow serch\n}\n\nprofile p {\n  roles a, b\n}\n"},
    "syntax": {"a.charter": "role a {\n  allow search where args.q = 1\n}\n"},
    "surrogate": {"a.charter": 'role a {\n  allow search where args.q == "\\ud800"\n}\n'},
    "a test block": {
        "a.charter": "role a {\n  allow search\n}\n\nprofile p {\n  roles a\n}\n",
        "t.charter": 'test "t" {\n  profile nobody\n  expect allow search { query: "x" }\n}\n',
    },
    "warned and wrong": {
        "a.charter": "role a {\n  allow search\n}\n\nprofile p {\n  roles a, a, b\n}\n"
    },
}
# A workspace that loads with a warning, and whose one test passes.
WARNED = {
    "a.charter": "role a {\n  allow search\n}\n\nprofile p {\n  roles a, a\n  hooks none\n}\n",
    "t.charter": 'test "t" {\n  profile p\n  expect allow search { query: "x" }\n}\n',
}


def write(root: Path, files: dict[str, str]) -> str:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return str(root)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    """The verb with `--format json`: one JSON document on stdout, and nothing else."""
    code, out, err = run(capsys, *argv, "--format", "json")
    assert err == "", err
    return code, json.loads(out)


_HEAD = re.compile(r"^(.+):(\d+):(\d+): (error|warning)\[(\w+)\]: (.*)$")


def rendered(text: str) -> list[tuple[Any, ...]]:
    """The diagnostics of the text form: (file, line, column, severity, code, message,
    help) of each `file:line:col: severity[CODE]: message` and its `= help:` line."""
    found: list[list[Any]] = []
    for line in text.splitlines():
        head = _HEAD.match(line)
        if head is not None:
            file, row, col, severity, code, message = head.groups()
            found.append([file, int(row), int(col), severity, code, message, None])
        elif line.lstrip().startswith("= help: ") and found and found[-1][6] is None:
            found[-1][6] = line.lstrip().removeprefix("= help: ")
    return [tuple(item) for item in found]


def as_rendered(document: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    keys = ("file", "line", "column", "severity", "code", "message", "help")
    return [tuple(item[key] for key in keys) for item in document]


@pytest.mark.parametrize("case", BROKEN)
def test_test_json_gives_the_diagnostics_of_a_workspace_that_does_not_load(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str
) -> None:
    """They were printed as text on stderr, and stdout was empty: a script reading the
    JSON it asked for failed to parse. Now they are what `check --format json` prints."""
    path = write(tmp_path / "ws", BROKEN[case])
    code, text, err = run(capsys, "test", path)
    assert (code, text) == (1, "")
    code, document = run_json(capsys, "test", path)
    assert code == 1 and isinstance(document, list) and document
    assert as_rendered(document) == rendered(err)  # what the text form says, no less
    assert run_json(capsys, "check", path) == (1, document)


@pytest.mark.parametrize(
    ("paths", "code"),
    [(["nope"], "E0015"), (["/dev/zero"], "E0014"), (["WS", "nope"], "E0015")],
)  # fmt: skip
def test_test_json_gives_an_unreadable_path_as_a_diagnostic(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, paths: list[str], code: str
) -> None:
    argv = [str(WORKSPACE) if p == "WS" else str(tmp_path / p) if p == "nope" else p
            for p in paths]  # fmt: skip
    exit_code, document = run_json(capsys, "test", *argv)
    assert exit_code == 1 and [d["code"] for d in document] == [code]
    assert run(capsys, "test", *argv)[0] == 1


def test_test_json_carries_the_warnings_the_text_form_prints(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The warnings went to stderr as text beside the JSON; they are in it now, under
    `warnings`, as `check --format json` gives them. The rest of the document is as it was."""
    path = write(tmp_path / "ws", WARNED)
    code, out, err = run(capsys, "test", path)
    assert code == 0 and out.endswith("1 passed, 0 failed\n") and "W0115" in err
    code, document = run_json(capsys, "test", path)
    assert code == 0 and list(document) == ["passed", "failed", "results", "warnings"]
    assert (document["passed"], document["failed"]) == (1, 0)
    assert document["results"][0]["test"] == "t" and document["results"][0]["passed"]
    assert as_rendered(document["warnings"]) == rendered(err)
    assert run_json(capsys, "check", path) == (0, document["warnings"])
    code, document = run_json(capsys, "test", str(WORKSPACE))
    assert code == 0 and document["warnings"] == []


def _failing_verbs(tmp: Path) -> list[list[str]]:
    """Each verb that offers `--format json`, stopped before it has a result."""
    broken = write(tmp / "broken", BROKEN["names"])
    missing = str(tmp / "missing")
    fit = ["fit", "--workspace", str(FIT), "--caller", "support"]
    return [
        ["check", broken], ["check", missing],
        ["test", broken], ["test", missing],
        ["fit", "--workspace", broken, "--caller", "p", "--role", "a"],
        [*fit, "--role", "nosuch"], ["fit", *fit[1:3], "--caller", "nosuch", "--role", "mail-team"],
        [*fit, "--file", broken + "/a.charter"],
        ["tools", "--workspace", missing, "--profile", "p"],
        ["tools", "--workspace", str(FIT), "--profile", "nosuch"],
        ["diff", str(FIT), broken], ["diff", missing, str(FIT)],
    ]  # fmt: skip


def test_every_json_verb_says_what_stops_it_in_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for argv in _failing_verbs(tmp_path):
        code, out, err = run(capsys, *argv)
        assert code == 1 and out == "", argv
        json_code, document = run_json(capsys, *argv)
        assert json_code == code, argv
        assert as_rendered(document) == rendered(err), argv


def test_fit_json_says_a_file_it_cannot_read_as_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`charter fit --file` of a file it cannot read is a usage error (exit 2); with
    `--format json` it was that line on stderr, now the usage document."""
    for missing in (tmp_path / "nope.charter", tmp_path):  # (a directory is not a file)
        argv = ["fit", "--workspace", str(FIT), "--caller", "support", "--file", str(missing)]
        code, out, err = run(capsys, *argv)
        assert (code, out) == (2, "") and err.startswith("charter: cannot read ")
        assert run_json(capsys, *argv) == (
            2, {"error": "usage", "message": err.removeprefix("charter: ").rstrip("\n"),
                "help": None},
        )  # fmt: skip


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_an_internal_error_is_said_in_the_verbs_format(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    """A bug is one line on stderr, exit 3; asked for JSON, the internal-error document
    (what the text says, never the exception's message). (Made to happen as
    tests/test_cli.py's test of the text form makes it: no input of ours raises one.)"""

    def boom(*args: object) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr("api.cli.compile_workspace", boom)
    code, out, err = run(capsys, "test", str(WORKSPACE), "--format", fmt)
    message = "internal error (RuntimeError); this is a bug, please report it"
    assert code == 3 and "secret" not in out + err
    if fmt == "text":
        assert (out, err) == ("", f"charter: {message}\n")
    else:
        assert err == "" and json.loads(out) == {"error": "internal", "message": message,
                                                 "help": None}  # fmt: skip


def test_a_json_result_is_never_taken_for_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """What tells the documents apart: an error is an object with `error`, diagnostics an
    array of objects with `code`; no result of these verbs is either."""
    shutil.copytree(FIT, tmp_path / "fit")
    results = [
        run_json(capsys, "test", str(WORKSPACE))[1],
        run_json(capsys, "fit", "--workspace", str(FIT), "--caller", "support",
                 "--profile", "loose")[1],
        run_json(capsys, "tools", "--workspace", str(FIT), "--profile", "support")[1],
        run_json(capsys, "diff", str(FIT), str(tmp_path / "fit"))[1],
    ]  # fmt: skip
    for result in results:
        if isinstance(result, dict):
            assert "error" not in result
        else:
            assert result and all("code" not in item for item in result)
