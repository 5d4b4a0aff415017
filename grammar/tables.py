"""Lark's LALR tables, flattened for `grammar.parser`'s own parse loop.

`lark_parser()` builds the grammar with lark: the LALR(1) tables, the contextual lexer
(one scanner per parser state, so keywords are only keywords where they fit) and the
`WholeWords` post-lexer. `parse_tables()` copies what a parse needs out of that into
flat lists and dictionaries, once: each state's actions, its scanner (one regex, ignored
text first) and keyword table, and for each rule how it is reduced, through which
`grammar.build.Builder` method, shaping the children as lark's tree builder would.

Lark's own parser is still what `grammar.parser` runs on text the loop rejects, so the
same `lark_parser()` is shared by both.

Lark's build of the grammar takes half a second, in every process that parses (each
`charter` command, each serving worker), so the package ships the flattened tables as
data: grammar/shipped_tables.py, written by `python -m grammar.tables`, with the digest of
the grammar it was made from. `parse_tables()` takes them when the digest is the
grammar's, else builds them from lark; tests/test_shipped_tables.py fails when they are
not lark's build of the grammar. Lark numbers states in the order of its sets, which
changes with the hash seed, so the data is renumbered by a walk from the start state.
"""

from __future__ import annotations

import hashlib
import pprint
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
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
    | {"list_value", "map_value", "list_type", "record_type"}
)


def _grammar_text() -> str:
    return resources.files("grammar").joinpath("charter.lark").read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def lark_parser() -> Lark:
    # No cache=True: it loads a pickle from a predictable temp path.
    return Lark(
        _grammar_text(),
        parser="lalr",
        strict=True,
        propagate_positions=True,
        maybe_placeholders=True,
        postlex=WholeWords(),
    )


Reducer = Callable[[Builder, list[Any], int, int], Any]
# A state's scanner: its regex, flags and keyword table (see `_scanner`).
Scanner = tuple[str, int, dict[str, dict[str, str]]]
# The tables as plain data (`table_data`): what grammar/shipped_tables.py holds.
TableData = dict[str, Any]
SHIPPED = Path(__file__).resolve().parent / "shipped_tables.py"

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


def _reducer(rule: Any) -> tuple[int, str | None, int]:
    """How to turn the children of `rule` into a value, as lark's tree builder would
    shape them (`parse_tree_builder.py`: child filter, placeholders, `?rule` expansion,
    `_rule` inlining) and then hand them to a transformer method (a Builder method's
    name, or the body of a function of the builder, the values and the range); and
    whether the node is a nesting level."""
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
            return CALL, f"return {parts[0]}", 0
        raise TypeError(f"unsupported `?rule` shape `{rule}`")  # pragma: no cover
    if not callable(getattr(Builder, name, None)):  # pragma: no cover - grammar/build mismatch
        raise TypeError(f"grammar.build.Builder has no method for rule `{name}`")
    how = ACCEPT if origin == "start" else CALL
    level = int(name in LEVELS)
    if parts == [f"v[{i}]" for i in range(size)]:
        return how, str(name), level  # every child kept: the Builder method itself, no glue
    return how, f"return b.{name}({items}, s, e)", level


def _compile(body: str, index: int) -> Reducer:
    """A reducer from its spec: a Builder method's name, or the body of `r(b, v, s, e)`."""
    if body.isidentifier():
        method: Reducer = getattr(Builder, body)
        return method
    namespace: dict[str, Any] = {}
    source = f"def r(b, v, s, e):\n    {body}\n"
    exec(compile(source, f"<charter rule {index}>", "exec"), namespace)
    reducer: Reducer = namespace["r"]
    return reducer


def _scanner(lexer: Any, ignore: list[Any]) -> Scanner:
    """The state's scanner (its pattern and flags) and keyword table, from lark's own
    lexer for the state: the same terminals in the same order, so the same first match
    wins. Ignored text (space, comments) is skipped by the same match, atomically (`*+`:
    no backtracking): no other terminal can start where one of those does."""
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
    return pattern, int(lexer.g_regex_flags), keywords


def grammar_digest() -> str:
    """The SHA-256 of grammar/charter.lark: what the shipped tables were made from."""
    return hashlib.sha256(_grammar_text().encode("utf-8")).hexdigest()


def table_data() -> TableData:
    """The tables as plain data, from lark's build of the grammar (slow: lark checks the
    grammar and builds its lexers; what grammar/shipped_tables.py holds)."""
    lk = lark_parser()
    frontend: Any = lk.parser
    contextual = frontend.lexer.lexer  # PostLexConnector -> ContextualLexer
    if not isinstance(contextual, ContextualLexer) or frontend.lexer.postlexer.always_accept:
        raise TypeError("expected lark's contextual lexer")  # pragma: no cover
    table = frontend.parser.parser.parse_table
    rule_index: dict[Any, int] = {}
    rules: list[tuple[int, str, int, str | None, int]] = []
    count = len(table.states)
    actions: list[dict[str, int]] = [{} for _ in range(count)]
    for state, row in table.states.items():
        for symbol, (action, arg) in row.items():
            symbol = _EOF if symbol == "$END" else str(symbol)
            if action is Shift:
                actions[state][symbol] = arg
            else:
                if arg not in rule_index:
                    rule_index[arg] = len(rules)
                    how, reducer, grows = _reducer(arg)
                    rules.append((len(arg.expansion), str(arg.origin.name), how, reducer, grows))
                actions[state][symbol] = ~rule_index[arg]
    ignore = [lk.get_terminal(name) for name in lk.ignore_tokens]
    scanners: list[Scanner] = []
    scanner_of: list[int] = []
    built: dict[int, int] = {}
    for state in range(count):
        lexer = contextual.lexers[state]
        if id(lexer) not in built:
            built[id(lexer)] = len(scanners)
            scanners.append(_scanner(lexer, ignore))
        scanner_of.append(built[id(lexer)])
    start = table.start_states["start"]
    if (
        any(row.get(_EOF, -1) >= 0 for row in actions)
        or any(t.name in words for t in ignore for _, _, words in scanners)
        or actions[start]["start"] != table.end_states["start"]
    ):
        raise TypeError("unexpected LALR tables")  # pragma: no cover
    return _canonical(start, actions, scanners, scanner_of, rules)


def _canonical(
    start: int,
    actions: list[dict[str, int]],
    scanners: list[Scanner],
    scanner_of: list[int],
    rules: list[tuple[int, str, int, str | None, int]],
) -> TableData:
    """The tables with their states, rules and scanners numbered in the order a walk from
    the start state meets them (symbols in sorted order): lark numbers them in the order
    of its sets, which changes with the hash seed from one process to the next."""
    states = {start: 0}
    rule_ids: dict[int, int] = {}
    walk = [start]
    for state in walk:
        for symbol in sorted(actions[state]):
            target = actions[state][symbol]
            if target >= 0 and target not in states:
                states[target] = len(states)
                walk.append(target)
            elif target < 0 and ~target not in rule_ids:
                rule_ids[~target] = len(rule_ids)
    if len(states) != len(actions) or len(rule_ids) != len(rules):
        raise TypeError(
            "unexpected LALR tables: a state or rule no walk reaches"
        )  # pragma: no cover
    scanner_ids: dict[int, int] = {}
    for state in walk:
        scanner_ids.setdefault(scanner_of[state], len(scanner_ids))
    renumbered = [
        {sym: states[t] if t >= 0 else ~rule_ids[~t] for sym, t in sorted(actions[state].items())}
        for state in walk
    ]
    by_rule = sorted(rule_ids, key=rule_ids.__getitem__)
    by_scanner = sorted(scanner_ids, key=scanner_ids.__getitem__)
    return {
        "start": 0,
        "actions": renumbered,
        "scanners": [scanners[i] for i in by_scanner],
        "scanner_of": [scanner_ids[scanner_of[state]] for state in walk],
        "rules": [rules[i] for i in by_rule],
    }


def _shipped() -> TableData | None:
    """The tables shipped with the package, when they were made from this grammar."""
    try:
        from grammar import shipped_tables
    except ImportError:  # pragma: no cover - (a checkout that lacks them)
        return None
    if grammar_digest() != shipped_tables.GRAMMAR_SHA256:
        return None  # (the grammar changed since: `python -m grammar.tables` writes them)
    return shipped_tables.DATA


@lru_cache(maxsize=1)
def parse_tables() -> Tables:
    """The tables a parse runs on: the shipped ones (lark is not run: building them
    takes it half a second), else lark's build of the grammar."""
    data = _shipped() or table_data()
    compiled = [(re.compile(p, flags).match, words) for p, flags, words in data["scanners"]]
    scanners = [compiled[i][0] for i in data["scanner_of"]]
    keywords = [compiled[i][1] for i in data["scanner_of"]]
    rules = [
        (size, origin, how, None if body is None else _compile(body, index), grows)
        for index, (size, origin, how, body, grows) in enumerate(data["rules"])
    ]
    # (plain `str` keys: a look-up compares them with the lexer's strings, fast `==`)
    actions = [{str(k): v for k, v in row.items()} for row in data["actions"]]
    return Tables(data["start"], actions, scanners, keywords, rules)


def write_shipped(path: Path = SHIPPED) -> None:
    """Write grammar/shipped_tables.py from lark's build of grammar/charter.lark."""
    data = pprint.pformat(table_data(), width=100, sort_dicts=False)
    path.write_text(
        '"""The parse tables of grammar/charter.lark, made by `python -m grammar.tables`\n'
        "(grammar/tables.py); a test fails when they are not what lark builds from it.\n"
        '"""\n\nfrom typing import Any\n\n'
        f'GRAMMAR_SHA256 = "{grammar_digest()}"\n\n'
        f"DATA: dict[str, Any] = {data}\n",
        encoding="utf-8",
    )


if __name__ == "__main__":
    write_shipped()
