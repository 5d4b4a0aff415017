"""The problem codes: what `api/` raises (tests/api/codescan.py reads it with `ast`),
the catalogue (api/http/codes.py) and the tables of docs/http-reference.md ("## Error
codes", generated from the catalogue) say the same, and every code of the catalogue is
raised somewhere."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from api.http.codes import CODES
from api.http.errors import TITLES
from tests.api.codescan import Found, codes_in

ROOT = Path(__file__).resolve().parents[2]
# Where codes are built: api/, and the one module below it whose errors it passes on.
SOURCES = [*sorted((ROOT / "api").rglob("*.py")), ROOT / "policy" / "identities.py"]
# Codes in the catalogue that no scan finds. Empty: add one only with a comment saying
# why it cannot be found (say, it is raised by a library).
NOT_FOUND_BY_THE_SCAN: frozenset[str] = frozenset()


def _parse(paths: list[Path]) -> dict[str, ast.Module]:
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text("utf-8"), str(p)) for p in paths}


@pytest.fixture(scope="module")
def found() -> list[Found]:
    codes, unresolved = codes_in(_parse(SOURCES))
    assert unresolved == [], (
        "the scan cannot work out these codes: write the code as a literal, or teach "
        "tests/api/test_error_codes.py the helper that builds it\n" + "\n".join(unresolved)
    )
    assert len({f.code for f in codes}) > 40, "few codes found: has the layout changed?"
    return codes


def test_every_code_raised_is_in_the_catalogue_with_its_status(found: list[Found]) -> None:
    problems = []
    for f in found:
        entry = CODES.get(f.code)
        if entry is None:
            problems.append(f"{f.where}: `{f.code}` ({f.status}) is not in api/http/codes.py")
        elif f.status is not None and f.status not in entry.statuses:
            problems.append(
                f"{f.where}: `{f.code}` is raised with {f.status}, the catalogue says "
                f"{_status_cell(entry.statuses)}"
            )
    assert problems == [], "\n".join(problems)


def test_every_catalogue_entry_is_raised(found: list[Found]) -> None:
    statuses: dict[str, set[int | None]] = {}
    for f in found:
        statuses.setdefault(f.code, set()).add(f.status)
    problems = []
    for code, entry in CODES.items():
        if code in NOT_FOUND_BY_THE_SCAN:
            continue
        if code not in statuses:
            problems.append(f"`{code}` is in the catalogue but nothing in api/ raises it")
            continue
        for status in entry.statuses:
            if status not in statuses[code] and None not in statuses[code]:
                problems.append(f"`{code}` is never raised with {status}")
    assert problems == [], "\n".join(problems)


def test_every_catalogue_entry_is_a_metrics_label_with_a_title() -> None:
    # /metrics takes a code as a label value only if it looks like the service's own
    # (api/service/metricsshare.py), and a status without a title is titled "Error".
    for code, entry in CODES.items():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", code), code
        assert entry.when, code
        assert all(400 <= s < 600 and s in TITLES for s in entry.statuses), code


def _status_cell(statuses: tuple[int, ...]) -> str:
    return " or ".join(str(s) for s in statuses) or "any"


def _row(code: str) -> str:
    entry = CODES[code]
    when = entry.when.replace("|", "\\|")  # (a `|` in a cell, code spans' too, is escaped)
    return f"| `{code}` | {_status_cell(entry.statuses)} | {when} |"


def _errors_section() -> str:
    text = (ROOT / "docs" / "http-reference.md").read_text("utf-8")
    match = re.search(r"^## Error codes\n(.*?)(?=^## )", text, re.M | re.S)
    assert match, "docs/http-reference.md has no `## Error codes` section"
    return match.group(1)


def test_docs_table_has_every_code_as_the_catalogue_says() -> None:
    rows = re.findall(r"^\| `([^`]+)` \| [^|]* \| .* \|$", _errors_section(), re.M)
    lines = {
        m.group(1): m.group(0) for m in re.finditer(r"^\| `([^`]+)` \|.*$", _errors_section(), re.M)
    }
    problems = [f"`{c}` has two rows" for c in sorted({c for c in rows if rows.count(c) > 1})]
    for code in CODES:
        if code not in lines:
            problems.append(f"`{code}` has no row in docs/http-reference.md: run `make docs`")
        elif lines[code] != _row(code):
            problems.append(
                f"`{code}`'s row differs from api/http/codes.py:\n  docs: {lines[code]}\n"
                f"  code: {_row(code)}"
            )
    problems += [
        f"`{c}` is in docs/http-reference.md but not in the catalogue"
        for c in lines.keys() - CODES.keys()
    ]
    assert problems == [], "\n".join(problems)


# ---- the scan itself ----------------------------------------------------------------------
HELPERS = """
def not_found(what, id):
    return ServiceError(404, f"{what}-not-found", f"{what} {id}")

class Service:
    def doc(self, kind, what, id):
        raise not_found(what, id)

def owned(service, what, id):
    service.doc(what + "s", what, id)
    raise ServiceError(409, f"{what}-agent-mismatch", "")

def query(request, name):
    raise ServiceError(400, f"bad-{name.replace('_', '-')}", "")

def handler(exc):
    codes = {404: "route-not-found", 405: "method-not-allowed"}
    code = codes.get(exc.status_code, "http-error")
    return problem(exc.status_code, code, "")

def uses(service):
    not_found("agent", "a1")
    service.doc("approvals", "approval", "x")
    owned(service, "turn", "t1")
    query(None, "after_seq")
    raise ServiceError(exc.status, exc.code, "")  # passed on: not a code of its own
"""


def test_the_scan_works_codes_out_through_helpers() -> None:
    found, unresolved = codes_in({"m.py": ast.parse(HELPERS)})
    assert unresolved == []
    assert {(f.code, f.status) for f in found} == {
        ("agent-not-found", 404), ("approval-not-found", 404), ("turn-not-found", 404),
        ("turn-agent-mismatch", 409), ("bad-after-seq", 400), ("route-not-found", 404),
        ("method-not-allowed", 405), ("http-error", None),
    }  # fmt: skip


def test_the_scan_refuses_a_code_it_cannot_work_out() -> None:
    source = (
        "def f(kinds, request):\n"
        "    for k in kinds:\n"
        "        raise ServiceError(400, k, '')\n"
        "    raise ServiceError(400, request.code, '')\n"
    )
    found, unresolved = codes_in({"m.py": ast.parse(source)})
    assert found == []
    assert sorted(unresolved) == [
        "m.py:3: cannot tell what `k` is",
        "m.py:4: cannot tell what `request.code` is",
    ]
