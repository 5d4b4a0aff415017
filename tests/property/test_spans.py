"""(f, continued) Each name of a profile's `roles` and `hooks` lists carries its own span,
however the list is laid out, and the checker's diagnostics about a name point at it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.check import check_sources
from grammar.fmt import format_file
from grammar.parser import parse
from policy import ast
from policy.diagnostics import CharterError
from tests.property.syntax import profiles

# What may stand between a list's keyword and its first name, and between two names:
# spaces, line breaks, comments (a `,` in a comment is no separator), blank lines.
BEFORE = st.sampled_from((" ", "\n    ", "  # the list, below\n    ", "\n\n  # x, y\n     "))
BETWEEN = st.sampled_from(
    (", ", " ,", ",\n    ", "\n    , ", ",  # a, b\n    ", ", # c\n\n  # d,\n   ")
)


def _laid_out(profile: ast.Profile, data: st.DataObject) -> str:
    """The profile's canonical text with its lists laid out as drawn."""
    lines = []
    for line in format_file(ast.SourceFile("gen.charter", (profile,))).split("\n"):
        keyword, _, names = line.strip().partition(" ")
        if keyword in ("roles", "hooks") and names:
            head, *rest = names.split(", ")
            line = f"  {keyword}{data.draw(BEFORE)}{head}"
            line += "".join(data.draw(BETWEEN) + name for name in rest)
        lines.append(line)
    return "\n".join(lines)


def _at(text: str, span: ast.Span) -> str:
    assert span.line == span.end_line, span  # (a name is on one line)
    return text.split("\n")[span.line - 1][span.col - 1 : span.end_col - 1]


@given(profiles(), st.data())
def test_each_listed_name_has_its_span(profile: ast.Profile, data: st.DataObject) -> None:
    text = _laid_out(profile, data)
    (parsed,) = parse(text, "gen.charter").declarations
    assert isinstance(parsed, ast.Profile) and parsed == profile, text
    assert [_at(text, s) for s in parsed.role_spans] == list(profile.roles), text
    written = profile.hooks if profile.hooks_written else ()
    assert [_at(text, s) for s in parsed.hook_spans] == list(written), text


@given(profiles(), st.data())
def test_a_diagnostic_about_a_listed_name_points_at_it(
    profile: ast.Profile, data: st.DataObject
) -> None:
    """No role or hook is declared, so every listed name is unknown (E0104, E0105, but
    `default` and `none`), and a role listed twice is W0115: each is at the name."""
    text = _laid_out(profile, data)
    try:
        check_sources([("gen.charter", text)])
    except CharterError as failed:
        found = failed.diagnostics
    else:
        found = []
    unknown = [d for d in found if d.code in ("E0104", "E0105")]
    hooks = [h for h in profile.hooks if h not in ("default", "none")]
    assert len(unknown) == len(profile.roles) + len(hooks), (text, found)
    for diag in unknown:
        assert diag.message.endswith(f"`{_at(text, diag.span)}`"), (text, diag)
    for diag in (d for d in found if d.code == "W0115"):
        name = _at(text, diag.span)
        assert profile.roles.count(name) > 1, (text, diag)
