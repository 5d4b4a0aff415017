"""docs/http-reference.md, generated from what `/openapi.json` is made of: the route
table's `Spec`s, the pydantic models they name, the error catalogue (api.http.codes) and
an example of each operation (api.http.examples).

    python -m api.http.docgen > docs/http-reference.md    (or: make docs)

tests/api/test_http_reference.py fails when the file differs from what this prints.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pydantic.json_schema import models_json_schema

from api.http.codes import ANYWHERE, CODES, GROUPS, WHERE, AnyCode, Code
from api.http.examples import EXAMPLES, Example
from api.http.openapi import TAGS, models_of, openapi, operation_id
from api.http.routing import Spec, Table

REFERENCE = "docs/http-reference.md"
# Who may call an operation, by its Spec's `auth`.
AUTH = {
    "none": "none",
    "admin": "`admin`",
    "decide": "`admin`, `decide`, or the named agent's own token",
    "manage": "`admin`, or an agent's token, decided as the built-in tool",
}
BODY_CODES = ("bad-content-length", "body-too-large", "malformed-json", "duplicate-key",
              "too-deep", "invalid-body", "number-out-of-range")  # fmt: skip
TOKEN_CODES = ("repeated-header", "unauthorized", "token-expired", "insufficient-scope",
               "store-unavailable", "store-damaged", "store-too-new")  # fmt: skip
QUERY_CODES = {
    "limit": "bad-limit",
    "cursor": "bad-cursor",
    "after_seq": "bad-after-seq",
    "revision": "bad-revision",
    "against": "bad-revision",
    "tool": "bad-log-filter",
    "effect": "bad-log-filter",
    "since": "bad-log-filter",
    "until": "bad-log-filter",
    "agent": "id-too-long",
    "remove_in_use": "bad-remove-in-use",
    "receipt": "bad-receipt",
    "wait": "bad-wait",
    "path": "bad-memory-path",
}
REASONS = {
    200: "OK",
    201: "Created",
    202: "Accepted",
    204: "No Content",
}


def by_shape(spec: Spec) -> set[str]:
    """The codes an operation gives for its shape: its token, body, query, path and
    `If-Match`."""
    found: set[str] = set()
    if spec.auth != "none":
        found |= set(TOKEN_CODES)
    if spec.auth == "manage":
        found |= {"denied-by-policy", "invalid-rewrite"}
    if spec.request is not None:
        found |= set(BODY_CODES)
    if spec.query:
        found.add("repeated-parameter")
        found |= {QUERY_CODES[q] for q in spec.query if q in QUERY_CODES}
    if "{" in spec.path:
        found.add("id-too-long")
    if "If-Match" in spec.headers:
        found.add("bad-if-match")
        found.add("revision-moved" if spec.path == "/v1/policy" else "resource-moved")
    return found


def codes_of(spec: Spec) -> list[AnyCode]:
    """Every code an operation can give but those of any request (`ANYWHERE`), in the
    catalogue's order."""
    op = operation_id(spec)
    mine = by_shape(spec) | {code for code, ops in WHERE.items() if op in ops}
    return [code for code in CODES if code in mine]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _type(schema: dict[str, Any]) -> str:
    """A field's JSON schema, as a short type: `string`, `integer | null`, `[Reason]`."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in schema:
        return " \\| ".join(dict.fromkeys(_type(s) for s in schema["anyOf"]))
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    kind = schema.get("type")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}))}"
    if kind == "object":
        return "object"
    return str(kind) if kind else "any"


def _limits(schema: dict[str, Any]) -> str:
    """A field's bounds and default, in a few words."""
    said = []
    for s in [schema, *schema.get("anyOf", [])]:
        if "minLength" in s or "maxLength" in s:
            said.append(f"{s.get('minLength', 0)} to {s['maxLength']} characters"
                        if "maxLength" in s else f"at least {s['minLength']} characters")  # fmt: skip
        if "minItems" in s or "maxItems" in s:
            said.append(f"{s.get('minItems', 0)} to {s.get('maxItems', '…')} items")
    if "default" in schema and schema["default"] not in (None, "", [], {}):
        said.append(f"default `{json.dumps(schema['default'])}`")
    if schema.get("description"):
        said.append(schema["description"])
    return "; ".join(said)


def _models(table: Table) -> list[str]:
    _, schema = models_json_schema(
        [(x, "validation") for x in models_of(table)],
        ref_template="#/components/schemas/{model}",
    )
    out = ["## Models", "",
           "The bodies the operations read and answer, as `/openapi.json` gives them.", ""]  # fmt: skip
    for name, model in sorted(schema.get("$defs", {}).items()):
        out += [f"### {name}", ""]
        if model.get("description"):
            out += [" ".join(model["description"].split()), ""]
        required = set(model.get("required", []))
        out += ["| field | type | required | notes |", "| --- | --- | --- | --- |"]
        for field, fs in model.get("properties", {}).items():
            yes = "yes" if field in required else "no"
            out.append(f"| `{field}` | {_type(fs)} | {yes} | {_cell(_limits(fs))} |")
        if model.get("additionalProperties") is True:
            out.append("| (more) | any | no | fields some codes add |")
        out.append("")
    return out


WIDTH = 88  # an example's lines, where a value allows


def _json(value: Any, indent: int = 0) -> str:
    """JSON with each object or list on one line when it fits in WIDTH, else one item a
    line."""
    flat = json.dumps(value, ensure_ascii=False)
    if len(flat) + indent <= WIDTH or not isinstance(value, dict | list) or not value:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(k)}: {_json(v, indent + 2)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    items = [f"{pad}{_json(v, indent + 2)}" for v in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


def _example(spec: Spec, example: Example) -> list[str]:
    path = spec.path
    for name, value in example.path.items():
        path = path.replace(f"{{{name}}}", value)
    if example.query:
        path += f"?{example.query}"
    head = [f"{spec.method} {path} HTTP/1.1"]
    if spec.auth != "none":
        head.append("Authorization: Bearer <token>")
    if example.body is not None:
        head.append("Content-Type: application/json")
    request = "\n".join(head) + (f"\n\n{_json(example.body)}" if example.body is not None else "")
    status = f"HTTP/1.1 {spec.status} {REASONS.get(spec.status, '')}".rstrip()
    if example.text:
        answer = f"{status}\nContent-Type: {spec.media}\n\n{example.text}"
    elif example.answer is not None:
        answer = f"{status}\nContent-Type: application/json\n\n{_json(example.answer)}"
    else:
        answer = status
    return ["```http", request, "```", "", "```http", answer, "```", ""]


def _operation(spec: Spec, op: dict[str, Any]) -> list[str]:
    out = [f"### `{operation_id(spec)}`: `{spec.method} {spec.path}`", "", spec.summary + ".", ""]
    out.append(f"- Token: {AUTH[spec.auth]}")
    if spec.tool is not None:
        out.append(f"- Built-in tool: `{spec.tool}`")
    if spec.request is not None:
        name = spec.request.__name__
        more = ", or DSL text (any other content type)" if spec.text else ""
        out.append(f"- Body: [{name}](#{name.lower()}){more}")
    if spec.query:
        out.append("- Query: " + ", ".join(f"`{q}`" for q in spec.query))
    if spec.headers:
        out.append("- Headers: " + ", ".join(f"`{h}`" for h in spec.headers))
    answers = []
    for status, answer in op["responses"].items():
        if status == "default" or int(status) >= 400:
            continue
        content = answer.get("content", {})
        schemas = [c["schema"] for c in content.values()]
        shown = _type(schemas[0]) if schemas else "no body"
        tag = " with `ETag`" if "headers" in answer else ""
        answers.append(f"{status} {shown}{tag}")
    out.append("- Answers: " + "; ".join(answers))
    out.append("")
    out += _example(spec, EXAMPLES[operation_id(spec)])
    statuses: dict[int, list[str]] = {}
    for code in codes_of(spec):
        status = CODES[code].status
        if status is not None and str(status) in op["responses"]:
            statuses.setdefault(status, []).append(f"`{code}`")
    out += ["| status | codes |", "| --- | --- |"]
    out += [f"| {s} | {', '.join(c)} |" for s, c in sorted(statuses.items())]
    out.append("")
    return out


def _errors() -> list[str]:
    out = ["## Error codes", "",
           "Every `code` a problem+json answer carries, with the status it is answered with "
           "and when it is given.", ""]  # fmt: skip
    for code, entry in CODES.items():
        if code in GROUPS:
            out += [f"### {GROUPS[code]}", "", "| code | status | when |", "| --- | --- | --- |"]
        out.append(f"| `{code}` | {status_cell(entry)} | {_cell(entry.when)} |")
        following = list(CODES)[list(CODES).index(code) + 1 :]
        if not following or following[0] in GROUPS:
            out.append("")
    return out


def status_cell(entry: Code) -> str:
    """A code's status as its row shows it: `any` for `http-error`'s (starlette's own)."""
    return "any" if entry.status is None else str(entry.status)


def reference(table: Table) -> str:
    document = openapi(table)
    by_tag: dict[str, list[Spec]] = {tag: [] for tag in TAGS}
    for spec, _ in table:
        by_tag.setdefault(spec.tag or "operations", []).append(spec)
    out = [
        "# HTTP reference",
        "",
        "<!-- generated by `make docs` (python -m api.http.docgen) from the route table, the",
        "     models and api/http/codes.py: change those, then run it; do not edit here -->",
        "",
        "Every endpoint of `charter serve`, one section each, grouped as `/openapi.json` "
        "groups them; then every error code, and the models. The guide is "
        "[http.md](http.md); what operators need to know is in "
        "[operations.md](operations.md).",
        "",
        "A section gives who may call the operation (an agent's token on a `manage` "
        "operation is decided as the built-in tool named, with the body's fields, the "
        "query's and the path's as its arguments), what it reads, what it answers, an "
        "example, and the codes it can refuse with. Any request can also be refused with "
        + ", ".join(f"`{c}`" for c in CODES if c in ANYWHERE)
        + " (see [Error codes](#error-codes)).",
        "",
        "| operation | method and path | token | what |",
        "| --- | --- | --- | --- |",
    ]
    for specs in by_tag.values():
        for spec in specs:
            op = operation_id(spec)
            out.append(f"| [`{op}`](#{op.lower()}-{spec.method.lower()}-"
                       f"{_anchor(spec.path)}) | `{spec.method} {spec.path}` | {spec.auth} | "
                       f"{_cell(spec.summary)} |")  # fmt: skip
    out.append("")
    for tag, specs in by_tag.items():
        out += [f"## {tag.capitalize()}", "", TAGS.get(tag, "") + ".", ""]
        for spec in specs:
            out += _operation(spec, document["paths"][spec.path][spec.method.lower()])
    out += _errors()
    out += _models(table)
    return "\n".join(out).rstrip("\n") + "\n"


def _anchor(path: str) -> str:
    """The part of a GitHub heading anchor a path makes (`/v1/agents/{id}` → `v1agentsid`)."""
    return "".join(ch for ch in path.lower() if ch.isalnum() or ch in "-_")


def main() -> int:
    from api.http.app import TABLE

    sys.stdout.write(reference(TABLE))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
