"""The semantic diff covers a profile's whole access: allows, denies, hooks, budget.

Each change kind, through `engine.diff.diff_workspaces` and through `charter diff` (exit
code and output); every reported counterexample is replayed through the evaluator."""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest

from api.cli import main
from engine.check import check_sources
from engine.diff import DiffResult, diff_workspaces
from engine.fit import fit_workspace_profile
from engine.workspace import Workspace
from policy import ast
from tests.fit.diffcheck import confirm
from tests.fit.support import TOOLSETS

FIXTURE = "fixtures/fit"

BASE = """
role r {
  allow mail.search where args.limit <= 50
  allow mail.send where args.to endswith "@example.com"
  allow roles.create
  deny roles.create where args.name startswith "x"
}
role guard {
  deny agents.delete where args.id startswith "root"
}
hook clamp on mail.search where args.limit > 20 { rewrite args.limit = 20 }
hook cap on mail.search where args.limit > 10 { rewrite args.limit = 10 }
hook no-big on mail.search where args.limit > 40 { deny "at most 40" }
hook audit on mail.send { pause "a human looks" }
profile p {
  roles r, guard
  hooks clamp, cap, no-big, audit
  budget 5 usd per 24h
}
"""


def _ws(text: str, toolsets: str = TOOLSETS) -> Workspace:
    return check_sources([("toolsets.charter", toolsets), ("p.charter", text)])


def _edit(*pairs: tuple[str, str]) -> Workspace:
    text = BASE
    for old, new in pairs:
        assert old in text, old
        text = text.replace(old, new)
    return _ws(text)


def _seen(result: DiffResult) -> set[tuple[str, str, str | None]]:
    """(direction, kind, what: the tool, the hook or None for the budget) of each change."""
    return {(c.direction, c.kind, c.tool or c.hook) for c in result.changes}


def _diff(old: Workspace, new: Workspace) -> DiffResult:
    result = diff_workspaces(old, new, timeout_ms=20_000)
    for change in result.changes:
        if change.direction != "unknown":
            assert change.widens == (change.direction == "wider"), change
            if change.kind in ("allow", "deny"):
                confirm(old, new, change)
    return result


def test_no_change_and_a_reformatted_policy_are_no_change() -> None:
    old = _ws(BASE)
    assert _diff(old, old).changes == ()
    assert _diff(old, _ws("\n\n" + BASE.replace("  ", "    "))).changes == ()


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        # a deny dropped where no allow grants the tool: wider all the same
        (("  deny agents.delete", "  allow roles.create\n  #"), {("wider", "deny", "agents.delete")}),
        # a deny narrowed: fewer names are refused
        (('startswith "x"', '== "x"'), {("wider", "deny", "roles.create"), ("wider", "allow", "roles.create")}),
        # a deny widened: narrower only
        (('startswith "x"', 'contains "x"'), {("narrower", "deny", "roles.create"), ("narrower", "allow", "roles.create")}),
        (("<= 50", "<= 60"), {("wider", "allow", "mail.search")}),
        (("<= 50", "<= 40"), {("narrower", "allow", "mail.search")}),
    ],
)  # fmt: skip
def test_allows_and_denies(edit: tuple[str, str], expected: set[tuple[str, str, str]]) -> None:
    result = _diff(_ws(BASE), _edit(edit))
    assert _seen(result) == expected
    assert result.widened == any(d == "wider" for d, _, _ in expected)
    assert result.narrowed == any(d == "narrower" for d, _, _ in expected)


@pytest.mark.parametrize(
    ("edit", "expected", "says"),
    [
        (("hooks clamp, cap, no-big, audit", "hooks clamp, cap, audit"),
         {("wider", "hook", "no-big")}, "hook `no-big` (deny) is dropped"),
        (("hooks clamp, cap, no-big, audit", "hooks clamp, cap, no-big"),
         {("wider", "hook", "audit")}, "hook `audit` (pause) is dropped"),
        # a rewrite dropped: its clamp is gone, and what it let through may be refused
        (("hooks clamp, cap, no-big, audit", "hooks cap, no-big, audit"),
         {("wider", "hook", "clamp"), ("narrower", "hook", "clamp")}, "hook `clamp` (rewrite) is dropped"),
        (("hooks clamp, cap, no-big, audit", "hooks cap, clamp, no-big, audit"),
         {("wider", "hook", "cap"), ("narrower", "hook", "clamp")},
         "the rewrite hooks run in another order, from `cap` on"),
        (("hooks clamp, cap, no-big, audit", "hooks clamp, no-big, audit"),
         {("wider", "hook", "cap"), ("narrower", "hook", "cap")}, "hook `cap` (rewrite) is dropped"),
        (("where args.limit > 40 {", "where args.limit > 45 {"),
         {("wider", "hook", "no-big"), ("narrower", "hook", "no-big")},
         "hook `no-big` is changed (its tools, condition or action)"),
        (("rewrite args.limit = 20", "rewrite args.limit = 30"),
         {("wider", "hook", "clamp"), ("narrower", "hook", "clamp")}, "hook `clamp` is changed"),
        (("hooks clamp, cap, no-big, audit", "hooks clamp, cap, no-big, audit, default"),
         {("narrower", "hook", "approve-role-create"), ("narrower", "hook", "approve-agent-delete"),
          ("narrower", "hook", "approve-mail-send"), ("narrower", "hook", "approve-calendar-write"),
          ("narrower", "hook", "approve-drive-write"), ("narrower", "hook", "approve-toolset-url")},
         "hook `approve-role-create` (pause) is added"),
    ],
)  # fmt: skip
def test_hooks(edit: tuple[str, str], expected: set[tuple[str, str, str]], says: str) -> None:
    result = _diff(_ws(BASE), _edit(edit))
    assert _seen(result) == expected
    assert any(says in c.message for c in result.changes), result.changes
    assert result.widened == any(d == "wider" for d, _, _ in expected)


def test_a_rewrite_added_widens_and_narrows() -> None:
    old = _ws(BASE.replace("hooks clamp, cap, no-big, audit", "hooks clamp, no-big, audit"))
    result = _diff(old, _ws(BASE))
    assert _seen(result) == {("wider", "hook", "cap"), ("narrower", "hook", "cap")}
    assert all(c.message == "hook `cap` (rewrite) is added" for c in result.changes)


@pytest.mark.parametrize(
    ("budget", "direction", "says"),
    [
        ("budget 6 usd per 24h", "wider", "the budget is looser: `5 usd per 24h` becomes `6 usd per 24h`"),
        ("budget 5 usd per 7d", "narrower", "the budget is tighter: `5 usd per 24h` becomes `5 usd per 7d`"),
        ("budget 4 usd per 24h", "narrower", "the budget is tighter"),
        ("", "wider", "the budget `5 usd per 24h` is removed (unlimited)"),
    ],
)  # fmt: skip
def test_budgets(budget: str, direction: str, says: str) -> None:
    new = _edit(("budget 5 usd per 24h", budget))
    result = _diff(_ws(BASE), new)
    assert _seen(result) == {(direction, "budget", None)}
    (change,) = result.changes
    assert change.message == says or change.message.startswith(says)
    assert change.budget is not None and change.budget.old == ast.Budget(Decimal(5), "24h")
    assert change.budget.new == new.profiles["p"].budget
    assert change.to_json()["budget"]["old"] == {"amount": Decimal(5), "period": "24h"}


def test_a_budget_added_is_narrower_and_located_at_new_s_budget() -> None:
    new = _ws(BASE)
    result = _diff(_edit(("budget 5 usd per 24h", "")), new)
    assert [(c.direction, c.message) for c in result.changes] == [
        ("narrower", "a budget `5 usd per 24h` is added")
    ]
    budget = new.profiles["p"].budget
    assert budget is not None and result.changes[0].location == str(budget.span)


def test_an_added_profile_widens_by_its_access_only() -> None:
    old = _ws(BASE)
    extra = "profile q {\n  roles guard\n  hooks clamp\n  budget 1 usd per 24h\n}\n"
    # (only a deny: no access, whatever its hooks)
    assert _diff(old, _ws(BASE + extra)).changes == ()
    result = _diff(old, _ws(BASE + extra.replace("roles guard", "roles r")))
    assert _seen(result) == {
        ("wider", "allow", "mail.search"), ("wider", "allow", "mail.send"),
        ("wider", "allow", "roles.create"),
    }  # fmt: skip
    assert all(c.profile == "q" for c in result.changes)


def test_a_removed_profile_narrows() -> None:
    extra = "profile q {\n  roles r\n  hooks none\n}\n"
    result = _diff(_ws(BASE + extra), _ws(BASE))
    assert not result.widened and result.narrowed
    assert _seen(result) == {
        ("narrower", "allow", "mail.search"), ("narrower", "allow", "mail.send"),
        ("narrower", "allow", "roles.create"),
    }  # fmt: skip


def test_undecided_questions_are_unknown_and_widen_in_the_wider_question_only() -> None:
    """A changed signature and a `like` with a pattern that is not a literal are outside
    the fit check's fragment: undecided both ways, counted as widening one way."""
    text = BASE.replace('args.name startswith "x"', "args.name like args.source")
    old = _ws(text)
    new = _ws(text, TOOLSETS.replace("limit: int = 20", "limit: int = 21"))
    result = _diff(old, new)
    assert _seen(result) == {
        ("unknown", "allow", "mail.search"), ("unknown", "allow", "roles.create"),
        ("unknown", "deny", "roles.create"),
    }  # fmt: skip
    assert result.widened and result.narrowed
    assert {c.widens for c in result.changes if c.kind == "deny"} == {True, False}
    for change in result.changes:
        assert "undecided whether the access " in change.message
        assert "treated as not fitting" not in change.message


def test_diff_is_the_fit_check_both_ways() -> None:
    """Each profile's wider changes are `fit --profile`'s violations of NEW inside OLD."""
    old = _ws(BASE)
    new = _edit(("<= 50", "<= 60"), ("hooks clamp, cap, no-big, audit", "hooks cap, clamp"))
    new = replace(new, profiles={**new.profiles, "p": replace(new.profiles["p"], budget=None)})
    result = _diff(old, new)
    fit = fit_workspace_profile(old, "p", new, "p", timeout_ms=20_000)
    kinds = {"widens": "allow", "drops-deny": "deny", "drops-hook": "hook", "budget": "budget"}
    found = sorted(str((kinds[v.kind], v.tool or v.grant)) for v in fit.violations)
    assert found == sorted(str((c.kind, c.tool or c.hook)) for c in result.changes if c.widens)
    assert len(found) == 4  # mail.search; hooks no-big and audit; the budget
    back = fit_workspace_profile(new, "p", old, "p", timeout_ms=20_000)
    found = sorted(str((kinds[v.kind], v.tool or v.grant)) for v in back.violations)
    assert found == sorted(str((c.kind, c.tool or c.hook)) for c in result.changes if not c.widens)
    assert found == ["('hook', 'clamp')"]  # (the rewrites' order)


def test_the_fixture_diff_reports_wider_and_narrower_with_counterexamples() -> None:
    text = Path(FIXTURE, "policy.charter").read_text(encoding="utf-8")
    old = check_sources([("p.charter", text)])
    new = check_sources(
        [("p.charter", text.replace("args.limit <= 50", "args.limit <= 60").replace(
            "deny agents.delete", "deny agents.delete, agents.update"))]
    )  # fmt: skip
    result = _diff(old, new)
    assert result.widened
    wider = {(c.profile, c.tool) for c in result.changes if c.direction == "wider"}
    narrower = {(c.profile, c.tool) for c in result.changes if c.direction == "narrower"}
    assert ("support", "mail.search") in wider
    assert ("support", "agents.update") in narrower
    for change in result.changes:
        assert change.counterexample is not None
    assert not _diff(old, old).changes
    assert not _diff(new, new).widened


# ---- the command line --------------------------------------------------------------


def _write(root: Path, name: str, text: str) -> str:
    (root / name).mkdir()
    (root / name / "toolsets.charter").write_text(TOOLSETS, encoding="utf-8")
    (root / name / "p.charter").write_text(text, encoding="utf-8")
    return str(root / name)


def test_cli_a_dropped_deny_hook_budget_is_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = _write(tmp_path, "old", BASE)
    new = BASE.replace("hooks clamp, cap, no-big, audit", "hooks clamp, cap, audit")
    new = new.replace("  deny agents.delete", "  allow roles.create\n  #").replace(
        "budget 5 usd per 24h", "budget 5 usd per total"
    )
    new_dir = _write(tmp_path, "new", new)
    assert main(["diff", old, new_dir]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "wider: profile `p`: hook `no-big` (deny) is dropped" in out
    assert "narrower: profile `p`: the budget is tighter: `5 usd per 24h` becomes " \
        "`5 usd per total`" in out  # fmt: skip
    deny = out.index(
        "wider: profile `p`: `agents.delete`: calls that the deny rules of role `guard` "
        "refused are no longer refused by a deny rule"
    )
    assert out[deny + 1].startswith(f"  at {new_dir}/p.charter:")
    assert out[deny + 2].startswith('  counterexample: agents.delete {"id":"root')
    assert out[-1] == "2 wider, 1 narrower, 0 undecided"
    assert main(["diff", old, new_dir, "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["widened"] is True and data["narrowed"] is True
    assert {(c["kind"], c["direction"], c["widens"]) for c in data["changes"]} == {
        ("hook", "wider", True), ("deny", "wider", True), ("budget", "narrower", False),
    }  # fmt: skip
    (hook,) = [c for c in data["changes"] if c["kind"] == "hook"]
    assert hook["hook"] == "no-big" and hook["tool"] is None and hook["budget"] is None
    (budget,) = [c for c in data["changes"] if c["kind"] == "budget"]
    assert budget["budget"] == {
        "old": {"amount": 5, "period": "24h"}, "new": {"amount": 5, "period": "total"},
    }  # fmt: skip
    for change in data["changes"]:
        assert set(change) == {
            "profile", "tool", "direction", "message", "role", "location", "counterexample",
            "kind", "widens", "hook", "budget",
        }  # fmt: skip


def test_cli_only_narrower_is_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = _write(tmp_path, "old", BASE)
    new = _write(tmp_path, "new", BASE.replace("hooks clamp, cap, no-big, audit",
                                               "hooks clamp, cap, no-big, audit, default"))  # fmt: skip
    assert main(["diff", old, new]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "narrower: profile `p`: hook `approve-agent-delete` (pause) is added" in out
    assert out[-1] == "0 wider, 6 narrower, 0 undecided"
    assert main(["diff", old, new, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["widened"], data["narrowed"]) == (False, True)


def test_cli_undecided_is_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = _write(tmp_path, "old", BASE)
    new = tmp_path / "new"
    _write(tmp_path, "new", BASE)
    (new / "toolsets.charter").write_text(TOOLSETS.replace("limit: int = 20", "limit: int = 9"))
    assert main(["diff", old, str(new)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(
        "unknown: profile `p`: `mail.search`: undecided whether the access widened; "
        "counted as wider"
    )
    assert out[-1] == "0 wider, 0 narrower, 2 undecided"


def test_cli_no_change(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", FIXTURE, FIXTURE]) == 0
    assert capsys.readouterr().out == "no access changed\n"
    assert main(["diff", FIXTURE, FIXTURE, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "widened": False, "narrowed": False, "changes": [],
    }  # fmt: skip


def test_the_docs_example_is_the_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/fit.md, "Semantic diff": the lines it shows, in order, and the exit code."""
    doc = Path("docs/fit.md").read_text(encoding="utf-8")
    block = doc[doc.index("$ charter diff old new") :]
    shown = block[: block.index("```")].splitlines()
    text = Path(FIXTURE, "policy.charter").read_text(encoding="utf-8")
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    (tmp_path / "old" / "policy.charter").write_text(text, encoding="utf-8")
    for before, after in [
        ("args.limit <= 50", "args.limit <= 40"),
        ('startswith "team-"', 'startswith "team"'),
        ("budget 5 usd per 24h", "budget 9 usd per 24h"),
    ]:
        assert text.count(before) == 1
        text = text.replace(before, after)
    (tmp_path / "new" / "policy.charter").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["diff", "old", "new"]) == int(shown[-1])
    out = iter(capsys.readouterr().out.splitlines())
    for line in shown[1:-2]:
        if line.strip() != "...":
            assert line in out, line  # (in order: `in` consumes the iterator)
