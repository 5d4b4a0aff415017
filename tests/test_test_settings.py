"""A test's settings (engine/testing.py): the agent, the thread, the context and what
was spent reach the call as the service would send them, a `cost` meets the budget step,
`because` checks the reasons, and `--coverage` (engine/coverage.py) names what no test
reached."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from engine.check import check_sources, read_sources
from engine.compile import Snapshot, compile_workspace
from engine.coverage import coverage
from engine.testing import ExpectResult, run_tests

ROOT = Path(__file__).resolve().parent.parent
WORKSPACE = ROOT / "fixtures" / "workspace"

TESTS = """
test "refunds stop at the daily budget" {
  profile finance-desk
  agent { id: "fin-1", metadata: { team: "billing" } }
  spent 190 usd
  expect allow billing.refund { order: "o-1", amount: 20, currency: "USD", reason: "x" } cost 10
  expect deny billing.refund { order: "o-1", amount: 20, currency: "USD", reason: "x" } cost 10.000001 because "over the profile `finance-desk` budget 200 USD per 24h"
}

test "the ops bot may delete agents, others may not" {
  profile automation
  agent { name: "ops-bot" }
  expect allow agents.delete { id: "a1" }
}

test "without an agent the condition errors and the deny applies" {
  profile automation
  expect deny agents.delete { id: "a1" } because "denied by role `operator`"
}

test "merges wait for green ci, within the thread's cap" {
  profile engineering
  context { ci: "green" }
  thread { id: "t-7", cost: 4, max_cost: 5 }
  expect pause github.merge_pr { repo: "acme/web", number: 7 } cost 1
  expect deny github.merge_pr { repo: "acme/web", number: 7 } cost 1.5 because "thread `t-7` max_cost 5 USD"
  expect deny github.merge_pr { repo: "acme/web", number: 7 } context { ci: "red" }
}
"""


def _results(extra: str) -> tuple[list[ExpectResult], Snapshot]:
    sources = [*read_sources([WORKSPACE]), ("extra.charter", extra)]
    snapshot = compile_workspace(check_sources(sources))
    results = [r for r in run_tests(snapshot) if r.expect.span.file == "extra.charter"]
    return results, snapshot


def test_settings_reach_the_call_and_the_budget_step() -> None:
    results, _ = _results(TESTS)
    assert [r.failure for r in results] == [None] * 7
    budget = [r for r in results if any(x.kind == "budget" for x in r.decision.reasons)]
    assert len(budget) == 2  # the cost a micro-USD over the profile's cap, and the thread's


def test_a_setting_changed_changes_the_outcome() -> None:
    """Each setting matters: the same expectations fail once it is changed."""
    changed = {
        "spent 190 usd": "spent 190.000001 usd",  # the first refund is now over the cap
        'agent { name: "ops-bot" }': 'agent { name: "helper" }',
        "max_cost: 5": "max_cost: 5.5",
        'context { ci: "green" }': 'context { ci: "red" }',
    }
    for old, new in changed.items():
        results, _ = _results(TESTS.replace(old, new))
        assert any(not r.passed for r in results), old


def test_because_fails_with_the_reasons_given() -> None:
    text = TESTS.replace('because "denied by role `operator`"', 'because "no such reason"')
    results, _ = _results(text)
    failed = [r for r in results if not r.passed]
    assert len(failed) == 1
    assert failed[0].failure is not None
    assert (
        "no such reason" in failed[0].failure and "denied by role `operator`" in failed[0].failure
    )


def test_coverage_names_the_rules_and_hooks_no_test_reached() -> None:
    results, snapshot = _results(TESTS)
    ws = snapshot.workspace
    found = coverage(ws, results)
    reached = {(u.kind, u.name) for u in found.unreached}
    finance = [u.text for u in found.unreached if u.name == "finance"]
    assert finance == [u for u in finance if u.startswith("allow billing.invoice")] != []
    assert found.rules == sum(len(r.rules) for r in ws.roles.values())
    assert found.rules_reached + sum(u.kind == "rule" for u in found.unreached) == found.rules
    assert ("hook", "approve-merge") not in reached  # it paused the merge
    assert ("hook", "clamp-mail-search") in reached  # no call of these tests reached it
    everything = coverage(ws, run_tests(snapshot))
    assert everything.unreached == [] and everything.rules_reached == everything.rules


def test_charter_test_coverage_prints_and_writes_json(tmp_path: Path) -> None:
    (tmp_path / "p.charter").write_text(
        "toolset t {\n  tool a(n: int)\n  tool b(n: int)\n}\n"
        "role r {\n  allow t.a\n  allow t.b where args.n < 3\n}\n"
        "profile p {\n  roles r\n}\n"
        'test "a" {\n  profile p\n  expect allow t.a { n: 1 }\n}\n'
    )
    run = [sys.executable, "-m", "api.cli", "test", "--coverage", str(tmp_path)]
    done = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "coverage: 1 of 2 rules, 0 of 0 hooks decided a test's call" in done.stdout
    assert (
        f"not reached: {tmp_path}/p.charter:7:3: allow t.b where args.n < 3 (role `r`)"
        in done.stdout
    )
    done = subprocess.run(
        [*run, "--format", "json"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    shown = json.loads(done.stdout)["coverage"]
    assert shown["rules"] == {"reached": 1, "total": 2}
    assert shown["unreached"][0]["text"] == "allow t.b where args.n < 3"


WORKING_HOURS = """
toolset ops {
  tool deploy(env: str)
}
role deployer {
  allow ops.deploy where time.weekday in ["mon", "tue", "wed", "thu", "fri"] and time.hour >= 9 and time.hour < 17 and time.date < 20270101
}
profile ops {
  roles deployer
}
test "deploys in working hours, not at night, on saturdays or from 2027" {
  profile ops
  time "2026-12-04T10:30:00+01:00"
  expect allow ops.deploy { env: "prod" }
}
test "at night" {
  profile ops
  time "2026-12-04T22:30:00Z"
  expect deny ops.deploy { env: "prod" } because "no rule grants"
}
test "on a saturday" {
  profile ops
  time "2026-12-05T10:30:00.250Z"
  expect deny ops.deploy { env: "prod" }
}
test "from 2027" {
  profile ops
  time "2027-01-04T10:30:00Z"
  expect deny ops.deploy { env: "prod" }
}
"""


def test_a_tests_time_is_the_moment_its_calls_read() -> None:
    snapshot = compile_workspace(check_sources([("ops.charter", WORKING_HOURS)]))
    results = run_tests(snapshot)
    assert [r.failure for r in results] == [None] * 4
    moved = WORKING_HOURS.replace("2026-12-04T10:30:00+01:00", "2026-12-04T16:30:00+00:00")
    assert run_tests(compile_workspace(check_sources([("o", moved)])))[0].passed
    late = WORKING_HOURS.replace("2026-12-04T10:30:00+01:00", "2026-12-04T17:00:00Z")
    assert not run_tests(compile_workspace(check_sources([("o", late)])))[0].passed


RATED = """
toolset ops {
  tool ping(host: str)
}
role pinger {
  allow ops.ping
}
profile ops {
  roles pinger
  rate 3 calls per 1m
}
test "the third call of the minute passes" {
  profile ops
  called 2 times
  expect allow ops.ping { host: "a" }
}
test "the fourth does not" {
  profile ops
  called 3 times
  expect deny ops.ping { host: "a" } because "over the profile `ops` rate 3 calls per 1m"
}
test "without a count, the first" {
  profile ops
  expect allow ops.ping { host: "a" }
}
"""


def test_called_counts_against_the_profiles_rate() -> None:
    results = run_tests(compile_workspace(check_sources([("ops.charter", RATED)])))
    assert [r.failure for r in results] == [None] * 3
    assert [reason.kind for reason in results[1].decision.reasons][-1] == "rate"
