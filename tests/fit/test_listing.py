"""Unit tests of tool listing (allow / narrow / deny, residuals, hooks)."""

from __future__ import annotations

import pytest

from engine.check import load
from engine.compile import compile_workspace
from engine.listing import ToolListing, list_tools
from policy.diagnostics import CharterError
from tests.fit.support import snapshot


def _by_tool(text: str, profile: str = "p") -> dict[str, ToolListing]:
    return {t.tool: t for t in list_tools(snapshot(text), profile)}


def test_allow_narrow_and_deny() -> None:
    listing = _by_tool(
        'role r {\n allow mail.search\n allow mail.send where args.to endswith "@x"\n}\n'
        "profile p { roles r\n hooks none }"
    )
    search, send, run = listing["mail.search"], listing["mail.send"], listing["scripts.run"]
    assert search.status == "allow"
    assert send.status == "narrow"
    assert send.condition == 'args.to endswith "@x"'
    assert run.status == "deny"


def test_the_solver_turns_trivial_residuals_into_allow_and_deny() -> None:
    listing = _by_tool(
        "role r {\n allow mail.search where args.limit > 3 or args.limit <= 3\n"
        "  allow mail.send where len(args.to) < 0\n}\nprofile p { roles r\n hooks none }"
    )
    assert listing["mail.search"].status == "allow"
    assert listing["mail.send"].status == "deny"


def test_residual_keeps_denies_and_error_order() -> None:
    text = (
        'role r {\n allow roles.create where args.source contains "x"\n'
        '  deny roles.create where args.name startswith "admin"\n'
        "  allow mail.send where args.priority > 2\n"
        '  allow mail.send where args.to == "a"\n}\nprofile p { roles r\n hooks none }'
    )
    listing = _by_tool(text)
    create = listing["roles.create"]
    assert create.condition == ('not (args.name startswith "admin") and args.source contains "x"')
    send = listing["mail.send"]
    # `args.priority` may be missing (an error): the never-erroring allow goes first.
    assert send.condition == 'args.to == "a" or args.priority > 2'
    assert send.exact is True


def test_hooks_are_listed_and_deny_hooks_narrow() -> None:
    snap = compile_workspace(load(["fixtures/workspace"]))
    listing = {t.tool: t for t in list_tools(snap, "engineering")}
    branch = listing["github.delete_branch"]
    assert branch.status == "narrow"
    assert branch.condition is not None and "release/" in branch.condition
    assert [h.name for h in listing["github.merge_pr"].hooks] == ["approve-merge"]
    data = branch.to_json()
    assert data["any_of"] and data["hooks"][0]["kind"] == "deny"


def test_unknown_profile_is_a_clear_error() -> None:
    with pytest.raises(CharterError) as info:
        list_tools(snapshot("profile p { roles }"), "nope")
    assert info.value.diagnostics[0].code == "E0902"


def test_past_its_deadline_a_listing_gives_the_rules_as_written() -> None:
    text = (
        "role r {\n allow roles.create\n"
        '  deny roles.create where args.name startswith "admin"\n'
        "  allow mail.search\n"
        "  allow mail.send where args.priority > 2\n"
        '  allow mail.send where args.to == "a"\n}\nprofile p { roles r\n hooks none }'
    )
    listing = {t.tool: t for t in list_tools(snapshot(text), "p", timeout_ms=0)}
    # An unconditional allow under a deny: every call the deny does not take.
    create = listing["roles.create"]
    assert (create.status, create.condition) == ("narrow", 'not (args.name startswith "admin")')
    assert create.exact and len(create.grants) == 1
    assert listing["mail.search"].status == "allow"
    # Not reordered (z3 says which allow can never error): `any_of` is the exact form.
    send = listing["mail.send"]
    assert send.status == "narrow" and not send.exact and len(send.grants) == 2
    assert listing["scripts.run"].status == "deny"
