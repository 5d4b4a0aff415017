"""The text the service writes for a profile or a toolset from a request's fields
(api.service.declsources): whatever the fields, it is refused as a name (`invalid-name`)
or it declares exactly what was asked and nothing more; a url put into a toolset reads
back as that url, the toolset's tools untouched."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from api.service.declsources import profile_text, toolset_text
from api.service.errors import ServiceError
from grammar.parser import parse
from policy import ast
from policy.diagnostics import CharterError

# Names, and what a name must not smuggle in: braces, newlines, commas, quotes, keywords.
PIECES = st.sampled_from(["a", "z9", "-", "_", "}", "{", "\n", ",", " ", '"', "#", "role", "É"])
NAMES = st.one_of(
    st.from_regex(r"[a-z][a-z0-9_-]{0,12}", fullmatch=True),
    st.lists(PIECES, min_size=1, max_size=6).map("".join),
    st.sampled_from(["default", "none"]),
)
BUDGETS = st.none() | st.tuples(
    st.decimals(min_value=0, max_value=10**9, places=6, allow_nan=False, allow_infinity=False),
    st.sampled_from(["1m", "1h", "24h", "7d", "total"]),
)
RATES = st.none() | st.tuples(
    st.integers(0, 10**12), st.sampled_from(["1m", "1h", "24h", "7d", "total"])
)


@given(NAMES, st.lists(NAMES, max_size=4), st.lists(NAMES, max_size=4), BUDGETS, RATES)
def test_a_profile_is_its_fields_or_refused(
    name: str,
    roles: list[str],
    hooks: list[str],
    budget: tuple[Decimal, str] | None,
    rate: tuple[int, str] | None,
) -> None:
    try:
        text = profile_text(name, roles, hooks, budget, rate)
    except ServiceError as exc:
        assert exc.code == "invalid-name"
        return
    try:
        parsed = parse(text, "api/profiles/p.charter")
    except CharterError:
        # (only a reserved word in a name's place: `default` or `none` as the profile's
        # name or a role's, or `none` beside other hooks (E0008); the operation's check
        # refuses it as policy-invalid)
        assert {name, *roles} & {"default", "none"} or ("none" in hooks and len(hooks) > 1)
        return
    (decl,) = parsed.declarations
    assert isinstance(decl, ast.Profile) and decl.name == name
    assert list(decl.roles) == roles
    assert list(decl.hooks) == (hooks or ["none"])
    if budget is None:
        assert decl.budget is None
    else:
        assert decl.budget is not None
        assert (Decimal(decl.budget.amount), decl.budget.period) == budget
    assert (None if decl.rate is None else (decl.rate.calls, decl.rate.period)) == rate


TOOLSETS = st.sampled_from(
    [
        "toolset t {\n  tool a(x: str)\n}\n",
        'toolset t {\n  url "https://old.example.com"\n  tool a(x: str)\n}',
        "toolset t { tool a(x: str) } # a comment { }\n",
        'toolset t {\r\n  tool a(x: str)\r\n  url "x"\r\n}\r\n',
    ]
)


@given(TOOLSETS, st.text(min_size=1, max_size=40))
def test_a_url_put_into_a_toolset_reads_back(source: str, url: str) -> None:
    text = toolset_text("t", source, url, "api/toolsets/t.charter")
    try:
        parsed = parse(text, "api/toolsets/t.charter")
    except CharterError:
        # (a url JSON escapes as a lone surrogate: a string literal refuses it, E0003)
        assert any(0xD800 <= ord(c) <= 0xDFFF for c in url)
        return
    (decl,) = parsed.declarations
    assert isinstance(decl, ast.Toolset) and decl.url == url
    assert [tool.name for tool in decl.tools] == ["a"]
