"""A draft: a workspace sent whole by the console's policy playground, checked, linted,
decided against and tested as `charter check`, `decide`, `explain` and `test` do it for
a directory, and never stored. Nothing here writes: a draft's decisions are not logged,
its revision is no revision, and the latest policy stays what it was.

Each function is the slow part of a draft request (checking and compiling its files,
seconds for a large policy) and runs on a worker thread, as the check of an upload does
(api.http.policy); the solver's parts (the lints' questions, the fit check) run in a
process of their own through the solver's gate (api.service.solver).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from api.service.core import Service
from api.service.redaction import hidden_for, redact, redacted_trace
from engine.compile import Snapshot
from engine.coverage import coverage
from engine.decision import Request
from engine.lints import LintOptions, lint
from engine.testing import ExpectResult, run_tests
from engine.workspace import Workspace
from policy.diagnostics import Diagnostic

Files = Sequence[tuple[str, str]]
# What a draft's solver lints may take together (each question LINT_CHECK_MS at most): a
# check as the author types is asked again at each pause, and waits for this at worst.
LINT_MS = 1500
LINT_CHECK_MS = 300
# The lints without the solver: what a check answers when the solver's are cut short.
PLAIN_LINTS = LintOptions(solver=False)


def workspace(service: Service, files: Files) -> Workspace:
    """`files` checked (raises CharterError with every diagnostic; `policy-too-large`
    past the size cap), against the newest compiled policy: what did not change is not
    checked again."""
    return service.check(files, service.snapshots.newest())


def compiled(service: Service, files: Files) -> Snapshot:
    """`files` checked and compiled, a snapshot of their own that no upload takes."""
    return service.compile(files)


def solver_lints(ws: Workspace, *, timeout_ms: int) -> list[Diagnostic]:
    """Every lint, the solver's questions bounded by `timeout_ms` in all (run in a
    process of its own that is killed past it: engine.fit.isolated)."""
    return lint(ws, LintOptions(check_ms=min(LINT_CHECK_MS, timeout_ms), total_ms=timeout_ms))


def plain_lints(ws: Workspace) -> list[Diagnostic]:
    return lint(ws, PLAIN_LINTS)


def diagnostics(ws: Workspace, lints: list[Diagnostic]) -> list[dict[str, Any]]:
    """The checker's warnings and the lints', in file order, as `charter check --format
    json` gives them."""
    found = sorted([*ws.warnings, *lints], key=Diagnostic.sort_key)
    return [d.to_json() for d in found]


def decide(snapshot: Snapshot, request: Request) -> dict[str, Any]:
    """The decision of `request` and its trace (`charter explain`), the call's secret
    arguments `[redacted]` in both, as `charter decide` prints them."""
    decision, hidden, trace = redacted_trace(snapshot, request)
    shown = {**decision.to_json(), "args": redact(hidden, decision.args)}
    return {"decision": shown, "trace": trace}


def _shown_result(snapshot: Snapshot, result: ExpectResult) -> dict[str, Any]:
    document = result.to_json()
    hidden = hidden_for(snapshot, result.expect.tool, result.decision)
    document["decision"]["args"] = redact(hidden, result.decision.args)
    return document


def test(snapshot: Snapshot, with_coverage: bool) -> dict[str, Any]:
    """The test blocks' results as `charter test --format json` gives them (each call's
    secret arguments `[redacted]`), with the checker's warnings."""
    results = run_tests(snapshot)
    passed = sum(r.passed for r in results)
    document: dict[str, Any] = {
        "passed": passed,
        "failed": len(results) - passed,
        "results": [_shown_result(snapshot, r) for r in results],
    }
    if with_coverage:
        document["coverage"] = coverage(snapshot.workspace, results).to_json()
    document["warnings"] = [d.to_json() for d in snapshot.workspace.warnings]
    return document
