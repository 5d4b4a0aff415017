"""The problem codes' live table (api/http/codes.py): it has every code a ServiceError
or the HTTP layer can carry and nothing else, each with one status and a "when"; the
problem+json writer answers each code with the table's status (a code it lacks with a
logged 400); docs/http-reference.md's "Error codes" is generated from it; and every code
is given somewhere in the source. Every answer a test checks with `expect` (conftest)
maps through the table too, and a code the writer finds no status for fails the test
(`every_code_maps_through_the_table`)."""

from __future__ import annotations

import ast
import json
import logging
import re
from pathlib import Path
from typing import cast, get_args

import pytest

from api.http.codes import CODES, AnyCode, HttpCode
from api.http.docgen import status_cell
from api.http.errors import TITLES, UNLISTED, problem, status_of
from api.service.errors import ERROR_CODES, NOT_FOUND
from policy.identities import Refusal
from tests.api.conftest import UNLISTED_SEEN

ROOT = Path(__file__).resolve().parents[2]


def test_the_table_has_every_code_and_nothing_else() -> None:
    http = set(get_args(HttpCode))
    assert ERROR_CODES.isdisjoint(http)
    assert sorted(ERROR_CODES - CODES.keys()) == [], "give these a status in api/http/codes.py"
    assert sorted(http - CODES.keys()) == [], "give these a status in api/http/codes.py"
    assert sorted(CODES.keys() - ERROR_CODES - http) == [], "no error carries these"
    assert set(get_args(Refusal)) <= ERROR_CODES  # (an IdentityError's code is passed on)
    assert set(NOT_FOUND.values()) <= ERROR_CODES


def test_every_code_has_one_status_with_a_title_and_a_when() -> None:
    # /metrics takes a code as a label value only if it looks like the service's own
    # (api/service/metricsshare.py), and a status without a title is titled "Error".
    for code, entry in CODES.items():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", code), code
        assert entry.when.strip(), code
        if code == "http-error":  # (starlette's own status: an HTTP matter)
            assert entry.status is None
            continue
        assert entry.status is not None and 400 <= entry.status < 600, code
        assert entry.status in TITLES, code
        # only the server's own failures are 5xx: a refusal of the request is a 4xx
        assert entry.status < 500 or code in SERVER, code


# The 5xx codes: a failure (`internal-error`) or a condition of the server that passes or
# that its operator mends; none is a refusal of what the request asked.
SERVER = {
    "internal-error", "store-unavailable", "secret-key-mismatch", "store-damaged",
    "store-too-new", "fit-unavailable", "solver-busy", "too-many-connections", "unavailable",
}  # fmt: skip


def test_the_writer_answers_each_code_with_the_tables_status() -> None:
    for code, entry in CODES.items():
        if entry.status is None:
            continue
        response = problem(code, "detail", help="a line")
        body = json.loads(bytes(response.body))
        assert response.status_code == entry.status == body["status"], code
        assert body["code"] == code and body["title"] == TITLES[entry.status], code
        assert response.headers["content-type"].startswith("application/problem+json")
        assert (response.headers.get("www-authenticate") == "Bearer") == (entry.status == 401)


def test_a_code_the_table_lacks_is_a_logged_refusal(caplog: pytest.LogCaptureFixture) -> None:
    """The types let no such code through; one that came anyway (a bug) is answered as a
    refusal, 400 and problem+json, neither a 500 nor a 2xx, and the log says which."""
    unknown = cast(AnyCode, "no-such-code")
    with caplog.at_level(logging.ERROR, logger="charter.http"):
        response = problem(unknown, "refused")
        assert status_of(unknown) == UNLISTED == 400
        # `http-error` has no status of its own: through the table, it is refused so too
        assert status_of("http-error") == UNLISTED
    assert (
        response.status_code == 400 and json.loads(bytes(response.body))["code"] == "no-such-code"
    )
    said = "problem code `{}` has no status in api.http.codes; answered 400"
    logged = [r.getMessage() for r in caplog.records if r.name == "charter.http"]
    assert logged == [said.format("no-such-code")] * 2 + [said.format("http-error")]
    assert UNLISTED_SEEN[-3:] == logged
    del UNLISTED_SEEN[-3:]  # (this test's own: `every_code_maps_through_the_table`)


def _given_codes() -> set[str]:
    """The string literals of the source that gives codes (api/, and the identities and
    bundles modules whose refusals it passes on), but for the lists of codes themselves."""
    lists = {"ErrorCode", "HttpCode", "Refusal", "ERROR_CODES", "BundleCode"}
    sources = [*sorted((ROOT / "api").rglob("*.py")), ROOT / "policy" / "identities.py",
               ROOT / "policy" / "bundles.py"]  # fmt: skip
    skipped = {ROOT / "api" / "http" / "codes.py", ROOT / "api" / "http" / "docgen.py"}
    found: set[str] = set()
    for path in sources:
        if path in skipped:
            continue
        tree = ast.parse(path.read_text("utf-8"), str(path))
        listed = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign | ast.AnnAssign)
            and any(isinstance(t, ast.Name) and t.id in lists for t in _targets(node))
            for n in ast.walk(node)
        }
        found |= {
            n.value
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in listed
        }
    return found


def _targets(node: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return node.targets if isinstance(node, ast.Assign) else [node.target]


def test_every_code_of_the_table_is_given_somewhere() -> None:
    """A code no source gives is a stale row of the reference."""
    given = _given_codes()
    assert sorted(c for c in CODES if c not in given) == []


def _errors_section() -> str:
    text = (ROOT / "docs" / "http-reference.md").read_text("utf-8")
    match = re.search(r"^## Error codes\n(.*?)(?=^## )", text, re.M | re.S)
    assert match, "docs/http-reference.md has no `## Error codes` section"
    return match.group(1)


def test_the_docs_table_is_the_live_table() -> None:
    rows = re.findall(r"^\| `([^`]+)` \| ([^|]*) \| (.*) \|$", _errors_section(), re.M)
    assert [code for code, _, _ in rows] == list(CODES), "run `make docs`"
    for code, status, when in rows:
        entry = CODES[cast(AnyCode, code)]
        assert status == status_cell(entry), code
        assert when == entry.when.replace("|", "\\|"), code
