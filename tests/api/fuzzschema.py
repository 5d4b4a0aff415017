"""Requests for the API's fuzz (tests/api/test_api_fuzz.py), drawn from `/openapi.json`.

Each operation of the document gives its method, path, query parameters, `If-Match` and
its body's JSON schema (api.commands, api.http.models, as pydantic writes it). A body is
drawn valid from that schema first (types, enums, lengths, bounds, required and optional
fields), its ids often ones the fuzz's world holds (`Ref`, looked up when the request is
sent, so the drawn request stays the same when hypothesis replays it on a world rebuilt
since), so that it gets past the schema into the service; then it may be perturbed: a
required field dropped, a wrong type, a length at a bound or past it, a number no double
holds, unicode JSON carries badly, nesting at the 32-level limit, a key given twice, a
field too many.
No schema library: the document uses a handful of keywords, and this reads just those.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

Strategy = st.SearchStrategy[Any]


@dataclass(frozen=True)
class Raw:
    """JSON text written as it is: a number no float holds (`1e400`), a bare `NaN`."""

    text: str


@dataclass(frozen=True)
class Pairs:
    """A JSON object whose keys may repeat (`{"a": 1, "a": 2}`), in this order."""

    items: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Ref:
    """An id of the world's (`a1`, the thread it made, ...): World.resolve gives it."""

    name: str


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    auth: str  # x-charter-auth: none, admin, decide, manage
    tool: str | None
    query: tuple[str, ...]
    if_match: bool
    body: dict[str, Any] | None  # the request body's JSON schema (resolved), if any
    text: bool  # the body may be DSL text too (`PUT /v1/policy`)

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


def operations(doc: dict[str, Any]) -> list[Operation]:
    """Every operation of an OpenAPI document, its body schema's `$ref`s resolved."""
    schemas = doc["components"]["schemas"]
    found = []
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            params = op.get("parameters", [])
            content = op.get("requestBody", {}).get("content", {})
            schema = content.get("application/json", {}).get("schema")
            found.append(
                Operation(
                    method.upper(), path, op["x-charter-auth"], op.get("x-charter-tool"),
                    tuple(p["name"] for p in params if p["in"] == "query"),
                    any(p["name"] == "If-Match" for p in params),
                    None if schema is None else resolved(schema, schemas),
                    "text/plain" in content,
                )
            )  # fmt: skip
    return found


def resolved(node: Any, schemas: dict[str, Any]) -> Any:
    """`node` with every `$ref` replaced by the schema it names (these models nest no
    model in itself, so the tree is finite)."""
    if isinstance(node, dict):
        if "$ref" in node:
            return resolved(schemas[node["$ref"].rsplit("/", 1)[1]], schemas)
        return {k: resolved(v, schemas) for k, v in node.items()}
    if isinstance(node, list):
        return [resolved(v, schemas) for v in node]
    return node


# ---- JSON text ---------------------------------------------------------------------------


def encode(value: Any, resolve: Any, ascii_only: bool = True) -> bytes:
    """`value` as JSON bytes: `Raw` as written, `Pairs` with their repeats, `Ref` through
    `resolve`; a lone surrogate is `\\ud800` (ascii_only), or its bytes as UTF-8 would
    write it if it could (surrogatepass: bytes that are not UTF-8)."""

    def text(v: Any) -> str:
        if isinstance(v, Raw):
            return v.text
        if isinstance(v, Ref):
            return json.dumps(resolve(v), ensure_ascii=ascii_only)
        if isinstance(v, Pairs | dict):
            items = v.items if isinstance(v, Pairs) else v.items()
            return "{" + ",".join(f"{text(k)}:{text(x)}" for k, x in items) + "}"
        if isinstance(v, list):
            return "[" + ",".join(text(x) for x in v) + "]"
        return json.dumps(v, ensure_ascii=ascii_only)

    return text(value).encode("utf-8", "surrogatepass")


# ---- valid values ------------------------------------------------------------------------

AGENTS = ("a1", "n1", "c1", "r1", "t1", "v1")
# What a field of this name most often holds: one of the world's ids or a name the policy
# declares, so a valid body reaches the operation's own checks, not only a 404.
POLICY_TEXT = Ref("policy-text")  # the world's policy (a new revision, the same files)
ROLE = 'role fz{n} {{\n  allow mail.send where args.to endswith "@example.com"\n}}\n'
LONG_COMMENT = "# " + "x" * 2500 + "\n"  # (a few such roles reach the world's policy cap)
HINTS: dict[str, tuple[Any, ...]] = {
    "agent": (*(Ref(a) for a in AGENTS), "ghost"),
    "tool": ("mail.send", "billing.refund", "vault.read", "agents.list", "search", "nosuch.x"),
    "profile": ("support", "support-child", "careful", "narrow", "wide", "reviewed", "tiered",
                "ghost"),
    "identity": (Ref("identity"), "z6MkGhost"),
    "owner": (Ref("identity"), "z6MkGhost"),
    "thread": (Ref("thread"), "ghost"),
    "turn": (Ref("turn"), "ghost"),
    "connection": (Ref("connection"), "ghost"),
    "toolset": ("mail", "vault", "billing", "ghost"),
    "source": (ROLE.format(n=""), ROLE.format(n="2"), ROLE.format(n="") + LONG_COMMENT,
               "role fz {\n  allow search\n}\n",
               "role fz {\n  allow nosuch.tool\n}\n", "profile p {\n}\n", "role {"),
    "name": ("fz", "fz2", "mailer", "Fz", " root ", "x-y_z"),
    "seed": ("00" * 32, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", Ref("seed"), "zz"),
    "path": ("policy.charter", "a.charter", "api/roles/fz.charter", "../x.charter", "A.charter"),
    "text": (POLICY_TEXT, "", "role {", "role x {}\n"),
    "request_id": ("r1", "r2"),
    "prompt": ("secret", "big", ""),
    "label": ("root", "x"),
}  # fmt: skip
ARG_KEYS = ("to", "subject", "body", "amount", "reason", "key", "tier", "limit", "x", "Seed", "id")
# Values an agent's `metadata.tier` and `.limit` (which t1's conditions read) may be given,
# equal to its own (`gold`, 10) or not, as the engine compares them (10 == 10.0 == 1e1).
ATTRIBUTES = ("gold", "blocked", "Gold", 10, 10.0, 4, "10", None, True, [10], {"a": 10})
RAW_ATTRIBUTES = ("10.0", "1e1", "10.000000000000000000001", "-0", "1" + "0" * 30)
# Unicode a JSON body carries badly: NUL, a right-to-left override, a BOM, a noncharacter,
# combining marks, an astral character, a line separator (not a JSON line break).
AWKWARD = ("\x00", "\u202e", "\ufeff", "\uffff", "e\u0301", "\U0001f600", "\u2028", "\u0085")
SURROGATES = ("\ud800", "\udfff", "a\udc00b")
# Numbers at the edge of what the readers hold exactly (a double's range, long digits, -0),
# and past it: JSON all the same, but no double holds them (422), or not JSON numbers.
TAME_NUMBERS = (
    "-0", "0.0", "1e9", "1000000000.0000000000000001", "0.1", "-1", "9" * 19, "1" + "0" * 308,
    "1.5e308", "100.000000000000000000000001", "2e-7", "4e-7", "5e-324",
)  # fmt: skip
WILD_NUMBERS = ("1e400", "-1e400", "1e-400", "1" + "0" * 4400, "NaN", "Infinity", "-Infinity")
RAW_NUMBERS = WILD_NUMBERS + TAME_NUMBERS
NUMBER_TEXTS = ("NaN", "Infinity", "1e400", "abc", "0x10", " 1", "1_000", "", "-0", "1e9")


def awkward_text(max_size: int = 12) -> Strategy:
    return st.one_of(
        st.text(max_size=max_size),
        st.lists(st.sampled_from((*AWKWARD, "a", " ")), max_size=max_size).map("".join),
    )


def leaf() -> Strategy:
    """A JSON value's leaf, now and then an awkward one."""
    return st.one_of(
        st.none(), st.booleans(), st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False), awkward_text(),
        st.sampled_from(TAME_NUMBERS).map(Raw), st.sampled_from(HINTS["agent"]),
    )  # fmt: skip


def free(depth_leaves: int = 8) -> Strategy:
    """A free-form JSON object (a call's `args`, `context`, an agent's `metadata`)."""
    keys = st.one_of(st.sampled_from(ARG_KEYS), awkward_text(6))
    value = st.recursive(
        leaf(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
        max_leaves=depth_leaves,
    )
    return st.dictionaries(keys, value, max_size=4)


def _attributes() -> Strategy:
    value = st.one_of(st.sampled_from(ATTRIBUTES), st.sampled_from(RAW_ATTRIBUTES).map(Raw))
    return st.dictionaries(st.sampled_from(("tier", "limit")), value, max_size=2)


def _string(schema: dict[str, Any], name: str, numeric: bool) -> Strategy:
    low = schema.get("minLength", 0)
    high = min(schema.get("maxLength", 40), max(low, 40))
    if numeric:  # a Decimal field's string form: pydantic reads `"12.5"` as the number
        return st.decimals(0, 10**9, allow_nan=False, places=3).map(str)
    text = st.text(min_size=low, max_size=high)
    if name == "name":  # a role's is a DSL name: a new one now and then, not only junk
        text = st.one_of(text, st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True))
    hints = HINTS.get(name, ())
    return st.one_of(st.sampled_from(hints), text) if hints else text


def valid(schema: dict[str, Any], name: str = "", numeric: bool = False) -> Strategy:
    """A value that the schema accepts (pydantic too: tests/api/test_api_fuzz.py checks)."""
    if "anyOf" in schema:
        numbers = any(s.get("type") == "number" for s in schema["anyOf"])
        return st.one_of([valid(s, name, numbers) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:  # (a bundle manifest's `format`)
        return st.just(schema["const"])
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties")
        if props is None and name == "metadata":
            return st.one_of(free(), _attributes())
        if props is None:
            return free()
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {k: valid(s, k) for k, s in props.items() if k in required},
            optional={k: valid(s, k) for k, s in props.items() if k not in required},
        )
    if kind == "array":
        low = schema.get("minItems", 0)
        return st.lists(valid(schema["items"], name), min_size=low, max_size=max(low, 3))
    if kind == "string":
        return _string(schema, name, numeric)
    if kind in ("number", "integer"):
        low, high = schema.get("minimum"), schema.get("maximum")
        whole = st.integers(None if low is None else int(low), None if high is None else int(high))
        if kind == "integer":
            return whole
        fraction = st.decimals(low, high, allow_nan=False, places=6).map(lambda d: Raw(str(d)))
        return st.one_of(whole, fraction, st.sampled_from([Raw("1e9"), Raw("0.1"), Raw("2e-7")]))
    if kind == "boolean":
        return st.booleans()
    assert kind == "null", schema
    return st.none()


# ---- perturbations -----------------------------------------------------------------------

WRONG: tuple[Any, ...] = (123, -1, 1.5, True, None, [], {}, "x", [1, "a"], {"a": {}}, Raw("1e400"))


def nested(depth: int, inner: Any = "leaf", as_list: bool = False) -> Any:
    """A value nested `depth` levels deep (each level an object or an array)."""
    for _ in range(depth):
        inner = [inner] if as_list else {"d": inner}
    return inner


def _fields(schema: dict[str, Any], body: dict[str, Any]) -> list[str]:
    return sorted(set(schema.get("properties", {})) | set(body))


def _lengths(prop: dict[str, Any]) -> list[int]:
    """A string's or an array's lengths at and past its bounds."""
    for s in (prop, *prop.get("anyOf", ())):
        low, high = s.get("minLength", s.get("minItems", 0)), s.get("maxLength", s.get("maxItems"))
        if s.get("type") in ("string", "array") and (low or high is not None):
            return sorted({0, max(low - 1, 0), low, *(() if high is None else (high, high + 1))})
    return [0, 1, 300]


def perturb(data: st.DataObject, schema: dict[str, Any], body: dict[str, Any]) -> Any:
    """`body` changed one way that its schema (or the service) may refuse."""
    props: dict[str, Any] = schema.get("properties", {})
    fields = _fields(schema, body)
    how = data.draw(st.sampled_from([
        "drop", "wrong-type", "length", "number", "unicode", "deep", "duplicate", "extra",
        "not-object",
    ]), label="perturbation")  # fmt: skip
    out = dict(body)
    if how == "drop" and set(schema.get("required", ())) & set(out):
        del out[data.draw(st.sampled_from(sorted(set(schema["required"]) & set(out))))]
    elif how == "wrong-type" and fields:
        out[data.draw(st.sampled_from(fields))] = data.draw(st.sampled_from(WRONG))
    elif how == "length" and fields:
        field = data.draw(st.sampled_from(fields))
        size = data.draw(st.sampled_from(_lengths(props.get(field, {}))), label="length")
        old = out.get(field)
        if isinstance(old, list) and old:  # (a batch of 1,000 calls and of 1,001, ...)
            out[field] = (old * size)[:size]
        else:
            char = data.draw(st.sampled_from(("a", "é", "\U0001f600", " ", "\x00")))
            out[field] = char * size
    elif how == "number":
        field = data.draw(st.sampled_from([*fields, "expected_cost"]))
        out[field] = data.draw(st.one_of(
            st.sampled_from(RAW_NUMBERS).map(Raw), st.sampled_from(NUMBER_TEXTS),
            st.sampled_from([{"amount": Raw(n), "period": "24h"} for n in RAW_NUMBERS]),
            st.sampled_from(RAW_NUMBERS).map(lambda n: {"n": [Raw(n)]}),  # (in `args`, ...)
        ))  # fmt: skip
    elif how == "unicode":
        bad = data.draw(st.sampled_from(AWKWARD + SURROGATES))
        field = data.draw(st.sampled_from([*fields, "x"]))
        old = out.get(field)
        out[field] = bad + old if isinstance(old, str) else {bad: bad}
    elif how == "deep":
        depth = data.draw(st.sampled_from([30, 31, 32, 33, 40]), label="depth")
        field = data.draw(st.sampled_from([*fields, "args", "metadata", "context"]))
        out[field] = nested(depth, as_list=data.draw(st.booleans()))
    elif how == "duplicate" and out:
        key = data.draw(st.sampled_from(sorted(out)))
        again = data.draw(st.sampled_from([out[key], "other", None]))
        return Pairs((*out.items(), (key, again)))
    elif how == "extra":
        out[data.draw(st.sampled_from(["zz", "Agent", "__proto__", "", "id", "parent"]))] = 1
    elif how == "not-object":
        return data.draw(st.sampled_from([[], [body], "x", None, 1, Raw("1e400"), True]))
    return out


# Bodies that are not JSON of any shape.
BYTES = (
    b"", b" ", b"\x0b", b"{", b"{}x", b"\xef\xbb\xbf{}", b"\xff\xfe{\x00}\x00", b"[]" * 10,
    b'{"a":1}{"a":2}', b"\x00", b"nul", b'"\\ud800"', b"{\"agent\": NaN}",
)  # fmt: skip
