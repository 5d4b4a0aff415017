"""docs/http-reference.md is what `python -m api.http.docgen` prints (`make docs`), from
the route table, the models and the error catalogue; each operation's example reads as
its schemas, and the codes it lists for an operation agree with the statuses
`/openapi.json` gives that operation, both ways."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import pytest

from api.http.app import TABLE
from api.http.codes import ANYWHERE, CODES, WHERE
from api.http.docgen import REFERENCE, by_shape, codes_of, reference
from api.http.examples import EXAMPLES
from api.http.openapi import openapi, operation_id

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = openapi(TABLE)
SCHEMAS: dict[str, Any] = DOCUMENT["components"]["schemas"]
OPS = {operation_id(spec): spec for spec, _ in TABLE}


def test_the_reference_is_up_to_date() -> None:
    written = (ROOT / REFERENCE).read_text("utf-8")
    assert written == reference(TABLE), (
        f"{REFERENCE} is stale: run `make docs` (python -m api.http.docgen > {REFERENCE})"
    )


def _unknown(schema: dict[str, Any], value: Any, at: str) -> list[str]:
    """Where `value` has a field its schema does not describe, or no branch of an `anyOf`
    takes it (the models' validation checks the rest)."""
    if "$ref" in schema:
        return _unknown(SCHEMAS[schema["$ref"].rsplit("/", 1)[-1]], value, at)
    if "anyOf" in schema:
        tries = [_unknown(s, value, at) for s in schema["anyOf"]]
        return min(tries, key=len)
    if isinstance(value, dict) and "properties" in schema:
        found = [f"{at}.{k}: not in the schema" for k in value.keys() - schema["properties"]]
        if schema.get("additionalProperties") is True:
            found = []
        for key, item in value.items():
            if key in schema["properties"]:
                found += _unknown(schema["properties"][key], item, f"{at}.{key}")
        return found
    if isinstance(value, list) and "items" in schema:
        return [p for i, item in enumerate(value) for p in _unknown(schema["items"], item,
                                                                     f"{at}[{i}]")]  # fmt: skip
    return []


@pytest.mark.parametrize("op", sorted(OPS))
def test_each_example_reads_as_its_schemas(op: str) -> None:
    spec, example = OPS[op], EXAMPLES[op]
    if spec.request is None:
        assert example.body is None
    else:
        spec.request.model_validate(example.body)
    if spec.response is not None:
        spec.response.model_validate(example.answer)
        assert _unknown({"$ref": f"#/{spec.response.__name__}"}, example.answer, op) == []
    elif spec.status == 204:
        assert example.answer is None
    # every path parameter given, and only those
    params = {p.strip("{}") for p in spec.path.split("/") if p.startswith("{")}
    assert set(example.path) == params
    if example.query:
        assert {part.split("=")[0] for part in example.query.split("&")} <= set(spec.query)


def test_every_operation_has_an_example() -> None:
    assert set(EXAMPLES) == set(OPS)


def test_every_code_is_placed() -> None:
    """Each code is one an operation gives for its shape, one the catalogue places
    (`WHERE`), or one any request may get (`ANYWHERE`); and each operation named is one."""
    shaped = set().union(*(by_shape(spec) for spec in OPS.values()))
    assert [c for c in CODES if c not in shaped | WHERE.keys() | ANYWHERE] == []
    assert [c for c in WHERE if c not in CODES] == []
    assert [(c, op) for c, ops in WHERE.items() for op in ops if op not in OPS] == []


def test_the_codes_of_each_operation_agree_with_its_statuses() -> None:
    problems = []
    for op, spec in OPS.items():
        responses = DOCUMENT["paths"][spec.path][spec.method.lower()]["responses"]
        statuses = {int(s) for s in responses if s != "default" and int(s) >= 400}
        answers = {status for status, _ in spec.others}  # (JSON of their own, no code)
        listed = codes_of(spec)
        for code in listed:
            if CODES[code].status not in statuses:
                problems.append(f"{op}: `{code}` ({CODES[code].status}) but no such status")
        for status in sorted(statuses - answers):
            if not any(CODES[code].status == status for code in listed):
                problems.append(f"{op}: {status} has no code")
    assert problems == [], "\n".join(problems)


# The HTTP pages, and those that link into them
PAGES = ["docs/http.md", "docs/http-reference.md", "docs/operations.md", "docs/dsl.md",
         "docs/benchmarks.md", "docs/design-notes.md"]  # fmt: skip


@functools.cache
def _anchors(text: str) -> frozenset[str]:
    """GitHub's anchors of a page's headings: lowercase, punctuation but `-` and `_` out,
    spaces as `-`."""
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        slug = "".join(ch for ch in heading.lower() if ch.isalnum() or ch in " -_")
        found.add(slug.replace(" ", "-"))
    return frozenset(found)


@pytest.mark.parametrize("page", PAGES)
def test_the_pages_links_lead_somewhere(page: str) -> None:
    """Every relative link of these pages names a file of the repository, and a heading
    of it when it names one."""
    text = (ROOT / page).read_text("utf-8")
    problems = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if "://" in target:
            continue
        path, _, anchor = target.partition("#")
        file = (ROOT / page).parent / path if path else ROOT / page
        if not file.exists():
            problems.append(f"{target}: no file {file.relative_to(ROOT)}")
        elif anchor and anchor not in _anchors(file.read_text("utf-8")):
            problems.append(f"{target}: no heading `#{anchor}` in {file.relative_to(ROOT)}")
    assert problems == [], "\n".join(problems)
