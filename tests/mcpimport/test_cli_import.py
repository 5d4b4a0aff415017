"""`charter import mcp`'s refusals (api/cli_import.py): each a usage error (exit 2) with a
message and a help line on stderr, nothing on stdout and no file written."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from api.cli import main


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["import", "mcp", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "give one of `--command`, `--url` and `--file`"),
        (("--url", "ftp://example.com/mcp"), "is not an http(s) URL"),
        (("--file", "tools.json", "--name", "GitHub"), "is not a toolset's name"),
        (("--file", "tools.json", "--name", "9lives"), "is not a toolset's name"),
        (("--file", "tools.json", "--name", "memory"), "is a built-in namespace"),
        (("--url", "http://"), "is not an http(s) URL"),
        (("--url", "https://a b/mcp"), "is not an http(s) URL"),
    ],
)
def test_bad_options_are_usage_errors(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], said: str
) -> None:
    code, out, err = _run(capsys, *args)
    assert code == 2 and out == "" and said in err and "= help:" in err


def test_two_sources_are_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["import", "mcp", "--file", "a.json", "--url", "http://x/mcp"])
    assert exc.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "cannot read"),
        (b"\xff\xfe", "is not JSON"),
        (b"{not json", "is not JSON"),
        (b'{"tools": {"name": "x"}}', "holds no tool list"),
        (b'{"result": {"tools": [1, 2]}}', "holds no tool list"),
        (b"[]", None),  # (an empty list: a toolset with no tools)
    ],
)
def test_a_saved_list_that_is_no_tool_list_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes | None, said: str | None
) -> None:
    saved = tmp_path / "tools.json"
    if content is not None:
        saved.write_bytes(content)
    out_file = tmp_path / "out.charter"
    code, out, err = _run(capsys, "--file", str(saved), "-o", str(out_file))
    if said is None:
        assert code == 0 and out_file.read_text(encoding="utf-8") == "toolset tools {}\n"
        return
    assert code == 2 and out == "" and said in err and not out_file.exists()


def test_a_command_that_is_no_mcp_server_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_file = tmp_path / "out.charter"
    command = shlex.join([sys.executable, "-c", "import sys; sys.exit(3)"])
    code, out, err = _run(capsys, "--command", command, "-o", str(out_file))
    assert code == 2 and out == "" and not out_file.exists()
    assert f"cannot list the tools of `{command}`" in err
    code, _, err = _run(capsys, "--command", str(tmp_path / "no-such-program"))
    assert code == 2 and "cannot list the tools of" in err


def test_a_declaration_larger_than_a_file_may_be_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    names = [f"{i:03}" + "a" * 250 for i in range(200)]  # (long names: few arguments)
    wide = {"type": "object", "properties": {name: {"type": "string"} for name in names}}
    tools = [{"name": f"t{n}", "inputSchema": wide} for n in range(22)]
    saved = tmp_path / "tools.json"
    saved.write_text(json.dumps({"tools": tools}), encoding="utf-8")
    out_file = tmp_path / "out.charter"
    code, out, err = _run(capsys, "--file", str(saved), "-o", str(out_file))
    assert code == 1 and out == "" and "E0014" in err and not out_file.exists()


def test_a_tool_whose_full_name_would_be_too_long_is_left_out(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    tools = [{"name": "x" * 250, "inputSchema": {}}, {"name": "y" * 239, "inputSchema": {}}]
    saved = tmp_path / "tools.json"
    saved.write_text(json.dumps(tools), encoding="utf-8")
    code, out, err = _run(capsys, "--file", str(saved), "--name", "longname-toolset")
    assert code == 0 and f"tool {'y' * 239}()" in out and "x" * 250 not in out
    assert "its full name would be longer than 256 characters" in err
