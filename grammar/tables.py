"""Lark's LALR tables, flattened for `grammar.parser`'s own parse loop.

`lark_parser()` builds the grammar with lark: the LALR(1) tables, the contextual lexer
(one scanner per parser state, so keywords are only keywords where they fit) and the
`WholeWords` post-lexer. `parse_tables()` copies what a parse needs out of that into
flat lists and dictionaries, once: each state's actions, its scanner (one regex, ignored
text first) and keyword table, and for each rule how it is reduced, through which
`grammar.build.Builder` method, shaping the children as lark's tree builder would.

Lark's own parser is still what `grammar.parser` runs on text the loop rejects, so the
same `lark_parser()` is shared by both.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from lark import Lark
from lark.lexer import ContextualLexer, PatternStr, UnlessCallback
from lark.parsers.lalr_analysis import Shift

from grammar.build import Builder
from grammar.syntax_errors import WholeWords

# The nesting limit counts one level for each of these nodes (lark's tree names: rule
# aliases or names): the operators `not`, `and`, `or`, the comparisons, function calls,
# lists and maps (in conditions, values and `list[...]` types). Nothing else is a level:
# not parentheses (they make no node), paths or literals, nor the declaration, rule or
# entry around them (docs/errors.md, E0013).
LEVELS = frozenset(
    {"not_expr", "and_expr", "or_expr", "compare", "not_in", "call", "list_expr"}
    | {"list_value", "map_value", "list_type"}
)


@lru_cache(maxsize=1)
def lark_parser() -> Lark:
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


Reducer = Callable[[Builder, list[Any], int, int], Any]

# How a rule is reduced (see `grammar.parser._run`).
PASS = 0  # `?rule: x`: the only child is the value; only the state changes
CALL = 1  # a reducer (a Builder method behind lark's child filter) makes the value
LIST = 2  # a repetition starts: a list of its last child
APPEND = 3  # a repetition goes on: its last child is appended to the list
ACCEPT = 4  # `start`: the parse is over

_EOF = "eof"  # the scanners' group for the end of the text (lark's `$END`)


@dataclass(frozen=True, slots=True)
class Tables:
    start: int
    # by state: terminal -> shift (the next state, >= 0) or reduce (~rule index);
    # nonterminal -> the state to go to after reducing it
    actions: list[dict[str, int]]
    # by state: the contextual lexer's scanner (ignored text first, then one terminal),
    # and the keywords a matched terminal may turn into (lark's "unless" callbacks:
    # `allow` matches NAME, then becomes ALLOW where ALLOW is expected)
    scanners: list[Callable[[str, int, int], re.Match[str] | None]]
    keywords: list[dict[str, dict[str, str]]]
    # by rule: (length, the nonterminal it makes, how, reducer, 1 if it makes a node that
    # is a nesting level, one of `LEVELS`, else 0)
    rules: list[tuple[int, str, int, Reducer | None, int]]


def _reducer(rule: Any, index: int) -> tuple[int, Reducer | None, int]:
    """How to turn the children of `rule` into a value, as lark's tree builder would
    shape them (`parse_tree_builder.py`: child filter, placeholders, `?rule` expansion,
    `_rule` inlining) and then hand them to a transformer method; and whether the node
    is a nesting level."""
    expansion = rule.expansion
    size = len(expansion)
    empty = rule.options.empty_indices
    if empty:
        text = "".join("1" if b else "0" for b in empty)
        nones = [len(ones) for ones in text.split("0")]
    else:
        nones = [0] * (size + 1)
    parts: list[str] = []
    for i, sym in enumerate(expansion):
        parts += ["None"] * nones[i]
        if rule.options.keep_all_tokens or not (sym.is_term and sym.filter_out):
            inline = not sym.is_term and sym.name.startswith("_")
            parts.append(f"*v[{i}]" if inline else f"v[{i}]")
    parts += ["None"] * nones[size]
    origin = rule.origin.name
    last = f"v[{size - 1}]"
    if origin.startswith("_"):
        # A repetition (`x*`, `x+`) or an inlined `_rule`: a list spliced into the parent.
        if parts == [last]:
            return LIST, None, 0
        if parts == ["*v[0]", last] and expansion[0].name == origin:
            return APPEND, None, 0  # left recursion: the parser owns the list
        raise TypeError(f"unsupported list rule `{rule}`")  # pragma: no cover - not in this grammar
    name = rule.alias or origin  # (the grammar has no templates)
    items = f"[{', '.join(parts)}]"
    if rule.options.expand1 and not rule.alias:
        if len(parts) == 1 and not parts[0].startswith("*"):
            if parts == ["v[0]"] and size == 1:
                return PASS, None, 0
            return CALL, _compile(f"def r(b, v, s, e):\n    return {parts[0]}\n", index), 0
        raise TypeError(f"unsupported `?rule` shape `{rule}`")  # pragma: no cover
    if not callable(getattr(Builder, name, None)):  # pragma: no cover - grammar/build mismatch
        raise TypeError(f"grammar.build.Builder has no method for rule `{name}`")
    how = ACCEPT if origin == "start" else CALL
    level = int(name in LEVELS)
    if parts == [f"v[{i}]" for i in range(size)]:
        method: Reducer = getattr(Builder, name)  # every child kept: no glue needed
        return how, method, level
    reducer = _compile(f"def r(b, v, s, e):\n    return b.{name}({items}, s, e)\n", index)
    return how, reducer, level


def _compile(source: str, index: int) -> Reducer:
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<charter rule {index}>", "exec"), namespace)
    reducer: Reducer = namespace["r"]
    return reducer


def _scanner(lexer: Any, ignore: list[Any]) -> tuple[Any, dict[str, dict[str, str]]]:
    """The state's scanner and keyword table, from lark's own lexer for the state: the
    same terminals in the same order, so the same first match wins. Ignored text (space,
    comments) is skipped by the same match, atomically (`*+`: no backtracking): no other
    terminal can start where one of those does."""
    scanner = lexer.scanner
    skip = "|".join(t.pattern.to_regexp() for t in ignore)
    terminals = "|".join(
        f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in scanner.terminals if t not in ignore
    )
    pattern = f"(?:{skip})*+(?:{terminals}|(?P<{_EOF}>\\Z))"
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
def parse_tables() -> Tables:
    lk = lark_parser()
    frontend: Any = lk.parser
    contextual = frontend.lexer.lexer  # PostLexConnector -> ContextualLexer
    if not isinstance(contextual, ContextualLexer) or frontend.lexer.postlexer.always_accept:
        raise TypeError("expected lark's contextual lexer")  # pragma: no cover
    table = frontend.parser.parser.parse_table
    rule_index: dict[Any, int] = {}
    rules: list[tuple[int, str, int, Reducer | None, int]] = []
    count = len(table.states)
    actions: list[dict[str, int]] = [{} for _ in range(count)]
    for state, row in table.states.items():
        for symbol, (action, arg) in row.items():
            symbol = _EOF if symbol == "$END" else str(symbol)  # plain `str`: fast `==`
            if action is Shift:
                actions[state][symbol] = arg
            else:
                if arg not in rule_index:
                    rule_index[arg] = len(rules)
                    how, reducer, grows = _reducer(arg, len(rules))
                    rules.append((len(arg.expansion), str(arg.origin.name), how, reducer, grows))
                actions[state][symbol] = ~rule_index[arg]
    ignore = [lk.get_terminal(name) for name in lk.ignore_tokens]
    scanners = []
    keywords = []
    built: dict[int, tuple[Any, dict[str, dict[str, str]]]] = {}
    for state in range(count):
        lexer = contextual.lexers[state]
        if id(lexer) not in built:
            built[id(lexer)] = _scanner(lexer, ignore)
        scanner, words = built[id(lexer)]
        scanners.append(scanner)
        keywords.append(words)
    start = table.start_states["start"]
    if (
        any(row.get(_EOF, -1) >= 0 for row in actions)
        or any(t.name in words for t in ignore for words in keywords)
        or actions[start]["start"] != table.end_states["start"]
    ):
        raise TypeError("unexpected LALR tables")  # pragma: no cover
    return Tables(start, actions, scanners, keywords, rules)
