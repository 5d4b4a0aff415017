"""Conditions to z3: one `Encoder` per (tool, question), shared by both sides.

Every argument and every root (`context`, `agent`, `thread`) becomes one z3 variable,
named after the path, plus a presence flag when it may be absent; a map member is a term
over its map (`MAP_GET` / `MAP_HAS` of the map's identity, see `terms`). So the caller's
and the candidate's conditions talk about the same call.
`condition` returns a pair (value, error) mirroring `engine.reference.holds`: the
encoded condition is true / false / an error exactly when the evaluator's is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import z3

from engine.fit.relations import equal, glob_match, member
from engine.fit.terms import (
    FALSE,
    HOST,
    HOST_FAILS,
    ITEMS,
    LIST_OF,
    LOWER,
    MAP_GET,
    MAP_HAS,
    MAP_SIZE,
    TRUE,
    VAL,
    Facts,
    Term,
    Unsupported,
    all_and,
    any_or,
    canonical,
    items_of,
    negate,
    seq_sort,
    text_val,
    to_real,
)
from engine.types import from_ref
from policy import ast
from policy.catalogue import ToolSpec

_AGENT_STR = ("id", "name", "identity")
# z3 honours neither its timeout nor an interrupt while it takes in long string constants
# or large regular expressions: a `!=` of one 24,000-character literal took 15 s in one
# check, 240 literals of 1,000 characters 7.5 s, and a `like` of 1,600 `*`s more than
# 15 minutes in the assertion alone (any `POST /v1/fit` caller could send them). Past
# these sizes a condition is outside the fragment: `unsupported`, so "does not fit".
MAX_LITERAL = 4096  # characters of one string literal
MAX_LITERALS = 32_768  # characters of all the string literals of one question
MAX_GLOB_STARS = 32  # `*`s of one `like` pattern


@dataclass
class PathVar:
    """A modelled path: its z3 value, its presence, what it hangs from, and (for an
    argument that is a list of maps or lists, a `VAL`) its declared type."""

    key: tuple[str, ...]
    ty: str
    value: Any
    present: Any
    parent: tuple[str, ...] | None = None
    children: list[tuple[str, ...]] = field(default_factory=list)
    decl: str | None = None


class Encoder:
    """Encodes the conditions of one tool's rules; collects the axioms they need."""

    def __init__(self, tool: ToolSpec) -> None:
        self.tool = tool
        self.paths: dict[tuple[str, ...], PathVar] = {}
        self.lowered: list[Any] = []  # string arguments given to `lower`
        self.hosted: list[Any] = []  # string arguments given to `host`
        self.length_only: set[str] = set()
        self.literal_chars = 0  # of the string literals encoded so far (MAX_LITERALS)
        self.facts = Facts()  # for the axioms and the preferences
        self.enums: list[tuple[PathVar, tuple[str, ...]]] = []  # enum arguments, their values

    def prepare(self, conditions: list[ast.Expr | None]) -> Encoder:
        """Note the `str` arguments that every condition reads only through `len`: they
        are modelled by their length alone (z3's string solver is slow on long strings,
        and `len(args.body) <= 10000` needs one)."""
        under_len = {
            node.args[0].parts[0]
            for cond in conditions
            if cond is not None
            for node in ast.walk_expr(cond)
            if isinstance(node, ast.Call)
            and node.fn == "len"
            and isinstance(node.args[0], ast.Path)
            and node.args[0].root == "args"
            and len(node.args[0].parts) == 1
        }
        self.length_only = {
            name
            for name in under_len
            if (p := self.tool.param(name)) is not None
            and p.type.plain
            and from_ref(p.type) == "str"
            and _only_under_len(name, conditions)
        }
        return self

    # ---- variables -----------------------------------------------------------------
    def arg(self, name: str) -> PathVar:
        key = ("args", name)
        if key in self.paths:
            return self.paths[key]
        param = self.tool.param(name)
        if param is None:  # the checker resolves every path; stay closed if not
            raise Unsupported(f"tool `{self.tool.name}` has no argument `{name}`")
        ref = param.type
        enum = ref.kind == "enum" and not ref.nullable
        if not ref.plain and not enum:  # (a record, a list of them, `null`: outside)
            raise Unsupported(
                f"argument `{name}` of `{self.tool.name}` is `{ref}`: a condition on a "
                "record or a value that may be `null` is outside the fit check"
            )
        ty = from_ref(ref)
        label = "args." + name
        present = TRUE if param.required or param.default is not None else z3.Bool("has:" + label)
        if enum:  # a `str` among the enum's values (a call with another is refused first)
            for text in ref.values:
                self._count(text)
            var = PathVar(key, "str", z3.String(label), present)
            self.enums.append((var, ref.values))
        elif ty == "str" and name in self.length_only:
            var = PathVar(key, "strlen", z3.Int(label + "#len"), present)
        elif ty == "str":
            var = PathVar(key, "str", z3.String(label), present)
        elif ty == "int":
            var = PathVar(key, "int", z3.Int(label), present)
        elif ty == "decimal":
            var = PathVar(key, "real", z3.Real(label), present)
        elif ty == "bool":
            var = PathVar(key, "bool", z3.Bool(label), present)
        elif ty == "map":
            var = PathVar(key, "any", z3.Const(label, VAL), present)
        else:
            item = ty[5:]
            item = "real" if item == "decimal" else item
            if item in ("str", "int", "real", "bool"):
                var = PathVar(key, "list:" + item, z3.Const(label, seq_sort(item)), present)
            else:  # lists of maps or lists: a `VAL`, whose items are `VAL`s
                var = PathVar(key, "any", z3.Const(label, VAL), present, decl=ty)
        self.paths[key] = var
        return var

    def root(self, root: str) -> PathVar:
        key = (root,)
        if key not in self.paths:
            self.paths[key] = PathVar(key, "any", z3.Const(root, VAL), z3.Bool("has:" + root))
        return self.paths[key]

    def path_var(self, path: ast.Path) -> PathVar:
        if path.root == "args":
            if not path.parts:
                raise Unsupported("the whole `args` map is outside the fit fragment")
            var = self.arg(path.parts[0])
            rest = path.parts[1:]
        else:
            var = self.root(path.root)
            rest = path.parts
        for part in rest:
            if var.ty != "any":
                raise Unsupported(f"`{path}` reads into a `{var.ty}`")
            key = (*var.key, part)
            child = self.paths.get(key)
            if child is None:
                ident, name = VAL.map_id(var.value), z3.StringVal(part)
                present = z3.And(var.present, VAL.is_vmap(var.value), MAP_HAS(ident, name))
                child = PathVar(key, "any", MAP_GET(ident, name), present, var.key)
                self.paths[key] = child
                var.children.append(key)
            var = child
        return var

    def named_keys(self) -> list[str]:
        """Every map member some path names, at any depth."""
        return list(dict.fromkeys(key[-1] for key, var in self.paths.items() if var.parent))

    def axioms(self) -> list[Any]:
        """Facts of every real call (each holds of the images `terms` describes): a root
        or `map` argument that is present is a map, a list argument a list; the lists in
        play are told apart by their items (`LIST_OF` inverts `ITEMS` on them), an empty
        map in play is the empty map (`EMPTY_MAP`); an enum argument that is present is
        one of its values; a map has
        at least as many members as the named keys it holds; a member is not equal to a
        map it hangs from, nor a list searched to one of its items; and two maps compared
        are equal when they agree on the named keys and hold no other."""
        out: list[Any] = []
        keys = self.named_keys()
        for var in self.paths.values():
            if var.ty == "any":
                v = var.value
                out.extend(canonical(v))
                ident = VAL.map_id(v)
                out.append(z3.Implies(VAL.is_vmap(v), MAP_SIZE(ident) >= _held(ident, keys)))
                if var.parent is None:  # a root, a `map` argument or a list of composites
                    shape = VAL.is_vlist(v) if var.decl else VAL.is_vmap(v)
                    out.append(z3.Implies(var.present, shape))
                up = var.parent
                while up is not None:  # (a finite value is not equal to its own member)
                    out.append(z3.Implies(var.present, v != self.paths[up].value))
                    up = self.paths[up].parent
            if var.ty == "strlen":
                out.append(var.value >= 0)
        seen: set[tuple[int, int]] = set()
        maps = {var.value.get_id() for var in self.paths.values() if var.children}
        for v, w in self.facts.compared:
            out.extend(_extensional(v, w, keys, maps, seen))
        for v in {v.get_id(): v for v in self.facts.searched}.values():
            out.append(z3.Not(z3.Contains(items_of(v), z3.Unit(v))))  # (finite: not its own)
        for items in self.facts.boxed:
            out.append(ITEMS(LIST_OF(items)) == items)
        for s in self.hosted:
            out.append(z3.Implies(z3.Not(HOST_FAILS(s)), z3.Length(HOST(s)) > 0))
        for var, values in self.enums:
            among = any_or(*(var.value == z3.StringVal(v) for v in values))
            out.append(z3.Implies(var.present, among))
        return out

    # ---- conditions ------------------------------------------------------------------
    def condition(self, expr: ast.Expr | None) -> tuple[Any, Any]:
        """(value, error) of a `where`; None (no condition) always holds."""
        if expr is None:
            return TRUE, FALSE
        term = self.term(expr)
        return self._as_bool(term)

    def _as_bool(self, term: Term) -> tuple[Any, Any]:
        if term.ty == "bool":
            return term.expr, term.err
        if term.ty == "any":
            return VAL.bool_of(term.expr), any_or(term.err, z3.Not(VAL.is_vbool(term.expr)))
        return FALSE, TRUE  # a non-boolean condition always errors

    def term(self, expr: ast.Expr) -> Term:
        if isinstance(expr, ast.Lit):
            if expr.kind == "str":
                self._count(str(expr.value))
            return _literal(expr)
        if isinstance(expr, ast.ListLit):
            items = [self.term(i) for i in expr.items]
            return Term("listlit", None, any_or(*(i.err for i in items)), items)
        if isinstance(expr, ast.MapLit):
            raise Unsupported("map literals are outside the fit fragment")
        if isinstance(expr, ast.Quantifier):
            raise Unsupported(f"`{expr.kind}` over a list is outside the fit fragment")
        if isinstance(expr, ast.Path):
            var = self.path_var(expr)
            if var.ty == "strlen":  # prepare() saw only `len` reads
                raise Unsupported(f"`{expr}` is read other than through `len`")
            return Term(var.ty, var.value, negate(var.present), decl=var.decl)
        if isinstance(expr, ast.Call):
            return self._call(expr)
        if isinstance(expr, ast.Not):
            value, err = self._as_bool(self.term(expr.operand))
            return Term("bool", negate(value), err)
        if isinstance(expr, ast.BoolOp):
            lv, le = self._as_bool(self.term(expr.left))
            rv, re_ = self._as_bool(self.term(expr.right))
            if expr.op == "and":  # false on the left short-circuits the right's error
                return Term("bool", all_and(lv, rv), any_or(le, all_and(negate(le), lv, re_)))
            return Term("bool", any_or(lv, rv), any_or(le, all_and(negate(le), negate(lv), re_)))
        return self._compare(expr)

    def _count(self, text: str) -> None:
        self.literal_chars += len(text)
        if len(text) > MAX_LITERAL:
            raise Unsupported(
                f"a string literal of {len(text)} characters (the fit check reads at most "
                f"{MAX_LITERAL})"
            )
        if self.literal_chars > MAX_LITERALS:
            raise Unsupported(
                f"string literals of more than {MAX_LITERALS} characters in all for one tool"
            )

    def _call(self, call: ast.Call) -> Term:
        arg = call.args[0]
        if call.fn == "has":
            if not isinstance(arg, ast.Path):
                raise Unsupported("`has` of something other than a path")
            return Term("bool", self.path_var(arg).present)
        if (
            call.fn == "len"
            and isinstance(arg, ast.Path)
            and arg.root == "args"
            and len(arg.parts) == 1
            and arg.parts[0] in self.length_only
        ):
            var = self.arg(arg.parts[0])
            return Term("int", var.value, negate(var.present))
        inner = self.term(arg)
        if call.fn == "len":
            if inner.ty == "str" or inner.ty.startswith("list:"):
                return Term("int", z3.Length(inner.expr), inner.err)
            if inner.ty == "listlit":
                return Term("int", z3.IntVal(len(inner.items)), inner.err)
            if inner.ty == "any":
                v = inner.expr
                self.facts.sized.append(v)
                ok = z3.Or(VAL.is_vstr(v), VAL.is_vlist(v), VAL.is_vmap(v))
                size = z3.If(
                    VAL.is_vstr(v),
                    z3.Length(VAL.str_of(v)),
                    z3.If(VAL.is_vlist(v), z3.Length(items_of(v)), MAP_SIZE(VAL.map_id(v))),
                )
                return Term("int", size, any_or(inner.err, z3.Not(ok)))
            return Term("int", z3.IntVal(0), TRUE)
        if call.fn in ("lower", "host"):
            text, err = self._text(inner)
            if call.fn == "lower":
                self.lowered.append(text)
                return Term("str", LOWER(text), err)
            self.hosted.append(text)
            return Term("str", HOST(text), any_or(err, HOST_FAILS(text)))
        raise Unsupported(f"function `{call.fn}` is outside the fit fragment")

    def _text(self, term: Term) -> tuple[Any, Any]:
        if term.ty == "str":
            return term.expr, term.err
        if term.ty == "any":
            self.facts.texts.append(term.expr)
            return VAL.str_of(term.expr), any_or(term.err, z3.Not(VAL.is_vstr(term.expr)))
        return z3.StringVal(""), TRUE

    def _number(self, term: Term) -> tuple[Any, Any]:
        if term.ty in ("int", "real"):
            return to_real(term), term.err
        if term.ty == "any":
            return VAL.num_of(term.expr), any_or(term.err, z3.Not(VAL.is_vnum(term.expr)))
        return z3.RealVal(0), TRUE

    def _compare(self, cmp: ast.Compare) -> Term:
        left, right = self.term(cmp.left), self.term(cmp.right)
        err = any_or(left.err, right.err)
        op = cmp.op
        if op in ("==", "!="):
            same = equal(left, right, self.facts)
            return Term("bool", same if op == "==" else negate(same), err)
        if op in ("in", "not in"):
            found, type_err = member(left, right, self.facts)
            return Term("bool", found if op == "in" else negate(found), any_or(err, type_err))
        if op in ("<", "<=", ">", ">="):
            (a, ea), (b, eb) = self._number(left), self._number(right)
            value = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
            return Term("bool", value, any_or(err, ea, eb))
        (a, ea), (b, eb) = self._text(left), self._text(right)
        err = any_or(err, ea, eb)
        if op == "startswith":
            return Term("bool", z3.PrefixOf(b, a), err)
        if op == "endswith":
            return Term("bool", z3.SuffixOf(b, a), err)
        if op == "contains":
            return Term("bool", z3.Contains(a, b), err)
        if op == "like":
            if not (isinstance(cmp.right, ast.Lit) and cmp.right.kind == "str"):
                raise Unsupported("`like` with a pattern that is not a literal string")
            stars = str(cmp.right.value).count("*")
            if stars > MAX_GLOB_STARS:
                raise Unsupported(
                    f"`like` with a pattern of {stars} `*`s (the fit check reads at most "
                    f"{MAX_GLOB_STARS})"
                )
            return Term("bool", glob_match(a, str(cmp.right.value)), err)
        raise Unsupported(f"operator `{op}` is outside the fit fragment")


def _held(ident: Any, keys: list[str]) -> Any:
    """How many of `keys` the map `ident` holds."""
    held = [z3.If(MAP_HAS(ident, z3.StringVal(k)), 1, 0) for k in keys]
    return z3.Sum(held) if held else z3.IntVal(0)


def _extensional(
    v: Any, w: Any, keys: list[str], maps: set[int], seen: set[tuple[int, int]]
) -> list[Any]:
    """Two maps that hold only named keys, and agree on each, are equal; so are two
    members of theirs under one key, when a path names members of either (`maps`).
    True of every real pair of maps."""
    pair = (v.get_id(), w.get_id())
    if pair in seen or v.eq(w):
        return []
    seen.add(pair)
    iv, iw = VAL.map_id(v), VAL.map_id(w)
    same = [
        VAL.is_vmap(v),
        VAL.is_vmap(w),
        MAP_SIZE(iv) == _held(iv, keys),
        MAP_SIZE(iw) == _held(iw, keys),
    ]
    out: list[Any] = []
    for key in keys:
        k = z3.StringVal(key)
        has_v, has_w = MAP_HAS(iv, k), MAP_HAS(iw, k)
        get_v, get_w = MAP_GET(iv, k), MAP_GET(iw, k)
        same.append(has_v == has_w)
        same.append(z3.Implies(has_v, get_v == get_w))
        if get_v.get_id() in maps or get_w.get_id() in maps:
            out.extend(_extensional(get_v, get_w, keys, maps, seen))
    return [z3.Implies(z3.And(*same), v == w), *out]


def _only_under_len(name: str, conditions: list[ast.Expr | None]) -> bool:
    """Is `args.<name>` read only as `len(args.<name>)` (or tested with `has`)?"""
    for cond in conditions:
        if cond is None:
            continue
        stack: list[ast.Expr] = [cond]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Call) and node.fn in ("len", "has"):
                arg = node.args[0]
                if isinstance(arg, ast.Path) and arg.root == "args" and arg.parts == (name,):
                    continue
            if isinstance(node, ast.Path) and node.root == "args" and node.parts[:1] == (name,):
                return False
            if isinstance(node, ast.ListLit):
                stack.extend(node.items)
            elif isinstance(node, ast.MapLit):
                stack.extend(v for _, v in node.entries)
            elif isinstance(node, ast.Call):
                stack.extend(node.args)
            elif isinstance(node, ast.Not):
                stack.append(node.operand)
            elif isinstance(node, ast.BoolOp | ast.Compare):
                stack.extend((node.left, node.right))
    return True


def _literal(lit: ast.Lit) -> Term:
    if lit.kind == "str":
        return Term("str", text_val(str(lit.value)))
    if lit.kind == "int":
        return Term("int", z3.IntVal(int(lit.value)))  # type: ignore[arg-type]
    if lit.kind == "decimal":
        return Term("real", z3.RealVal(str(lit.value)))
    if lit.kind == "bool":
        return Term("bool", z3.BoolVal(bool(lit.value)))
    return Term("null", None)
