"""A test's call is checked as the engine checks it: a call the checker passes is never
denied for its shape, one it refuses always is, and a refusal points inside the `expect`
at fault (docs/dsl.md, "Tests"; `engine.expects`).

Signatures are drawn with every argument type (`list[...]` nested up to three deep,
`map`, `decimal` that takes an `int`), required, defaulted and optional arguments; calls
are drawn well-formed, then broken one way (an argument renamed or added, a required one
dropped, a value or a list's item deep inside of another type), or drawn freely. Each
workspace is checked and its tests run by the compiled engine, end to end; the boundaries
of every type are also walked exhaustively, in tests/test_expects.py.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from engine.check import check_sources
from engine.compile import compile_workspace
from engine.testing import run_tests
from engine.workspace import Workspace
from grammar.fmt import expr_text, map_text
from grammar.parser import parse
from policy import ast
from policy.diagnostics import CharterError, Diagnostic
from tests.property.syntax import KEYWORDS

SCALARS = ("str", "int", "decimal", "bool", "map")
CALL_CODES = {"E0121", "E0122", "E0211"}

# A scalar type (four draws in seven), or one in lists up to three deep; the numbers
# twice as often as the others, as `int` and `decimal` are where a check most often slips.
types = st.builds(
    lambda depth, scalar: "list:" * depth + scalar,
    st.sampled_from((0, 0, 0, 0, 1, 2, 3)),
    st.sampled_from((*SCALARS, "int", "decimal")),
)
names = st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True).filter(lambda n: n not in KEYWORDS)


def type_ref(ty: str) -> str:
    depth = ty.count("list:")
    return "list[" * depth + ty.replace("list:", "") + "]" * depth


def _scalar(kind: str) -> st.SearchStrategy[ast.Expr]:
    if kind == "str":
        return st.text(max_size=4).map(lambda v: ast.Lit("str", v))
    if kind == "int":
        return st.integers(-(10**6), 10**6).map(lambda v: ast.Lit("int", v))
    if kind == "decimal":
        decimals = st.decimals(-(10**6), 10**6, places=2, allow_nan=False, allow_infinity=False)
        return decimals.map(lambda v: ast.Lit("decimal", Decimal(v)))
    if kind == "bool":
        return st.booleans().map(lambda v: ast.Lit("bool", v))
    return st.just(ast.Lit("null", None))


def value_of(ty: str) -> st.SearchStrategy[ast.Expr]:
    """A value that fits `ty`: for a `decimal`, an integer too; for `map`, any small map."""
    if ty.startswith("list:"):
        item = ty[5:]
        return st.lists(value_of(item), max_size=3).map(lambda xs: ast.ListLit(tuple(xs)))
    if ty == "map":
        entries = st.dictionaries(names, st.one_of(*(_scalar(k) for k in SCALARS[:4])), max_size=2)
        return entries.map(lambda d: ast.MapLit(tuple(d.items())))
    if ty == "decimal":
        return st.one_of(_scalar("decimal"), _scalar("int"))
    return _scalar(ty)


def fits(ty: str, kind: str) -> bool:
    """Does a value drawn as `kind` (a type, or `null`) fit `ty`?"""
    return kind == ty or (ty == "decimal" and kind == "int")


@st.composite
def value_not_of(draw: st.DrawFn, ty: str) -> ast.Expr:
    """A value that does not fit `ty`: of another type, or a list whose item, at some
    depth, does not fit the item type."""
    if ty.startswith("list:") and draw(st.booleans()):
        items = list(draw(st.lists(value_of(ty[5:]), max_size=2)))
        at = draw(st.integers(0, len(items)))
        items.insert(at, draw(value_not_of(ty[5:])))
        return ast.ListLit(tuple(items))
    if draw(st.sampled_from((True, True, True, False))):  # mostly a near miss
        kind = draw(st.sampled_from((*NEAR.get(ty, ("map", "str")), "null")))
    else:
        kind = draw(
            types.filter(
                lambda k: not fits(ty, k) and not (ty.startswith("list:") and k.startswith("list:"))
            )
        )
    if kind.startswith("list:"):  # (a non-empty list, which fits no scalar nor `map`)
        return ast.ListLit((draw(value_of(kind[5:])),))
    # (of that kind only: `value_of("decimal")` draws integers too, which fit an `int`)
    return draw(value_of(kind) if kind == "map" else _scalar(kind))


# The kinds of value a run-time check most easily lets through for each type: the other
# kind of number, a `bool` (an `int` in Python), a list for a `map`.
NEAR = {
    "int": ("decimal", "bool"),
    "decimal": ("bool", "str"),
    "bool": ("int",),
    "str": ("int", "map"),
    "map": ("list:map", "list:str"),
}


Param = tuple[str, str, str]  # (name, type, "required" | "default" | "optional")
Draw = Callable[[st.SearchStrategy[Any]], Any]  # a composite's `draw`, or `data.draw`


@st.composite
def signatures(draw: st.DrawFn) -> list[Param]:
    params = draw(st.lists(names, min_size=1, max_size=5, unique=True))
    modes = st.sampled_from(("required", "default", "optional"))
    return [(name, draw(types), draw(modes)) for name in params]


def _param(param: Param, draw: Draw) -> str:
    name, ty, mode = param
    text = f"{name}{'?' if mode == 'optional' else ''}: {type_ref(ty)}"
    return text + (f" = {expr_text(draw(value_of(ty)))}" if mode == "default" else "")


@st.composite
def calls(draw: st.DrawFn, signature: list[Param]) -> dict[str, ast.Expr]:
    """A well-formed call: every required argument, some of the others, in any order."""
    given = [p for p in signature if p[2] == "required" or draw(st.booleans())]
    given = draw(st.permutations(given))
    return {name: draw(value_of(ty)) for name, ty, _ in given}


def workspace_text(
    signature: list[Param], expects: list[tuple[str, dict[str, ast.Expr]]], draw: Draw
) -> str:
    params = ", ".join(_param(p, draw) for p in signature)
    lines = [
        f"toolset t {{\n  tool x({params})\n}}",
        "role r {\n  allow t.*\n}",
        "profile p {\n  roles r\n  hooks none\n}",
        'test "calls" {\n  profile p',
    ]
    for effect, args in expects:
        lines.append(f"  expect {effect} t.x {map_text(ast.MapLit(tuple(args.items())))}")
    return "\n".join(lines) + "\n}\n"


def check(text: str) -> Workspace | list[Diagnostic]:
    try:
        return check_sources([("gen.charter", text)])
    except CharterError as exc:
        return exc.diagnostics


def _inside(span: ast.Span, outer: ast.Span) -> bool:
    return (span.line, span.col) >= (outer.line, outer.col) and (span.end_line, span.end_col) <= (
        outer.end_line,
        outer.end_col,
    )


def _passes(ws: Workspace) -> list[bool]:
    return [r.passed for r in run_tests(compile_workspace(ws))]


def _expect_spans(text: str) -> list[ast.Span]:
    test = next(d for d in parse(text, "gen.charter").declarations if isinstance(d, ast.Test))
    return [e.span for e in test.expects]


Call = dict[str, ast.Expr]


@st.composite
def broken(draw: st.DrawFn, signature: list[Param], call: Call) -> tuple[Call, str]:
    """`call` broken one way, and the code that says so."""
    ways = ["add", "rename", "type"] if call else ["add"]
    if any(mode == "required" for _, _, mode in signature):
        ways.append("drop")
    way = draw(st.sampled_from(ways))
    known = {name for name, _, _ in signature}
    unknown = names.filter(lambda n: n not in known)
    if way == "add":
        return {**call, draw(unknown): draw(types.flatmap(value_of))}, "E0121"
    if way == "rename":
        old, new = draw(st.sampled_from(sorted(call))), draw(unknown)
        return {new if k == old else k: v for k, v in call.items()}, "E0121"
    if way == "drop":
        required = [n for n, _, mode in signature if mode == "required"]
        gone = draw(st.sampled_from(required))
        return {k: v for k, v in call.items() if k != gone}, "E0122"
    name = draw(st.sampled_from(sorted(call)))
    declared = next(ty for n, ty, _ in signature if n == name)
    return {**call, name: draw(value_not_of(declared))}, "E0211"


@given(st.data())
def test_a_broken_call_is_refused_inside_its_expect_and_the_engine_agrees(
    data: st.DataObject,
) -> None:
    draw = data.draw
    signature = draw(signatures())
    call = draw(calls(signature))
    breaks = draw(st.lists(broken(signature, call), min_size=1, max_size=3))
    # The well-formed call, among the broken ones (as `expect deny`, which a shape denial
    # would meet): each broken call is refused with its code, every diagnostic points
    # inside a broken call's expect, none inside the well-formed call's.
    at = draw(st.integers(0, len(breaks)))
    expects = [("deny", b) for b, _ in breaks]
    expects.insert(at, ("allow", call))
    text = workspace_text(signature, expects, draw)
    found = check(text)
    assert isinstance(found, list) and found, text
    assert {d.code for d in found} <= CALL_CODES, found
    spans = _expect_spans(text)
    for index, span in enumerate(spans):
        inside = [d.code for d in found if _inside(d.span, span)]
        if index == at:
            assert inside == [], (text, found)
        else:
            assert breaks[index - (index > at)][1] in inside, (text, found)
    assert all(any(_inside(d.span, span) for span in spans) for d in found), found
    # As `expect invalid` the broken calls check, and pass (the engine denies each for its
    # shape), and the well-formed call passes as `expect allow` (`allow t.*`).
    expects = [("invalid", b) for b, _ in breaks]
    expects.insert(at, ("allow", call))
    ws = check(workspace_text(signature, expects, draw))
    assert isinstance(ws, Workspace), ws
    assert _passes(ws) == [True] * len(expects)
    # The well-formed call as `expect invalid` could never pass: E0123, on `invalid`.
    text = workspace_text(signature, [("invalid", call)], draw)
    found = check(text)
    assert isinstance(found, list) and [d.code for d in found] == ["E0123"], found
    assert found[0].span.col == text.split("\n")[found[0].span.line - 1].index("invalid") + 1


@st.composite
def free_calls(draw: st.DrawFn, signature: list[Param]) -> Call:
    """Any call: the signature's names and others; for a name of the signature, a value
    of its type or not (`null`, a number of the other kind, a bad item deep in a list),
    for another name any value."""
    declared = {name: ty for name, ty, _ in signature}
    keys = draw(st.lists(st.one_of(st.sampled_from(sorted(declared)), names), unique=True))
    anything = st.one_of(types.flatmap(value_of), st.just(ast.Lit("null", None)))
    call: Call = {}
    for key in keys[:5]:
        ty = declared.get(key)
        fitting = value_of(ty) if ty else anything
        call[key] = draw(st.one_of(fitting, value_not_of(ty)) if ty else anything)
    return call


@given(st.data())
def test_the_checker_refuses_exactly_the_calls_the_engine_denies_for_their_shape(
    data: st.DataObject,
) -> None:
    """Any calls (known and unknown names, values of any type), each as `expect allow`:
    those the checker refuses (call codes alone, inside their expect) check as `expect
    invalid` and pass, as the engine denies them for their shape; the others pass as
    `expect allow`, as the engine does not."""
    draw = data.draw
    signature = draw(signatures())
    chosen = draw(st.lists(free_calls(signature), min_size=1, max_size=4))
    text = workspace_text(signature, [("allow", c) for c in chosen], draw)
    found = check(text)
    refused = [False] * len(chosen)
    if not isinstance(found, Workspace):
        assert {d.code for d in found} <= CALL_CODES, found
        spans = _expect_spans(text)
        refused = [any(_inside(d.span, span) for d in found) for span in spans]
    effects = ["invalid" if r else "allow" for r in refused]
    ws = check(workspace_text(signature, list(zip(effects, chosen, strict=True)), draw))
    assert isinstance(ws, Workspace), ws
    assert _passes(ws) == [True] * len(chosen)
