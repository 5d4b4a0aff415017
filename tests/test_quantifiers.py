"""`all(x in L, cond)` and `any(...)` (policy/ast.py Quantifier): parsed from a call,
typed with the item bound, compiled as the reference evaluator reads them, and outside
the fit fragment (so never a proof that a candidate fits)."""

from __future__ import annotations

from typing import Any

import pytest

from engine.check import check_sources
from engine.compile import compile_workspace
from engine.decision import Request
from engine.fit import fit_source
from engine.reference import reference_decide
from grammar.fmt import format_file
from grammar.parser import parse

TOOLSET = """toolset mail {
  tool send(to: str, cc: list[str] = [], rows: list[map] = [])
}
"""
ROLE = """role r {
  allow mail.send where all(x in args.cc, x endswith "@example.com") and any(x in args.rows, has(x.ok) and x.ok == true and all(x in context.l, x != null))
}
profile p {
  roles r
}
"""

CASES: list[tuple[dict[str, Any], Any, str]] = [
    ({"to": "a", "cc": ["a@example.com"], "rows": [{"ok": True}]}, {"l": [1]}, "allow"),
    ({"to": "a", "cc": ["a@example.com", "b@x.com"], "rows": [{"ok": True}]}, {"l": []}, "deny"),
    ({"to": "a", "cc": [], "rows": [{"ok": False}, {"ok": True}]}, {"l": []}, "allow"),
    ({"to": "a", "cc": [], "rows": []}, {"l": []}, "deny"),  # `any` of nothing is false
    ({"to": "a", "cc": [], "rows": [{"ok": True}]}, {"l": "x"}, "deny"),  # not a list: error
    ({"to": "a", "cc": [], "rows": [{"ok": True}]}, {"l": [None]}, "deny"),
    ({"to": "a", "cc": [], "rows": [{"ok": True}]}, None, "deny"),  # no context: error
    ({"to": "a", "cc": [], "rows": [{}, {"ok": True}]}, {"l": [2]}, "allow"),
]


@pytest.mark.parametrize(("args", "context", "effect"), CASES)
def test_compiled_and_reference_agree(args: dict[str, Any], context: Any, effect: str) -> None:
    ws = check_sources([("t.charter", TOOLSET + ROLE)])
    request = Request("p", "mail.send", args, context)
    assert compile_workspace(ws).decide(request).effect == effect
    assert reference_decide(ws, request)[0] == effect


def test_an_error_in_the_body_is_reported_with_the_list_it_read() -> None:
    ws = check_sources([("t.charter", TOOLSET + ROLE)])
    request = Request("p", "mail.send", {"to": "a", "rows": [{"ok": True}]}, {"l": 3})
    errors = compile_workspace(ws).decide(request).errors
    assert [e.message for e in errors] == ["`all` reads a list, and `context.l` is a number"]


def test_the_formatter_keeps_a_quantifier_and_its_scopes() -> None:
    text = TOOLSET + ROLE
    once = format_file(parse(text, "t.charter"))
    assert 'all(x in args.cc, x endswith "@example.com")' in once
    assert format_file(parse(once, "t.charter")) == once
    assert parse(once, "t.charter") == parse(text, "t.charter")


def test_a_candidate_with_a_quantifier_never_fits_by_proof() -> None:
    caller = compile_workspace(check_sources([("t.charter", TOOLSET + ROLE)]))
    candidate = 'role c {\n  allow mail.send where all(x in args.cc, x == "a@example.com")\n}\n'
    result = fit_source(caller, "p", candidate)
    assert not result.fits
    assert {v.kind for v in result.violations} == {"unsupported"}
