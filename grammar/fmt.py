"""The canonical formatter: one layout for every tree, and `parse(fmt(tree)) == tree`.

Comments survive formatting, each with the item it was written at, though a toolset's,
a profile's and a test's items are printed in an order of their own: a comment on the
line an item starts on trails that item, one between the lines of an item goes above it,
any other is placed on its own line above the item written next below it in the source
(the closing `}` of a block is one), and a comment followed by a blank line keeps one
after it (`_place_comments`).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Collection
from decimal import Decimal

from grammar import literals
from grammar.literals import CONTROL_CHARS
from policy import ast
from policy.diagnostics import BIDI_CONTROLS

_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")
INDENT = "  "

# Binding strength: a child printed inside a parent of higher strength needs parentheses.
_OR, _AND, _NOT, _CMP, _ATOM = 1, 2, 3, 4, 5


# Characters a string is never printed with as themselves, but as `\uXXXX`: the control
# characters a string literal refuses raw (json.dumps has escaped the C0 ones already;
# DEL and the C1 ones are left to this), the line and paragraph separators (some tools
# break lines there), bidirectional controls (they reorder what a reader sees), the
# byte-order mark, and lone surrogates (not UTF-8; the parser refuses them, so none
# reaches here, but the output must never fail to encode).
_BIDI = "".join(sorted(BIDI_CONTROLS))
_ESCAPED = re.compile(f"[{CONTROL_CHARS}\u2028\u2029{_BIDI}\ufeff\ud800-\udfff]")


def string(value: str) -> str:
    """A string literal for `value`: JSON's escapes, and only printable text raw."""
    text = json.dumps(value, ensure_ascii=False)
    return _ESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def decimal(value: Decimal) -> str:
    text = format(value, "f")
    return text if "." in text else text + ".0"


def moment_text(ms: int) -> str:
    """A test's `time` as written back: ISO 8601 in UTC, with ms only when it has some."""
    moment = literals.moment_at(ms)
    spec = "milliseconds" if ms % 1000 else "seconds"
    return moment.isoformat(timespec=spec).replace("+00:00", "Z")


def _amount(value: Decimal) -> str:
    """An amount as written (`5`, `25.50`), without an exponent."""
    return decimal(value) if "E" in str(value) else str(value)


def name(value: str) -> str:
    """A tool's, an argument's, a field's or a map key's name: bare when it is a NAME,
    else a string literal (`"x.y"`)."""
    return value if _IDENT.match(value) else string(value)


def tool_text(value: str) -> str:
    """A tool pattern or a tool's full name: its toolset, then the tool's name, bare when
    each of its dotted parts is a NAME (or a pattern's `*`), else quoted whole."""
    head, dot, rest = value.partition(".")
    if not dot or all(_IDENT.match(part) or part == "*" for part in rest.split(".")):
        return value
    return f"{head}.{string(rest)}"


def path_text(path: ast.Path) -> str:
    return ".".join((path.root, *(name(part) for part in path.parts)))


def type_text(ref: ast.TypeRef) -> str:
    """A type as the parser reads it back (`list[{ "x.y": str }] | null`)."""
    if ref.kind == "list":
        assert ref.item is not None
        text = f"list[{type_text(ref.item)}]"
    elif ref.kind == "enum":
        text = "enum[" + ", ".join(string(v) for v in ref.values) + "]"
    elif ref.kind == "record":
        fields = [
            f"{name(f.name)}{'?' if f.optional else ''}: {type_text(f.type)}" for f in ref.fields
        ]
        text = "{ " + ", ".join(fields) + " }" if fields else "{}"
    else:
        text = ref.kind
    return f"{text} | null" if ref.nullable else text


def _strength(expr: ast.Expr) -> int:
    if isinstance(expr, ast.BoolOp):
        return _OR if expr.op == "or" else _AND
    if isinstance(expr, ast.Not):
        return _NOT
    if isinstance(expr, ast.Compare):
        return _CMP
    return _ATOM


def _wrap(expr: ast.Expr, need: int) -> str:
    text = expr_text(expr)
    return f"({text})" if _strength(expr) < need else text


def expr_text(expr: ast.Expr) -> str:
    """An expression in canonical form, with the fewest parentheses that keep the tree."""
    if isinstance(expr, ast.Lit):
        if expr.kind == "str":
            return string(str(expr.value))
        if expr.kind == "bool":
            return "true" if expr.value else "false"
        if expr.kind == "null":
            return "null"
        if expr.kind == "decimal" and isinstance(expr.value, Decimal):
            return decimal(expr.value)
        return str(expr.value)
    if isinstance(expr, ast.ListLit):
        return "[" + ", ".join(expr_text(i) for i in expr.items) + "]"
    if isinstance(expr, ast.MapLit):
        return map_text(expr)
    if isinstance(expr, ast.Path):
        return path_text(expr)
    if isinstance(expr, ast.Call):
        return f"{expr.fn}(" + ", ".join(expr_text(a) for a in expr.args) + ")"
    if isinstance(expr, ast.Not):
        # `not (a == b)` reads better than `not a == b`, though both parse the same.
        return "not " + _wrap(expr.operand, _NOT if isinstance(expr.operand, ast.Not) else _ATOM)
    if isinstance(expr, ast.BoolOp):
        own = _strength(expr)
        # Left-associative: an equal-strength child on the right needs parentheses.
        return f"{_wrap(expr.left, own)} {expr.op} {_wrap(expr.right, own + 1)}"
    if isinstance(expr, ast.Quantifier):
        return f"{expr.kind}({expr.var} in {_wrap(expr.source, _ATOM)}, {expr_text(expr.body)})"
    # Comparisons do not chain, so both operands must be atoms.
    return f"{_wrap(expr.left, _ATOM)} {expr.op} {_wrap(expr.right, _ATOM)}"


def map_text(value: ast.MapLit) -> str:
    if not value.entries:
        return "{}"
    parts = [f"{name(k)}: {expr_text(v)}" for k, v in value.entries]
    return "{ " + ", ".join(parts) + " }"


def _patterns(patterns: tuple[ast.Pattern, ...]) -> str:
    return ", ".join(tool_text(p.text) for p in patterns)


def _where(expr: ast.Expr | None) -> str:
    return f" where {expr_text(expr)}" if expr is not None else ""


def _param(param: ast.Param) -> str:
    secret = "secret " if param.secret else ""
    text = f"{name(param.name)}{'?' if param.optional else ''}: {secret}{type_text(param.type)}"
    return text + (f" = {expr_text(param.default)}" if param.default is not None else "")


# A printed line and the source it prints: a block's item (all of it, as written), a
# block's head (its first line) or closing `}`; None for a blank line or an item the
# source does not hold (a profile's `roles` line when it has none).
Line = tuple[ast.Span | None, str]


def _declaration_lines(decl: ast.Declaration, noted: Collection[int] = ()) -> list[Line]:
    """`noted`: the lines that hold a comment (an empty block holding one stays open)."""

    def item(node: ast.Toolset | ast.Hook | ast.Profile | ast.Test, key: str) -> ast.Span:
        return ast.item_span(node.item_spans, key, ast.NO_SPAN)

    if isinstance(decl, ast.Toolset):
        body: list[Line] = []
        if decl.url is not None:
            body.append((item(decl, "url"), f"url {string(decl.url)}"))
        if decl.connection_required:
            body.append((item(decl, "connection"), "connection required"))
        if decl.runs_code:
            body.append((item(decl, "runs"), "runs code"))
        for tool in decl.tools:
            params = ", ".join(_param(p) for p in tool.params)
            body.append((tool.span, f"tool {name(tool.name)}({params})"))
        return _block(decl.span, f"toolset {decl.name}", body, noted)
    if isinstance(decl, ast.Role):
        rules: list[Line] = [
            (r.span, f"{r.effect} {_patterns(r.patterns)}{_where(r.where)}") for r in decl.rules
        ]
        return _block(decl.span, f"role {decl.name}", rules, noted)
    if isinstance(decl, ast.Hook):
        actions: list[Line]
        if decl.kind == "rewrite":
            actions = [
                (r.span, f"rewrite {path_text(r.target)} = {expr_text(r.value)}")
                for r in decl.rewrites
            ]
        else:
            message = f" {string(decl.message)}" if decl.message is not None else ""
            actions = [(item(decl, decl.kind), f"{decl.kind}{message}")]
        head = f"hook {decl.name} on {_patterns(decl.patterns)}{_where(decl.where)}"
        return _block(decl.span, head, actions, noted)
    if isinstance(decl, ast.Profile):
        roles = "roles " + ", ".join(decl.roles) if decl.roles else "roles"
        items: list[Line] = [(item(decl, "roles"), roles)]
        if decl.hooks_written:
            items.append((item(decl, "hooks"), "hooks " + ", ".join(decl.hooks)))
        if decl.budget is not None:
            text = _amount(decl.budget.amount)
            items.append((item(decl, "budget"), f"budget {text} usd per {decl.budget.period}"))
        if decl.rate is not None:
            line = f"rate {decl.rate.calls} calls per {decl.rate.period}"
            items.append((item(decl, "rate"), line))
        return _block(decl.span, f"profile {decl.name}", items, noted)
    expects: list[Line] = [(item(decl, "profile"), f"profile {decl.profile}")]
    for kind in ("agent", "thread", "context"):
        setting = getattr(decl, kind)
        if setting is not None:
            expects.append((item(decl, kind), f"{kind} {map_text(setting)}"))
    if decl.spent is not None:
        expects.append((item(decl, "spent"), f"spent {_amount(decl.spent)} usd"))
    if decl.time is not None:
        expects.append((item(decl, "time"), f"time {string(moment_text(decl.time))}"))
    if decl.called is not None:
        expects.append((item(decl, "called"), f"called {decl.called} times"))
    for e in decl.expects:
        text = f"expect {e.effect} {tool_text(e.tool)} {map_text(e.args)}"
        if e.context is not None:
            text += f" context {map_text(e.context)}"
        if e.rewritten is not None:
            text += f" rewritten {map_text(e.rewritten)}"
        if e.cost is not None:
            text += f" cost {_amount(e.cost)}"
        if e.because is not None:
            text += f" because {string(e.because)}"
        expects.append((e.span, text))
    return _block(decl.span, f"test {string(decl.name)}", expects, noted)


def _block(span: ast.Span, head: str, body: list[Line], noted: Collection[int] = ()) -> list[Line]:
    """A declaration's lines; its closing `}` is placed at the source's, so that the
    comments after its last item stay inside it (and those of a block with no item)."""
    opening = ast.Span(span.file, span.line, span.col, span.line, span.col)
    if not body and not any(span.line < line < span.end_line for line in noted):
        return [(opening, head + " {}")]
    closing = ast.Span(span.file, span.end_line, span.end_col - 1, span.end_line, span.end_col)
    lines = [(where, INDENT + text) for where, text in body]
    return [(opening, head + " {"), *lines, (closing, "}")]


def format_file(source: ast.SourceFile) -> str:
    """Canonical text for one parsed file, its comments kept."""
    out: list[Line] = []
    noted = {c[0] for c in source.comments}
    for index, decl in enumerate(source.declarations):
        if index:
            out.append((None, ""))
        out.extend(_declaration_lines(decl, noted))
    source_lines = source.text.split("\n")  # lines as the parser numbers them
    # A comment followed by a blank line (a file header, a section title) keeps it.
    spaced = {
        c[0] for c in source.comments if c[0] < len(source_lines) and not source_lines[c[0]].strip()
    }
    return _merge_comments(out, list(source.comments), spaced)


Comment = tuple[int, int, str]  # (line, column, text), as `ast.SourceFile.comments`


def _place_comments(
    lines: list[Line], comments: list[Comment]
) -> tuple[dict[int, list[Comment]], dict[int, str], list[Comment]]:
    """Which printed line each comment goes with, found in the source, not in the printed
    order (the formatter orders a toolset's, a profile's and a test's items its own way):
    a comment on the line an item starts on trails the first item starting there; one
    inside an item written over several lines goes above that item; any other goes
    above the first item (a head, an item, a closing `}`) that starts after it in the
    source, or after the last declaration. Returns the comments to print above each
    line (by its index in `lines`), the one to print beside it, and those left over."""
    placed = sorted(
        ((where.line, where.col), index)
        for index, (where, _) in enumerate(lines)
        if where is not None and where.line
    )
    starts = [at for at, _ in placed]
    first_on_line: dict[int, int] = {}
    covering: dict[int, int] = {}  # a line an item goes on to, after its first
    for (line, _), index in placed:
        first_on_line.setdefault(line, index)
        where = lines[index][0]
        if where is not None:
            covering.update(dict.fromkeys(range(line + 1, where.end_line + 1), index))
    above: dict[int, list[Comment]] = {}
    beside: dict[int, str] = {}
    after: list[Comment] = []
    for comment in sorted(comments):
        line, column, text = comment
        owner = first_on_line.get(line)
        if owner is not None:
            beside[owner] = text
            continue
        owner = covering.get(line)
        if owner is None:
            at = bisect_right(starts, (line, column))
            if at == len(placed):
                after.append(comment)
                continue
            owner = placed[at][1]
        above.setdefault(owner, []).append(comment)
    return above, beside, after


def _merge_comments(
    lines: list[Line], comments: list[Comment], spaced: Collection[int] = ()
) -> str:
    above, beside, after = _place_comments(lines, comments)
    texts: list[str] = []
    for index, (_, text) in enumerate(lines):
        # (the comments before a closing `}` are the block's last items)
        indent = INDENT if text == "}" else text[: len(text) - len(text.lstrip())]
        for line, _, comment in above.get(index, ()):
            texts.append(indent + comment)
            if line in spaced:
                texts.append("")
        texts.append(f"{text}  {beside[index]}" if index in beside else text)
    for line, _, comment in after:  # after the last declaration
        texts.append(comment)
        if line in spaced:
            texts.append("")
    return "\n".join(texts).rstrip("\n") + "\n" if texts else ""
