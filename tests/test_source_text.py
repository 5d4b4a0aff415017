"""Source text in the parser: literals (strings, numbers), line ends, encodings, and how a
diagnostic shows its source line. (tests/test_parser.py covers the grammar itself.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.check import CheckOptions, check_sources, load
from grammar.literals import MAX_NUMBER_DIGITS
from grammar.parser import ParseOptions, parse
from grammar.source import NotUtf8, decode, read_file, read_sources
from policy import ast
from policy.diagnostics import CharterError, CharterSyntaxError, Diagnostic, render


def problems(text: str) -> list[Diagnostic]:
    with pytest.raises(CharterSyntaxError) as info:
        parse(text, "f.charter")
    return info.value.diagnostics


def where(text: str) -> ast.Expr:
    role = parse(f"role a {{\n  allow search where {text}\n}}\n").declarations[0]
    assert isinstance(role, ast.Role) and role.rules[0].where is not None
    return role.rules[0].where


# ---- strings ------------------------------------------------------------------------


@pytest.mark.parametrize("escape", ["\\ud800", "\\udfff", "\\uDC00", "\\ud83d x"])
def test_a_lone_surrogate_escape_is_refused_where_it_is(escape: str) -> None:
    (diag,) = problems(f'role a {{\n  allow search where args.query == "ab{escape}"\n}}\n')
    assert diag.code == "E0003" and "surrogate" in diag.message and diag.help
    assert (diag.span.line, diag.span.col, diag.span.end_col) == (2, 39, 45)


def test_a_surrogate_pair_is_one_character() -> None:
    assert where('args.query == "\\ud83d\\ude00"') == ast.Compare(
        "==", ast.Path("args", ("query",)), ast.Lit("str", "\U0001f600")
    )
    # An escaped backslash followed by `ud800` is text, not an escape.
    assert isinstance(where('args.query == "\\\\ud800"'), ast.Compare)


@pytest.mark.parametrize(
    ("char", "escape"), [("\t", "\\t"), ("\x0c", "\\f"), ("\x07", "\\u0007"), ("\x85", "\\u0085")]
)
def test_a_raw_control_character_in_a_string_is_named(char: str, escape: str) -> None:
    (diag,) = problems(f'role a {{\n  allow search where args.query == "a{char}b"\n}}\n')
    assert diag.code == "E0017"
    assert diag.message == f"control character `U+{ord(char):04X}` in a string"
    assert diag.help == f"write it as the escape `{escape}`"
    assert (diag.span.line, diag.span.col) == (2, 38)


def test_a_tab_under_the_caret_is_shown() -> None:
    text = 'role a {\n  allow search where args.query == "a\tb"\n}\n'
    (diag,) = problems(text)
    shown = render(diag, {"f.charter": text}).splitlines()
    assert shown[2] == '2 |   allow search where args.query == "a\u2409b"'
    assert shown[3] == "  | " + " " * 37 + "^"


def test_the_help_line_stands_under_the_gutter_however_long_the_line_number() -> None:
    """docs/errors.md renders `= help` under the `|` of the gutter; from line 10 on the
    gutter is wider, and the help line used to stay two spaces in, one left of it."""
    text = "\n" * 99 + "role a {\n  allow search where args.limit = 10\n}\n"
    (diag,) = problems(text)
    shown = render(diag, {"f.charter": text}).splitlines()
    assert shown[1:] == [
        "    |",
        "101 |   allow search where args.limit = 10",
        "    |                                 ^",
        "    = help: compare with `==`; a single `=` only appears in `rewrite` and defaults",
    ]


# ---- numbers ------------------------------------------------------------------------


@pytest.mark.parametrize("number", ["9" * 5000, "-" + "1" * 101, "1" * 60 + "." + "2" * 41])
def test_a_number_with_too_many_digits_is_refused_at_the_number(number: str) -> None:
    (diag,) = problems(f"role a {{\n  allow search where args.limit < {number}\n}}\n")
    assert diag.code == "E0019" and "too large" in diag.message
    assert "Exceeds" not in diag.message and diag.help == "a number has at most 100 digits"
    assert (diag.span.line, diag.span.col, diag.span.end_col) == (2, 35, 35 + len(number))


def test_a_number_of_the_largest_size_is_fine() -> None:
    big = int("9" * MAX_NUMBER_DIGITS)
    assert where(f"args.limit < {big}") == ast.Compare(
        "<", ast.Path("args", ("limit",)), ast.Lit("int", big)
    )


# ---- line ends and encodings ---------------------------------------------------------

HIDDEN_RULE = "role a {\n  allow search # note\rallow execute\n}\nprofile p {\n  roles a\n}\n"


def test_a_carriage_return_that_ends_no_line_is_refused() -> None:
    (diag,) = problems(HIDDEN_RULE)
    assert diag.code == "E0018" and (diag.span.line, diag.span.col) == (2, 22)


def test_the_cli_reads_the_bytes_the_http_api_reads(tmp_path: Path) -> None:
    (tmp_path / "a.charter").write_bytes(HIDDEN_RULE.encode())
    with pytest.raises(CharterError) as info:
        load([tmp_path])
    assert [d.code for d in info.value.diagnostics] == ["E0018"]
    assert read_sources([tmp_path]).files == [(str(tmp_path / "a.charter"), HIDDEN_RULE)]


def test_crlf_ends_a_line_like_lf() -> None:
    lf = '# c\nrole a {\n  allow search where args.query == "x"  # d\n}\n'
    crlf = parse(lf.replace("\n", "\r\n"), "f.charter")
    assert crlf.declarations == parse(lf, "f.charter").declarations
    assert [c[2] for c in crlf.comments] == ["# c", "# d"]
    assert crlf.declarations[0].span.line == 2


def test_a_byte_order_mark_is_named_with_what_to_do() -> None:
    """A file some editors save as "UTF-8" begins with U+FEFF: refused at 1:1 as before,
    but named, with how to save it (it was ``unexpected character `'\ufeff'` `` alone)."""
    (diag,) = problems(decode(b"\xef\xbb\xbfrole a {}\n", "f.charter"))
    assert (diag.code, diag.span.line, diag.span.col) == ("E0001", 1, 1)
    assert diag.message == "unexpected byte order mark `U+FEFF`"
    assert diag.help is not None and "without a byte order mark" in diag.help


def test_a_lone_surrogate_in_the_text_is_not_utf8() -> None:
    (diag,) = problems("role a {}\n# \ud800\n")
    assert diag.code == "E0015" and (diag.span.line, diag.span.col) == (2, 3)


def test_not_utf8_is_placed_at_the_bad_byte() -> None:
    data = "role a {\n  # café \n}\n".encode().replace("é".encode(), b"\xe9")
    with pytest.raises(NotUtf8) as info:
        decode(data, "b.charter")
    diag = info.value.diagnostic
    assert diag.code == "E0015" and (diag.span.line, diag.span.col) == (2, 8)
    assert "0xe9" in diag.message


def test_one_unreadable_file_does_not_hide_the_others(tmp_path: Path) -> None:
    (tmp_path / "a.charter").write_text("role a {\n  allow serch\n}\n")
    (tmp_path / "b.charter").write_bytes(b"role b {\n  # caf\xe9\n}\n")
    (tmp_path / "c.charter").write_text("role c {\n  allow exec\n}\n")
    with pytest.raises(CharterError) as info:
        load([tmp_path])
    found = [(Path(d.span.file).name, d.code, d.span.line) for d in info.value.diagnostics]
    assert found == [
        ("a.charter", "E0101", 2),
        ("b.charter", "E0015", 2),
        ("c.charter", "E0101", 2),
    ]


# ---- the source line under a diagnostic ------------------------------------------------


@pytest.mark.parametrize("separator", ["\x0c", "\x0b", "\x1c", "\x1e", "\x85", "\u2028", "\u2029"])
def test_the_line_shown_is_the_line_the_parser_counts(separator: str) -> None:
    text = f'# section{separator} one\nrole a {{\n  allow search where args.qury == "x"\n}}\n'
    with pytest.raises(CharterError) as info:
        check_sources([("f.charter", text)])
    (diag,) = info.value.diagnostics
    shown = render(diag, {"f.charter": text}).splitlines()
    assert shown[0].startswith("f.charter:3:22:")
    assert shown[2] == '3 |   allow search where args.qury == "x"'
    assert shown[3] == "  | " + " " * 21 + "^" * 9


def test_the_caret_counts_terminal_cells() -> None:
    text = 'role a {\n  allow search where args.query == "日本語" and args.qury == "x"\n}\n'
    with pytest.raises(CharterError) as info:
        check_sources([("f.charter", text)])
    (diag,) = info.value.diagnostics
    assert (diag.span.line, diag.span.col) == (2, 46)  # code points, as documented
    caret = render(diag, {"f.charter": text}).splitlines()[3]
    assert caret == "  | " + " " * (45 + 3) + "^" * 9  # three wide characters: 3 cells more
    combining = text.replace("日本語", "e\u0301")  # `é` as two code points, one cell
    with pytest.raises(CharterError) as info:
        check_sources([("f.charter", combining)])
    (diag,) = info.value.diagnostics
    assert render(diag, {"f.charter": combining}).splitlines()[3] == "  | " + " " * 43 + "^" * 9


@given(st.text(max_size=30))
def test_any_string_either_parses_to_itself_or_gets_a_coded_diagnostic(value: str) -> None:
    """Whatever is between the quotes: a value, or one of the string codes, never a crash."""
    literal = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    try:
        found = where(f"args.query == {literal}")
    except CharterSyntaxError as exc:
        codes = {d.code for d in exc.diagnostics}
        assert codes <= {"E0001", "E0015", "E0017", "E0018"}, (literal, codes)
        return
    assert isinstance(found, ast.Compare) and found.right == ast.Lit("str", value)


# ---- how much is read ------------------------------------------------------------------


def test_a_file_over_the_limit_is_refused_with_e0014(tmp_path: Path) -> None:
    """At the limit a file is read; one byte more is E0014, the parser's own diagnostic."""
    path = tmp_path / "a.charter"
    path.write_bytes(b"#" * 20)
    assert read_sources([path], max_bytes=20).files == [(str(path), "#" * 20)]
    path.write_bytes(b"#" * 21)
    read = read_sources([path], max_bytes=20)
    assert read.files == []
    (diag,) = read.errors
    assert (diag.code, diag.message, diag.help) == (
        "E0014",
        "file is larger than the limit of 20 bytes",
        "split the workspace into several files",
    )
    assert (diag.span.file, diag.span.line, diag.span.col) == (str(path), 1, 1)
    with pytest.raises(CharterSyntaxError) as info:  # the same words as the parser's
        parse("#" * 21, str(path), ParseOptions(max_file_bytes=20))
    assert info.value.diagnostics == [diag]


def test_load_reads_no_more_than_its_parse_limit(tmp_path: Path) -> None:
    (tmp_path / "a.charter").write_bytes(b"role a {}\n" + b"#" * 100)
    with pytest.raises(CharterError) as info:
        load([tmp_path], CheckOptions(parse=ParseOptions(max_file_bytes=50)))
    assert [d.code for d in info.value.diagnostics] == ["E0014"]
    assert "limit of 50 bytes" in info.value.diagnostics[0].message


def test_a_file_that_never_ends_is_read_up_to_the_limit_only() -> None:
    """`/dev/zero` has no end: it was read until memory ran out (MemoryError)."""
    read = read_sources(["/dev/zero"], max_bytes=1000)
    assert [(d.code, d.message) for d in read.errors] == [
        ("E0014", "file is larger than the limit of 1000 bytes")
    ]


def test_read_file_reads_one_file_as_the_workspace_reader_does(tmp_path: Path) -> None:
    """One file taken as given (`charter fit --file`): its text, else what is wrong."""
    path = tmp_path / "a.charter"
    path.write_bytes(b"role a {}\r\n")
    assert read_file(path) == "role a {}\r\n"  # the bytes as they are
    path.write_bytes(b"# caf\xe9\n")
    with pytest.raises(CharterError) as info:
        read_file(path)
    assert [d.code for d in info.value.diagnostics] == ["E0015"]
    assert info.value.sources == {str(path): "# caf\ufffd\n"}  # the line to show
    with pytest.raises(CharterError) as info:
        read_file("/dev/zero", max_bytes=10)
    assert [d.code for d in info.value.diagnostics] == ["E0014"]
    with pytest.raises(IsADirectoryError):
        read_file(tmp_path)
