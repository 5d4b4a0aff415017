"""Unit tests of the fit check against real z3 and the reference evaluator."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

import engine.check
import engine.fit.sources
import grammar.parser
from engine.check import load
from engine.compile import compile_workspace
from engine.fit import fit_budget, fit_profile, fit_source
from policy import ast
from policy.diagnostics import CharterError
from tests.fit.support import TOOLSETS, roles_effect, snapshot

CALLER = """
role mailer {
  allow mail.send where args.to endswith "@example.com" and len(args.cc) == 0
  allow mail.search where args.limit <= 50
}
role ops {
  allow agents.*, roles.*
  deny agents.delete
  deny roles.create where not (args.name startswith "team-")
}
profile caller { roles mailer, ops  budget 5 usd per 24h }
"""


def _widens(source: str, profile: str = "caller") -> dict[str, Any]:
    snap = snapshot(CALLER)
    result = fit_source(snap, profile, source)
    assert not result.fits
    widening = [v for v in result.violations if v.kind == "widens"]
    assert widening, result.violations
    call = widening[0].counterexample
    assert call is not None
    # The counterexample is real: the caller refuses it and the candidate allows it.
    assert roles_effect(snap, profile, call) == "deny"
    return call


def test_a_narrower_role_fits() -> None:
    snap = snapshot(CALLER)
    source = 'role r { allow mail.send where args.to == "a@example.com" and len(args.cc) == 0 }'
    assert fit_source(snap, "caller", source).fits
    assert fit_source(snap, "caller", "role r { allow mail.search where args.limit < 10 }").fits


def test_an_extra_disjunct_widens_with_a_confirmed_counterexample() -> None:
    call = _widens('role r { allow mail.send where args.to endswith "@example.com" }')
    assert call["tool"] == "mail.send"
    args = call["args"]
    assert isinstance(args, dict) and args["to"].endswith("@example.com") and args["cc"]


def test_a_looser_bound_widens() -> None:
    call = _widens("role r { allow mail.search where args.limit <= 51 }")
    assert call["args"] == {"query": call["args"]["query"], "limit": 51}


def test_a_broader_pattern_widens() -> None:
    call = _widens("role r { allow mail.* }")
    assert call["tool"] in ("mail.send", "mail.search")


def test_denies_of_the_caller_bound_the_candidate() -> None:
    snap = snapshot(CALLER)
    assert not fit_source(snap, "caller", "role r { allow agents.delete }").fits
    assert fit_source(snap, "caller", "role r { allow agents.get }").fits
    ok = 'role r { allow roles.create where args.name startswith "team-a" }'
    assert fit_source(snap, "caller", ok).fits
    call = _widens('role r { allow roles.create where args.name startswith "tea" }')
    assert not str(call["args"]["name"]).startswith("team-")


def test_a_missing_optional_argument_is_an_error_not_a_grant() -> None:
    caller = "role c { allow mail.send where args.priority < 3 }\nprofile caller { roles c }"
    snap = snapshot(caller)
    # `not (priority >= 3)` errors when priority is absent, like the caller: fits.
    assert fit_source(
        snap, "caller", "role r { allow mail.send where not (args.priority >= 3) }"
    ).fits
    # `not has(priority) or ...` allows calls without priority, which the caller refuses.
    call = _widens_in(
        snap, "role r { allow mail.send where not has(args.priority) or args.priority < 3 }"
    )
    assert "priority" not in call["args"]


def _widens_in(snap: object, source: str) -> dict[str, Any]:
    from engine.compile import Snapshot

    assert isinstance(snap, Snapshot)
    result = fit_source(snap, "caller", source)
    assert not result.fits
    call = result.violations[0].counterexample
    assert call is not None and result.violations[0].kind == "widens"
    assert roles_effect(snap, "caller", call) == "deny"
    return call


def test_unchecked_context_values_error_on_the_wrong_kind() -> None:
    snap = snapshot(
        "role c { allow mail.search where context.level > 3 }\nprofile caller { roles c }"
    )
    assert fit_source(snap, "caller", "role r { allow mail.search where context.level >= 4 }").fits
    # `!=` across kinds is true, not an error: a string level passes the candidate.
    call = _widens_in(
        snap,
        "role r { allow mail.search where context.level != 0 and context.level != 1 and not (context.level in [2, 3]) }",
    )
    assert call["context"] is not None


def test_runs_code_tools_need_execute() -> None:
    snap = snapshot("role c { allow scripts.run }\nprofile caller { roles c }")
    # The caller cannot run scripts (no `execute`), so a role granting them widens it
    # once it is combined with an `execute` grant.
    result = fit_source(snap, "caller", "role r { allow scripts.run }")
    assert not result.fits
    with_exec = snapshot("role c { allow scripts.run, execute }\nprofile caller { roles c }")
    assert fit_source(with_exec, "caller", "role r { allow scripts.run }").fits


def test_lower_and_like_are_in_the_fragment() -> None:
    snap = snapshot(
        'role c { allow mail.send where lower(args.to) like "*@example.com" }\nprofile caller { roles c }'
    )
    assert fit_source(
        snap, "caller", 'role r { allow mail.send where lower(args.to) == "bob@example.com" }'
    ).fits
    call = _widens_in(snap, 'role r { allow mail.send where args.to like "*@example.*" }')
    assert not call["args"]["to"].lower().endswith("@example.com")


def test_outside_the_fragment_means_does_not_fit() -> None:
    snap = snapshot(CALLER)
    result = fit_source(
        snap, "caller", "role r { allow mail.send where args.to like args.subject and false }"
    )
    assert not result.fits
    assert result.violations[0].kind == "unsupported"
    assert result.violations[0].grant == "r"


def test_a_timeout_means_does_not_fit() -> None:
    snap = snapshot(CALLER)
    result = fit_source(
        snap, "caller", "role r { allow mail.search where args.limit < 3 }", timeout_ms=0
    )
    assert not result.fits
    assert result.violations[0].kind == "timeout"


def test_profiles_keep_denies_hooks_and_budget() -> None:
    snap = compile_workspace(load(["fixtures/fit"]))
    assert fit_profile(snap, "support", snap, "helper").fits
    result = fit_profile(snap, "support", snap, "loose")
    kinds = {v.kind for v in result.violations}
    assert kinds == {"drops-deny", "drops-hook", "budget"}
    for violation in result.violations:
        if violation.kind == "drops-deny":
            assert violation.counterexample is not None
            assert violation.counterexample["tool"] in ("agents.delete", "roles.create")


def test_fit_source_profile_may_use_workspace_roles() -> None:
    snap = compile_workspace(load(["fixtures/fit"]))
    text = "profile kid { roles mail-team, operator\n budget 2 usd per 7d }"
    assert fit_source(snap, "support", text, kind="profile").fits
    wide = "profile kid { roles mail-partners, operator }"
    kinds = {v.kind for v in fit_source(snap, "support", wide, kind="profile").violations}
    assert kinds == {"widens", "budget"}


def test_bad_candidate_text_raises_charter_error() -> None:
    snap = snapshot(CALLER)
    with pytest.raises(CharterError):
        fit_source(snap, "caller", "role r { allow nosuch.tool }")
    with pytest.raises(CharterError):
        fit_source(snap, "caller", "role r { allow mail.send where args.nope == 1 }")
    with pytest.raises(CharterError):
        fit_source(snap, "caller", "profile p { roles }", kind="role")
    with pytest.raises(CharterError):
        fit_source(snap, "nobody", "role r { allow mail.send }")


def test_a_candidate_is_checked_without_parsing_the_workspace_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The workspace's parsed files are reused: parsing them again was 90% of a fit."""
    snap = compile_workspace(load(["fixtures/fit"]))
    parsed: list[str] = []
    real_parse = grammar.parser.parse

    def counting_parse(text: str, path: str = "<string>", *args: Any) -> ast.SourceFile:
        parsed.append(path)
        return real_parse(text, path, *args)

    for module in (engine.check, engine.fit.sources):
        monkeypatch.setattr(module, "parse", counting_parse)
    text = "profile kid { roles mail-team, operator\n budget 2 usd per 7d }"
    assert fit_source(snap, "support", text, kind="profile").fits
    bad = "role r { allow nosuch.tool }"
    with pytest.raises(CharterError) as caught:
        fit_source(snap, "support", bad)
    assert parsed == ["<candidate>", "<candidate>"]
    assert "<candidate>:1:16" in str(caught.value)  # (its own text, for the caret)


def test_budget_is_no_looser() -> None:
    five_a_day = ast.Budget(__import__("decimal").Decimal(5), "24h")
    one_a_week = ast.Budget(__import__("decimal").Decimal(1), "7d")
    one_a_day = ast.Budget(__import__("decimal").Decimal(1), "24h")
    assert fit_budget(None, None) is None
    assert fit_budget(five_a_day, one_a_week) is None
    assert fit_budget(one_a_week, one_a_day) is not None  # resets more often
    assert fit_budget(one_a_day, five_a_day) is not None
    violation = fit_budget(five_a_day, None)
    assert violation is not None and violation.kind == "budget"


def test_to_json_round_trips_through_json() -> None:
    """As the service and the command line write it (api.service.encoding): a decimal of
    the counterexample is a JSON number, read back as the same number."""
    from api.service.encoding import dumps, loads

    snap = snapshot(CALLER)
    result = fit_source(snap, "caller", "role r { allow mail.search where args.ratio > 0.5 }")
    data = loads(dumps(result.to_json()))
    assert data["fits"] is False
    call = data["violations"][0]["counterexample"]
    assert call["tool"] == "mail.search"
    sent = result.violations[0].counterexample
    assert sent is not None and call["args"] == sent["args"]
    assert call["args"]["ratio"] > Decimal("0.5")


def test_lists_of_maps_are_modelled_by_their_items() -> None:
    toolsets = "toolset bill {\n  tool invoice(lines: list[map], total: int)\n}\n"
    snap = snapshot(
        "role c { allow bill.invoice where len(args.lines) > 0 }\nprofile caller { roles c }",
        toolsets,
    )
    assert fit_source(
        snap, "caller", "role r { allow bill.invoice where len(args.lines) >= 2 }"
    ).fits
    # a member of the list: the list is not empty
    member = "role r { allow bill.invoice where context.line in args.lines }"
    assert fit_source(snap, "caller", member).fits
    result = fit_source(snap, "caller", "role r { allow bill.invoice where args.total > 0 }")
    call = result.violations[0].counterexample
    assert call is not None and call["args"]["lines"] == []
    assert roles_effect(snap, "caller", call) == "deny"
    empty = _widens_in(snap, "role r { allow bill.invoice where args.lines == [] }")
    assert empty["args"]["lines"] == []
    # a list of maps holds maps only: a number in it is no member
    odd = "role r { allow bill.invoice where context.n == 1 and context.n in args.lines }"
    assert fit_source(snap, "caller", odd).fits


def test_long_strings_read_only_through_len() -> None:
    snap = snapshot(
        "role c { allow mail.send where len(args.body) <= 10000 }\nprofile caller { roles c }"
    )
    assert fit_source(snap, "caller", "role r { allow mail.send where len(args.body) < 5000 }").fits
    call = _widens_in(snap, "role r { allow mail.send where len(args.body) <= 20000 }")
    assert len(call["args"]["body"]) > 10000


def test_huge_models_are_bounded() -> None:
    snap = snapshot("role c { allow mail.send where len(args.cc) < 3 }\nprofile caller { roles c }")
    call = _widens_in(snap, "role r { allow mail.send where len(context.x) > 20 }")
    assert call["context"] is not None


def test_a_tool_only_the_candidate_workspace_has_widens() -> None:
    caller = snapshot("role c { allow mail.search }\nprofile caller { roles c\n hooks none }")
    extra = "toolset crm {\n  tool export(table: str)\n}\n"
    candidate = snapshot(
        "role c { allow mail.search, crm.export }\nprofile kid { roles c\n hooks none }",
        toolsets=extra + "\n" + TOOLSETS,
    )
    result = fit_profile(caller, "caller", candidate, "kid")
    assert [(v.kind, v.tool) for v in result.violations] == [("widens", "crm.export")]
