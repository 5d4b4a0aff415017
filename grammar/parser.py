"""Text -> AST. Lark compiles the grammar (LALR, strict); we run its tables ourselves.

`_lark()` builds the grammar with lark: the LALR(1) tables, the contextual lexer (one
scanner per parser state, so keywords are only keywords where they fit) and the
post-lexer. `_tables()` copies what a parse needs out of that into flat lists and
dictionaries, and `_run` drives them in one loop that lexes, shifts and reduces, calling
`grammar.build.Builder` as each rule is reduced: no lark `Token` objects, no parse tree,
no second pass, and only the nodes the AST keeps are ever built. It accepts exactly the
language lark's own parser accepts, with the same tokens and the same positions
(`tests/test_parser.py` compares the two on the fixtures).

Valid input never touches lark's parser. When `_run` rejects the input (or it is nested
too deep), the text is parsed again with lark's parser, whose exceptions become the
diagnostics (`grammar.syntax_errors`): errors are rare, and this keeps their messages
exactly what lark reports. No lark exception leaves this module: every failure becomes a
`CharterSyntaxError` carrying diagnostics with a stable code, a span and, where we can
tell, a help line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import lark
from lark import Lark, Token, Tree
from lark.lexer import ContextualLexer, PatternStr, UnlessCallback
from lark.parsers.lalr_analysis import Shift

from grammar.build import Builder, StrToken, span_of
from grammar.syntax_errors import GluedWord, WholeWords, glued_diagnostic, syntax_diagnostic
from policy import ast
from policy.diagnostics import CharterSyntaxError, Diagnostic


@dataclass(frozen=True, slots=True)
class ParseOptions:
    """Limits are options, not afterthoughts (cel-go): all are checked before building."""

    max_file_bytes: int = 1 << 20
    max_depth: int = 48
    max_expr_nodes: int = 2_000


DEFAULT_OPTIONS = ParseOptions()


@lru_cache(maxsize=1)
def _lark() -> Lark:
    text = resources.files("grammar").joinpath("charter.lark").read_text(encoding="utf-8")
    # No cache=True: it loads a pickle from a predictable temp path.
    return Lark(
        text,
        parser="lalr",
        strict=True,
        propagate_positions=True,
        maybe_placeholders=True,
        postlex=WholeWords(),
    )


# ---- the tables -------------------------------------------------------------------------

Reducer = Callable[[Builder, list[Any], int, int], Any]


@dataclass(frozen=True, slots=True)
class _Tables:
    start: int
    end: int
    # by state: terminal -> shift (the next state, >= 0) or reduce (~rule index);
    # nonterminal -> the state to go to after reducing it
    actions: list[dict[str, int]]
    # by state: the contextual lexer's scanner, and the keywords a matched terminal may
    # turn into (lark's "unless" callbacks: `allow` matches NAME, then becomes ALLOW)
    scanners: list[Callable[[str, int], re.Match[str] | None]]
    keywords: list[dict[str, dict[str, str]]]
    ignore: frozenset[str]
    # by rule: (length, the nonterminal it makes, reducer, 1 if it makes a tree node);
    # a reducer of None passes the rule's only child through (`?rule: x`)
    rules: list[tuple[int, str, Reducer | None, int]]


def _reducer(rule: Any, index: int) -> tuple[Reducer | None, int]:
    """The code that turns the children of `rule` into a value, as lark's tree builder
    would shape them (`parse_tree_builder.py`: child filter, placeholders, `?rule`
    expansion, `_rule` inlining) and then hand them to a transformer method."""
    expansion = rule.expansion
    empty = rule.options.empty_indices
    if empty:
        text = "".join("1" if b else "0" for b in empty)
        nones = [len(ones) for ones in text.split("0")]
    else:
        nones = [0] * (len(expansion) + 1)
    parts: list[str] = []
    for i, sym in enumerate(expansion):
        parts += ["None"] * nones[i]
        if rule.options.keep_all_tokens or not (sym.is_term and sym.filter_out):
            inline = not sym.is_term and sym.name.startswith("_")
            parts.append(f"*v[{i}]" if inline else f"v[{i}]")
    parts += ["None"] * nones[len(expansion)]
    origin = rule.origin.name
    if origin.startswith("_"):
        # A repetition (`x*`, `x+`) or an inlined `_rule`: a list spliced into the parent.
        if parts and parts[0] == "*v[0]" and expansion[0].name == origin:
            # Left recursion: extend the list in place (the parser owns it).
            rest = ", ".join(parts[1:])
            source = f"def r(b, v, s, e):\n    l = v[0]\n    l.extend(({rest},))\n    return l\n"
        else:
            source = f"def r(b, v, s, e):\n    return [{', '.join(parts)}]\n"
        return _compile(source, index), 0
    name = rule.alias or rule.options.template_source or origin
    items = f"[{', '.join(parts)}]"
    if rule.options.expand1 and not rule.alias:
        if len(parts) == 1 and not parts[0].startswith("*"):
            if parts[0] == "v[0]" and len(expansion) == 1:
                return None, 0
            return _compile(f"def r(b, v, s, e):\n    return {parts[0]}\n", index), 0
        # pragma: no cover - not in this grammar: decided per call, as lark does
        source = (
            f"def r(b, v, s, e):\n    c = {items}\n"
            f"    return c[0] if len(c) == 1 else b.{name}(c, s, e)\n"
        )
        return _compile(source, index), 1  # pragma: no cover
    if not callable(getattr(Builder, name, None)):  # pragma: no cover - grammar/build mismatch
        raise TypeError(f"grammar.build.Builder has no method for rule `{name}`")
    return _compile(f"def r(b, v, s, e):\n    return b.{name}({items}, s, e)\n", index), 1


def _compile(source: str, index: int) -> Reducer:
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<charter rule {index}>", "exec"), namespace)
    reducer: Reducer = namespace["r"]
    return reducer


def _scanner(lexer: Any) -> tuple[Any, dict[str, dict[str, str]]]:
    """The state's scanner and keyword table, taken from lark's own lexer for the state
    (the same terminals in the same order, so the same first match wins)."""
    scanner = lexer.scanner
    pattern = "|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in scanner.terminals)
    keywords: dict[str, dict[str, str]] = {}
    for kind, callback in lexer.callback.items():
        if not isinstance(callback, UnlessCallback):  # pragma: no cover - no lexer callbacks
            raise TypeError(f"unexpected lexer callback for {kind}")
        table: dict[str, str] = {}
        for terminal in callback.scanner.terminals:
            if not isinstance(terminal.pattern, PatternStr) or terminal.pattern.flags:
                raise TypeError(f"unexpected keyword terminal {terminal}")  # pragma: no cover
            table[str(terminal.pattern.value)] = str(terminal.name)
        keywords[str(kind)] = table
    return re.compile(pattern, lexer.g_regex_flags).match, keywords


@lru_cache(maxsize=1)
def _tables() -> _Tables:
    lk = _lark()
    frontend: Any = lk.parser
    contextual = frontend.lexer.lexer  # PostLexConnector -> ContextualLexer
    if not isinstance(contextual, ContextualLexer) or frontend.lexer.postlexer.always_accept:
        raise TypeError("expected lark's contextual lexer")  # pragma: no cover
    table = frontend.parser.parser.parse_table
    rule_index: dict[Any, int] = {}
    rules: list[tuple[int, str, Reducer | None, int]] = []
    count = len(table.states)
    actions: list[dict[str, int]] = [{} for _ in range(count)]
    for state, row in table.states.items():
        for symbol, (action, arg) in row.items():
            symbol = str(symbol)  # plain `str` keys: lark's `Token.__eq__` is slow
            if action is Shift:
                actions[state][symbol] = arg
            else:
                if arg not in rule_index:
                    rule_index[arg] = len(rules)
                    reducer, grows = _reducer(arg, len(rules))
                    rules.append((len(arg.expansion), str(arg.origin.name), reducer, grows))
                actions[state][symbol] = ~rule_index[arg]
    scanners = []
    keywords = []
    built: dict[int, tuple[Any, dict[str, dict[str, str]]]] = {}
    for state in range(count):
        lexer = contextual.lexers[state]
        if id(lexer) not in built:
            built[id(lexer)] = _scanner(lexer)
        scanner, words = built[id(lexer)]
        scanners.append(scanner)
        keywords.append(words)
    if any("$END" in row and row["$END"] >= 0 for row in actions):
        raise TypeError("the end of input is shifted")  # pragma: no cover
    ignore = frozenset(str(kind) for kind in lk.ignore_tokens)
    if any(kind in ignore for words in keywords for kind in words):
        raise TypeError("an ignored terminal has keywords")  # pragma: no cover
    return _Tables(
        table.start_states["start"],
        table.end_states["start"],
        actions,
        scanners,
        keywords,
        ignore,
        rules,
    )


# ---- the parse loop ---------------------------------------------------------------------


class _Rejected(Exception):
    """The input is not in the language (or a word is glued): lark will say why."""


_WORD_CHAR = re.compile(r"[a-z0-9_-]")


def _run(tables: _Tables, text: str, builder: Builder) -> tuple[list[ast.Declaration], int]:
    """Lex, shift and reduce exactly as lark's LALR parser with its contextual lexer and
    `WholeWords` post-lexer would; returns the declarations and the parse tree's height
    (the depth limit is on the tree lark would have built)."""
    actions = tables.actions
    scanners = tables.scanners
    keywords = tables.keywords
    ignore = tables.ignore
    rules = tables.rules
    end_state = tables.end
    word_char = _WORD_CHAR.match
    state = tables.start
    states = [state]
    values: list[Any] = []
    starts: list[int] = []
    ends: list[int] = []
    heights: list[int] = []
    pos = 0
    length = len(text)
    glue = -1  # the offset right after a token a word must not be glued to
    kind = ""
    value: Any = None
    start = end = 0
    while True:
        if pos < length:
            match = scanners[state](text, pos)
            if match is None:
                raise _Rejected
            kind = match.lastgroup  # type: ignore[assignment]
            end = match.end()
            if kind in ignore:
                pos = end
                continue
            value = match.group()
            words = keywords[state].get(kind)
            if words is not None:
                kind = words.get(value, kind)
            if pos == glue and word_char(value):
                raise _Rejected  # WholeWords: a keyword glued to the next word
            glue = end if kind != "NAME" and value[-1].isalpha() else -1
            if kind == "STRING":
                value = StrToken(value)
                value.start = pos
            start = pos
            pos = end
        else:
            kind = "$END"
        row = actions[state]
        while True:
            act = row.get(kind)
            if act is None:
                raise _Rejected
            if act >= 0:
                break
            size, origin, reducer, grows = rules[~act]
            if reducer is None:  # `?rule: x` -> x, nothing else changes
                state = actions[states[-2]][origin]
                states[-1] = state
            elif size:
                node = reducer(builder, values[-size:], starts[-size], ends[-1])
                height = max(heights[-size:]) + grows
                s = starts[-size]
                e = ends[-1]
                del values[-size:], states[-size:], starts[-size:], ends[-size:], heights[-size:]
                state = actions[states[-1]][origin]
                states.append(state)
                values.append(node)
                starts.append(s)
                ends.append(e)
                heights.append(height)
            else:
                node = reducer(builder, [], pos, pos)
                state = actions[state][origin]
                states.append(state)
                values.append(node)
                starts.append(pos)
                ends.append(pos)
                heights.append(grows - 1)
            if state == end_state and kind == "$END":
                declarations: list[ast.Declaration] = values[-1]
                return declarations, heights[-1]
            row = actions[state]
        state = act
        states.append(act)
        values.append(value)
        starts.append(start)
        ends.append(end)
        heights.append(-1)


# ---- parse ------------------------------------------------------------------------------


def parse(
    text: str, file: str = "<input>", options: ParseOptions = DEFAULT_OPTIONS
) -> ast.SourceFile:
    """Parse one file. Raises `CharterSyntaxError` (and nothing else) on bad input."""
    if len(text.encode("utf-8", "surrogatepass")) > options.max_file_bytes:
        raise CharterSyntaxError(
            [
                Diagnostic(
                    "E0014",
                    f"file is larger than the limit of {options.max_file_bytes} bytes",
                    ast.Span(file, 1, 1, 1, 1),
                    "split the workspace into several files",
                )
            ]
        )
    builder = Builder(file, text)
    try:
        declarations, height = _run(_tables(), text, builder)
    except _Rejected:
        raise CharterSyntaxError(_diagnose(text, file, options)) from None
    except Exception as exc:  # a reduce action failed (a bug, or e.g. a 5,000-digit int)
        raise CharterSyntaxError(_diagnose(text, file, options, exc)) from None
    if height > options.max_depth:
        raise CharterSyntaxError(_diagnose(text, file, options))
    if builder.errors:
        raise CharterSyntaxError(builder.errors)
    comments = tuple(_comments(text)) if "#" in text else ()
    return ast.SourceFile(file, tuple(declarations), text, comments)


def _diagnose(
    text: str, file: str, options: ParseOptions, failure: Exception | None = None
) -> list[Diagnostic]:
    """What is wrong with a text the fast path refused, in the order the checks have
    always run: lark's syntax errors, then the depth limit, then a failed build."""
    try:
        tree = _lark().parse(text)
    except lark.exceptions.UnexpectedInput as exc:
        return [syntax_diagnostic(exc, file, text)]
    except GluedWord as glued:
        return [glued_diagnostic(glued, file)]
    except lark.exceptions.LarkError as exc:  # pragma: no cover - defensive
        return [Diagnostic("E0001", f"cannot parse: {exc}", ast.Span(file, 1, 1, 1, 1))]
    problems = _check_shape(tree, file, options)
    if problems:
        return problems
    reason = f"cannot build the tree: {failure}" if failure else "cannot parse this input"
    return [Diagnostic("E0001", reason, ast.Span(file, 1, 1, 1, 1))]


def _check_shape(tree: Tree[Token], file: str, options: ParseOptions) -> list[Diagnostic]:
    """Depth and size limits, checked iteratively so a deep input cannot blow the stack."""
    stack: list[tuple[Tree[Token], int]] = [(tree, 0)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if depth > options.max_depth:
            return [
                Diagnostic(
                    "E0013",
                    f"nesting is deeper than the limit of {options.max_depth}",
                    span_of(file, node.meta),
                    "split the condition into simpler rules",
                )
            ]
        for child in node.children:
            if isinstance(child, Tree):
                stack.append((child, depth + 1))
    return []


def _comments(text: str) -> list[tuple[int, int, str]]:
    """(line, column, text) of every `#` comment; a `#` inside a string is not one."""
    out: list[tuple[int, int, str]] = []
    # Lines as lark counts them: only "\n" ends one (splitlines also splits at \r,
    # \x85, \u2028..., which may sit inside a string or a comment).
    for number, line in enumerate(text.split("\n"), start=1):
        in_string = escaped = False
        for index, char in enumerate(line):
            if in_string:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char == "#":
                out.append((number, index + 1, line[index:].rstrip()))
                break
    return out
