"""The checker: names resolve across files, conditions are typed, errors are collected."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from engine.check import CheckOptions, check_sources, load, read_sources
from engine.workspace import Workspace
from grammar.parser import ParseOptions
from policy.diagnostics import CharterError, Diagnostic, render_all

ROOT = Path(__file__).resolve().parent.parent
DEFAULTS = CheckOptions()
GMAIL = "toolset gmail {\n  tool send(to: str, cc: list[str] = [], n: int = 1)\n}\n"
EXPECT = 'profile p {\n  roles\n}\ntest "t" {\n  profile p\n  expect %s\n}\n'  # one call


def errors(*files: str, options: CheckOptions = DEFAULTS) -> list[Diagnostic]:
    with pytest.raises(CharterError) as info:
        check_sources([(f"f{i}.charter", text) for i, text in enumerate(files)], options)
    return info.value.diagnostics


def codes(*files: str, options: CheckOptions = DEFAULTS) -> list[str]:
    return [d.code for d in errors(*files, options=options)]


def test_the_fixtures_workspace_checks() -> None:
    ws = load([ROOT / "fixtures" / "workspace"])
    assert len(ws.toolsets) >= 6 and len(ws.roles) >= 8 and len(ws.profiles) >= 4
    assert {"mail", "gmail", "calendar", "drive", "github", "scripts", "web"} <= set(ws.toolsets)
    assert sum(len(t.expects) for t in ws.tests) >= 40
    assert {h.kind for h in ws.hooks.values()} == {"pause", "deny", "rewrite"}
    assert ws.warnings == ()


def test_declarations_refer_across_files() -> None:
    ws = check_sources(
        [
            ("a.charter", "profile p {\n  roles r\n  hooks h\n}\n"),
            ("b.charter", 'role r {\n  allow gmail.send where args.to endswith "@x.com"\n}\n'),
            ("c.charter", "hook h on gmail.send {\n  pause\n}\n" + GMAIL),
        ]
    )
    assert isinstance(ws, Workspace)
    assert [h.name for h in ws.profile_hooks(ws.profiles["p"])] == ["h"]
    assert "gmail.send" in ws.tools and not ws.tools["gmail.send"].builtin


def test_profile_hooks_expand_default_and_none() -> None:
    ws = check_sources(
        [("a.charter", GMAIL + "profile d {\n  roles\n}\nprofile n {\n  roles\n  hooks none\n}\n")]
    )
    assert len(ws.profile_hooks(ws.profiles["d"])) == 6
    assert ws.profile_hooks(ws.profiles["n"]) == ()


@pytest.mark.parametrize(
    ("source", "code"),
    [
        ("role a {\n  allow gmail.sned\n}\n", "E0101"),
        ("role a {\n  allow gmial.*\n}\n", "E0102"),
        ("role a {\n  deny gmail.send\n}\n", "E0103"),
        ("role a {\n  deny *\n}\n", "E0103"),
        ("profile p {\n  roles nope\n}\n", "E0104"),
        ("profile p {\n  hooks nope\n}\n", "E0105"),
        ('test "t" {\n  profile nope\n}\n', "E0106"),
        ("role a {}\nrole a {}\n", "E0107"),
        ("toolset roles {\n  tool x()\n}\n", "E0108"),
        ("toolset callables {\n  tool x()\n}\n", "E0108"),
        ("toolset t {\n  tool x()\n  tool x()\n}\n", "E0109"),
        ("toolset t {\n  tool x(a: str, a: int)\n}\n", "E0110"),
        ('toolset t {\n  tool x(a: int = "1")\n}\n', "E0111"),
        ('toolset t {\n  url "ftp://x"\n}\n', "E0113"),
        ('profile p {\n  roles\n}\ntest "t" {\n  profile p\n  expect deny nope.x {}\n}\n', "E0114"),
        (EXPECT % 'deny gmail.send { too: "a" }', "E0121"),
        (EXPECT % "deny gmail.send { cc: [] }", "E0122"),
        (EXPECT % 'invalid gmail.send { to: "a" }', "E0123"),
        (EXPECT % 'deny gmail.send { to: "a", n: 1.5 }', "E0211"),
        ("role a {\n  allow gmail.send where args.too == 1\n}\n", "E0201"),
        ("role a {\n  allow search where thread.size > 1\n}\n", "E0201"),
        ('role a {\n  allow gmail.send where args.n < "1"\n}\n', "E0202"),
        ("role a {\n  allow gmail.send where args.to in args.to\n}\n", "E0202"),
        ("role a {\n  allow gmail.send where args.n\n}\n", "E0203"),
        ("role a {\n  allow gmail.send where not args.to\n}\n", "E0203"),
        ('role a {\n  allow gmail.send where upper(args.to) == "X"\n}\n', "E0205"),
        ("role a {\n  allow gmail.send where has(1)\n}\n", "E0206"),
        ("hook h on gmail.send {\n  rewrite args.cc = 3\n}\n", "E0207"),
        ("hook h on gmail.send {\n  rewrite args.cc.x = 3\n}\n", "E0207"),
        ("hook h on identities.import {\n  rewrite args.label = args.seed\n}\n", "E0207"),
        ("hook h on connections.* {\n  rewrite args.name = lower(args.credential)\n}\n", "E0207"),
        ("role a {\n  allow gmail.send where args.to.x == 1\n}\n", "E0209"),
        ('role a {\n  allow gmail.send where args.n in [1, "2"]\n}\n', "E0210"),
    ],
)
def test_each_checker_error(source: str, code: str) -> None:
    found = errors(GMAIL, source)
    assert code in [d.code for d in found]
    diag = next(d for d in found if d.code == code)
    assert diag.span.file == "f1.charter" and diag.span.line >= 1
    assert diag.message[0].islower() or diag.message[0] in '`"'


def test_a_rewrite_reads_a_secret_only_to_set_it() -> None:
    """The secret arguments are redacted by name: a rewrite may set one from itself, and a
    hook's condition may read one, but a copy into another argument is refused (E0207)."""
    check_sources(
        [("f.charter", 'hook h on connections.create, connections.update where '
                       'args.credential startswith "ghp_" {\n'
                       "  rewrite args.credential = lower(args.credential)\n}\n")]
    )  # fmt: skip
    found = errors("hook h on identities.import {\n  rewrite args.label = args.seed\n}\n")
    assert [d.message for d in found] == [
        "hook `h` copies `args.seed`, a secret of `identities.import`, into `args.label`, "
        "which the log and responses show"
    ]


def test_pattern_matching_tools_with_different_argument_types() -> None:
    ts = "toolset t {\n  tool a(x: str)\n  tool b(x: int)\n}\n"
    assert codes(ts, "role r {\n  allow t.* where args.x == 1\n}\n") == ["E0204"]
    # Numeric types join: int and decimal may be compared together.
    ok = "toolset t {\n  tool a(x: int)\n  tool b(x: decimal)\n}\n"
    check_sources([("a.charter", ok + "role r {\n  allow t.* where args.x < 2\n}\n")])


def test_context_and_metadata_are_unchecked_until_run_time() -> None:
    check_sources(
        [
            (
                "a.charter",
                'role r {\n  allow search where context.a.b == 1 and agent.metadata.team == "x"\n}\n',
            )
        ]
    )


def test_limits() -> None:
    many = "role big {\n" + "  allow search\n" * 5 + "}\n"
    assert codes(many, options=CheckOptions(max_rules_per_role=4)) == ["E0112"]
    assert codes("role a {}", "role b {}", options=CheckOptions(max_files=1)) == ["E0016"]
    big = "role a {\n  allow search where args.limit in [" + ", ".join(["1"] * 30) + "]\n}\n"
    assert codes(big, options=CheckOptions(parse=ParseOptions(max_expr_nodes=10))) == ["E0208"]
    assert codes("# " + "x" * 50, options=CheckOptions(parse=ParseOptions(max_file_bytes=20))) == [
        "E0014"
    ]


def test_all_errors_are_collected_and_sorted() -> None:
    found = errors(
        "profile p {\n  roles missing\n}\nrole a {\n  allow nope.x\n}\n",
        "role b {\n  allow search where",
        'role c {\n  allow search where args.limit == "x"\n}\n',
    )
    assert [(d.span.file, d.span.line, d.code) for d in found] == [
        ("f0.charter", 2, "E0104"),
        ("f0.charter", 5, "E0101"),
        ("f1.charter", 2, "E0002"),
        ("f2.charter", 2, "E0202"),
    ]
    assert found == sorted(found, key=Diagnostic.sort_key)


def test_warnings_do_not_fail_the_check() -> None:
    ws = check_sources(
        [("a.charter", "role r {\n  allow search\n}\nprofile p {\n  roles r, r\n}\n")]
    )
    assert [w.code for w in ws.warnings] == ["W0115"]
    assert ws.warnings[0].severity == "warning" and ws.warnings[0].span.line == 5


def test_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "a.charter").write_bytes(b"\xff\xfe")
    with pytest.raises(CharterError) as info:
        read_sources([tmp_path])
    assert info.value.diagnostics[0].code == "E0015"


def test_only_charter_files_in_a_directory(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not charter")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.charter").write_text("role r {}\n")
    assert [Path(p).name for p, _ in read_sources([tmp_path])] == ["a.charter"]


def test_names_a_profile_could_not_select_are_reserved() -> None:
    found = errors("role hooks {\n  allow search\n}\nhook none on search {\n  pause\n}\n")
    assert [(d.code, d.span.line) for d in found] == [("E0117", 1), ("E0117", 4)]
    assert "`hooks`" in found[0].message and found[0].help is not None


def test_checking_leaves_the_garbage_collector_as_it_found_it() -> None:
    # check_sources pauses the cyclic collector while it builds; it must restore it.
    good = [("a.charter", "role a { allow search }")]
    bad = [("b.charter", "role a { allow nowhere.at-all }")]
    assert gc.isenabled()
    check_sources(good)
    assert gc.isenabled()
    with pytest.raises(CharterError):
        check_sources(bad)
    assert gc.isenabled()
    gc.disable()
    try:
        check_sources(good)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_declaration_declared_twice_still_has_its_body_checked() -> None:
    found = errors(
        "role a {\n  allow search\n}\n"
        "role a {\n  allow serch\n  allow search where args.qury == 1\n}\n"
        "profile p {\n  roles a\n}\n"
        "profile p {\n  roles zz\n}\n"
        "hook h on search {\n  pause\n}\n"
        "hook h on serch where args.x == 1 {\n  pause\n}\n"
        'test "t" {\n  profile p\n}\n'
        'test "t" {\n  profile q\n  expect allow nope.x {}\n}\n'
        "toolset t {\n  tool x()\n}\n"
        'toolset t {\n  tool y(a: int = "1")\n}\n'
        "hook approve-mail-send on search where args.qury == 1 {\n  pause\n}\n"
    )
    assert [(d.code, d.span.line) for d in found] == [
        ("E0107", 4),
        ("E0101", 5),
        ("E0201", 6),
        ("E0107", 11),
        ("E0104", 12),
        ("E0107", 17),
        ("E0101", 17),
        ("E0107", 23),
        ("E0106", 24),
        ("E0114", 25),
        ("E0107", 30),
        ("E0111", 31),
        ("E0107", 33),
        ("E0201", 33),
    ]


def test_a_duplicate_takes_no_part_in_the_workspace() -> None:
    # The second `t` declares `y`; it is not registered, so `t.y` is unknown, and the
    # profile resolves against the first `a` (which exists), not a duplicate.
    found = errors(
        "toolset t {\n  tool x()\n}\ntoolset t {\n  tool y()\n}\n"
        "role a {\n  allow t.y\n}\nrole a {\n  allow t.x\n}\n"
    )
    assert [(d.code, d.span.line) for d in found] == [("E0107", 4), ("E0101", 8), ("E0107", 10)]


def test_warnings_are_reported_with_errors() -> None:
    found = errors("role r {\n  allow search\n}\nprofile p {\n  roles r, r, zz\n}\n")
    assert [(d.code, d.severity) for d in found] == [("W0115", "warning"), ("E0104", "error")]


@pytest.mark.parametrize("separator", ["\u2028", "\x0c", "\x85"])
def test_an_unknown_name_is_placed_on_its_line_whatever_characters_come_before(
    separator: str,
) -> None:
    """Only `\\n` ends a line (the parser's count): a line or paragraph separator in a
    comment above must not move the caret off the unknown name."""
    text = f"# a{separator}b\n\nprofile p {{\n  roles nope\n}}\n"
    (found,) = errors(text)
    assert (found.code, found.span.line, found.span.col) == ("E0104", 4, 9)


def test_the_caret_is_on_the_name_not_on_a_string_or_comment_that_holds_it() -> None:
    """A test's name or a comment on the item's line may hold the word the caret looks
    for: it pointed into the test's name, or at the comment, instead of the name."""
    found = errors('test "profile q" { profile q }\n')
    assert [(d.code, d.span.col) for d in found] == [("E0106", 28)]
    ws = check_sources(
        [("a.charter", "role r {\n  allow search\n}\nprofile p {\n  roles r, r  # r twice\n}\n")]
    )
    assert [(w.code, w.span.line, w.span.col) for w in ws.warnings] == [("W0115", 5, 12)]


def rendered(text: str) -> str:
    """`charter check`'s report of one file, `f.charter`."""
    with pytest.raises(CharterError) as info:
        check_sources([("f.charter", text)])
    return render_all(info.value.diagnostics, info.value.sources)


def test_a_name_in_a_list_over_several_lines_is_pointed_at() -> None:
    """The caret was on the profile's first character when a `roles` (or `hooks`) list
    went on to another line: only the list's first line was searched for the name."""
    text = (
        "role r {\n"
        "  allow search\n"
        "}\n"
        "profile p {\n"
        "  roles r,\n"
        "    # the readers\n"
        "    nope,  # a typo\n"
        "    r\n"
        "  hooks default,\n"
        "    # approvals\n"
        "    nohook\n"
        "}\n"
        'test "t" {\n'
        "  profile\n"
        "    q\n"
        "}\n"
    )
    assert rendered(text) == (
        "f.charter:7:5: error[E0104]: profile `p` selects unknown role `nope`\n"
        "  |\n"
        "7 |     nope,  # a typo\n"
        "  |     ^^^^\n"
        "  = help: declare the role, or check the spelling\n"
        "\n"
        "f.charter:8:5: warning[W0115]: profile `p` lists a role twice\n"
        "  |\n"
        "8 |     r\n"
        "  |     ^\n"
        "  = help: remove the repeated name\n"
        "\n"
        "f.charter:11:5: error[E0105]: profile `p` installs unknown hook `nohook`\n"
        "   |\n"
        "11 |     nohook\n"
        "   |     ^^^^^^\n"
        "   = help: declare the hook, or check the spelling\n"
        "\n"
        'f.charter:15:5: error[E0106]: test "t" names unknown profile `q`\n'
        "   |\n"
        "15 |     q\n"
        "   |     ^\n"
        "   = help: declare the profile\n"
        "\n"
        "3 errors, 1 warning"
    )


@pytest.mark.parametrize(
    "roles",
    [
        "roles r, zz, r, zz",
        "roles r,\n    zz,\n    r,\n    zz",
        "roles\n    r # one\n    , zz # two\n    # three\n    , r, zz",
    ],
)
def test_each_listed_name_is_reported_where_it_is(roles: str) -> None:
    """Every name is found by its own span, so a name listed twice is reported twice, each
    at its own place (both carets went to the first), on one line or several."""
    text = f"role r {{\n  allow search\n}}\nprofile p {{\n  {roles}\n}}\n"
    lines = text.split("\n")
    found = [(d.code, d.span.line, d.span.col, d.span.end_col) for d in errors(text)]
    assert [code for code, *_ in found] == ["E0104", "W0115", "E0104"]
    names = [lines[line - 1][col - 1 : end - 1] for _, line, col, end in found]
    assert names == ["zz", "r", "zz"]
    first, repeat, second = found
    assert first[1:3] < repeat[1:3] < second[1:3]  # (the second `r`, not the first)


def test_a_bad_url_is_pointed_at() -> None:
    assert rendered('toolset t {\n  tool x()\n  url\n    "crm.example.com"\n}\n') == (
        "f.charter:4:5: error[E0113]: `crm.example.com` is not an http(s) URL\n"
        "  |\n"
        '4 |     "crm.example.com"\n'
        "  |     ^^^^^^^^^^^^^^^^^\n"
        '  = help: write the full address, e.g. "https://tools.example.com/mail"\n'
        "\n"
        "1 error"
    )
