"""(f) The formatter round-trips, is idempotent, keeps comments; the parser fails only
with Charter's own syntax error, whatever the text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from grammar.fmt import INDENT, format_file
from grammar.parser import parse
from policy import ast
from tests.property.syntax import source_files


def _fmt(source: ast.SourceFile) -> str:
    return format_file(source)


@given(source_files)
def test_parse_of_fmt_is_the_same_tree(source: ast.SourceFile) -> None:
    """`parse(fmt(ast)) == ast` for every declaration kind and expression form, strings
    with escapes and unicode, decimals and negative numbers (spans are ignored)."""
    text = _fmt(source)
    assert parse(text, "gen.charter").declarations == source.declarations, text


@given(source_files)
def test_fmt_is_idempotent(source: ast.SourceFile) -> None:
    """Formatting formatted text changes nothing."""
    once = _fmt(source)
    assert _fmt(parse(once, "gen.charter")) == once


# No `\r` either: one that ends no line is refused (E0018, docs/dsl.md "Text and line ends");
# nor a lone surrogate, which is no UTF-8 text (E0015).
comment_texts = st.text(
    st.characters(blacklist_characters="\n\r", blacklist_categories=["Cs"]), max_size=10
).map(lambda t: ("# " + t).rstrip())


@given(source_files, st.data())
def test_comments_survive_formatting(source: ast.SourceFile, data: st.DataObject) -> None:
    """Comments on their own lines or after an item are found exactly (a `#` in a
    string is not one), all kept by `fmt`, the tree is unchanged, and formatting the
    result again changes nothing."""
    written: list[str] = []
    inserted: list[str] = []
    for line in _fmt(source).split("\n"):
        where = data.draw(st.sampled_from(("none", "none", "after", "before")))
        if where == "before":
            inserted.append(data.draw(comment_texts))
            written += [inserted[-1], line]
        elif where == "after" and line.strip():
            inserted.append(data.draw(comment_texts))
            written.append(f"{line}  {inserted[-1]}")
        else:
            written.append(line)
    parsed = parse("\n".join(written), "gen.charter")
    assert parsed.declarations == source.declarations
    assert [c[2] for c in parsed.comments] == inserted
    formatted = _fmt(parsed)
    again = parse(formatted, "gen.charter")
    assert sorted(c[2] for c in again.comments) == sorted(inserted), formatted
    assert again.declarations == source.declarations
    assert _fmt(again) == formatted


def _spaced(text: str, comment: str) -> bool:
    """Whether the line after `comment`'s is blank, with more text after it."""
    lines = text.split("\n")
    at = next(i for i, line in enumerate(lines) if line.strip() == comment)
    rest = lines[at + 1 :]
    return len(rest) > 1 and not rest[0].strip() and any(line.strip() for line in rest)


@given(source_files, st.data())
def test_a_blank_line_after_a_comment_is_kept(source: ast.SourceFile, data: st.DataObject) -> None:
    """docs/dsl.md: a comment followed by a blank line keeps it, wherever the comment is
    (between comments, in a block, after the last declaration); one without keeps none."""
    written: list[str] = []
    names: list[str] = []
    for line in [*_fmt(source).split("\n"), ""]:
        if data.draw(st.integers(0, 2)) == 0:
            names.append(f"# c{len(names)}")
            written.append(names[-1])
            written += [""] * data.draw(st.sampled_from((0, 0, 1, 2)))
        written.append(line)
    text = "\n".join(written)
    formatted = _fmt(parse(text, "gen.charter"))
    for name in names:
        assert _spaced(formatted, name) == _spaced(text, name), (text, formatted)
    assert _fmt(parse(formatted, "gen.charter")) == formatted


# The items `fmt` prints in an order of its own, by block: any other item keeps its place
# among the others (a role's rules, a toolset's tools, a test's expectations are lists).
MOVABLE = {
    "toolset": ("url", "connection", "runs"),
    "profile": ("roles", "hooks", "budget"),
    "test": ("profile",),
}


def _shuffled(items: list[str], movable: tuple[str, ...], data: st.DataObject) -> list[str]:
    """The block's items in a drawn order that keeps the meaning: the movable ones
    anywhere, the others in their order."""
    order = data.draw(st.permutations(items))
    kept = iter([i for i in items if i.split()[0] not in movable])
    return [i if i.split()[0] in movable else next(kept) for i in order]


@given(source_files, st.data())
def test_comments_stay_with_their_items_wherever_fmt_moves_them(
    source: ast.SourceFile, data: st.DataObject
) -> None:
    """A toolset's, a profile's and a test's items written in any order, each maybe with
    a comment on its own line above it and one beside it: after `fmt`, each comment
    still sits directly above (or beside) the item it was written at, the tree is the
    same, and formatting again changes nothing. (The comments went above whatever item
    `fmt` printed first after their line, so one could end up describing another.)"""
    written: list[str] = []
    beside: list[str] = []  # each item with a comment beside it, as `fmt` must print it
    above: dict[str, str] = {}  # own-line comment -> the line `fmt` must print below it
    block: list[str] | None = None
    kind = ""
    for line in _fmt(source).split("\n"):
        if block is None:
            written.append(line)
            if line.endswith(" {"):  # (a block with items: `fmt` prints one a line)
                block, kind = [], line.split()[0]
            continue
        if line != "}":
            block.append(line.strip())
            continue
        for item in _shuffled(block, MOVABLE.get(kind, ()), data):
            mark = f"{len(written)}"  # (unique: comments are told apart by it)
            shown = INDENT + item
            if data.draw(st.booleans()):
                shown += f"  # beside {mark}"
                beside.append(shown)
            if data.draw(st.booleans()):
                above[f"# above {mark}"] = shown
                written.append(f"{INDENT}# above {mark}")
            written.append(data.draw(st.sampled_from(("", " ", INDENT * 2))) + shown.strip())
        written.append(line)
        block = None
    text = "\n".join(written)
    parsed = parse(text, "gen.charter")
    assert parsed.declarations == source.declarations, text
    formatted = _fmt(parsed)
    lines = formatted.split("\n")
    for comment, shown in above.items():
        at = lines.index(INDENT + comment)
        assert lines[at + 1] == shown, (text, formatted)
    for shown in beside:
        assert shown in lines, (text, formatted)
    assert parse(formatted, "gen.charter").declarations == source.declarations
    assert _fmt(parse(formatted, "gen.charter")) == formatted
