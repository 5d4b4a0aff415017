"""A pytest plugin for `make fuzz`: every hypothesis property, and nothing else, within a
time budget (`pytest -p tests.fuzz.budget`).

- Only the tests hypothesis drives are kept (the rest of `make test` is left out).
- CHARTER_FUZZ_SECONDS is the session's budget. Each property, as it starts, gets an
  equal share of what is left (what one finishes early, the rest share); once its share
  is spent, hypothesis generates no more examples (its runner's `should_generate_more`,
  wrapped: an internal of hypothesis, the one place that ends a run as `max_examples`
  does) and the test passes, "stopped by the budget". A property that has failed is
  never stopped: hypothesis shrinks the failure to its minimal example (and saves it:
  tests/conftest.py's database) before the test ends. An example that runs past its
  share by LAST_RESORT ends the test from inside the next one.
- Its examples are counted as hypothesis runs the test's body (invalid ones included),
  and written with its time, outcome and failure text to CHARTER_FUZZ_STATS (JSON),
  after each test, so a run killed from outside still says how far it got.
"""

from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis.internal.conjecture.engine import ConjectureRunner

# A property runs at least this many examples, whatever its share: its first ones pay
# for what its generators and caches set up.
MIN_EXAMPLES = 5


# Past its share by this much (an example that does not return to hypothesis's loop),
# the test is ended from inside its next example instead.
LAST_RESORT = 60.0
_CURRENT: dict[str, Any] = {"deadline": float("inf"), "entry": {"examples": 0}}


def _should_generate_more(runner: Any) -> bool:
    """hypothesis's own test for "another example?", with the budget: past the running
    property's share (and its first examples), no, unless it has found a failure, which
    it then shrinks and reports as ever. The run ends as at `max_examples`."""
    entry = _CURRENT["entry"]
    found = getattr(runner, "interesting_test_cases", None) or getattr(
        runner, "interesting_examples", None
    )
    if not found and entry["examples"] >= MIN_EXAMPLES and time.monotonic() > _CURRENT["deadline"]:
        entry["stopped_by_budget"] = True
        return False
    return bool(_GENERATE_MORE(runner))


_GENERATE_MORE = ConjectureRunner.should_generate_more
ConjectureRunner.should_generate_more = _should_generate_more  # type: ignore[method-assign, assignment]


class BudgetSpent(BaseException):
    """Not an Exception: hypothesis lets it through as it would KeyboardInterrupt, and the
    test ends at once, without a failure to shrink or save."""


class _Budget:
    def __init__(self) -> None:
        self.until = time.monotonic() + float(os.environ.get("CHARTER_FUZZ_SECONDS", "60"))
        self.path = os.environ.get("CHARTER_FUZZ_STATS")
        self.left = 0
        self.stats: dict[str, dict[str, Any]] = {}

    def save(self) -> None:
        if self.path:
            Path(self.path).write_text(json.dumps(self.stats, indent=1))


BUDGET = _Budget()


def _is_property(item: pytest.Item) -> bool:
    return hasattr(getattr(item, "obj", None), "hypothesis")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept = [item for item in items if _is_property(item)]
    config.hook.pytest_deselected(items=[item for item in items if not _is_property(item)])
    items[:] = kept
    BUDGET.left = len(kept)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    now = time.monotonic()
    share = max(1.0, (BUDGET.until - now) / max(1, BUDGET.left))
    BUDGET.left -= 1
    entry: dict[str, Any] = {"examples": 0, "share_s": round(share, 1), "outcome": "running",
                             "stopped_by_budget": False, "failed": False}  # fmt: skip
    # What it checks: its docstring's first paragraph, else its module's.
    doc = getattr(item, "function", None).__doc__ or getattr(item.module, "__doc__", "") or ""  # type: ignore[attr-defined]
    doc = " ".join(doc.split("\n\n")[0].split())
    entry["doc"] = doc
    BUDGET.stats[item.nodeid] = entry
    entry["started"] = now
    deadline = now + share
    _CURRENT["deadline"], _CURRENT["entry"] = deadline, entry
    handle = item.obj.hypothesis  # type: ignore[attr-defined]
    inner = handle.inner_test

    @functools.wraps(inner)  # (hypothesis shows a failing example as a call of it)
    def counted(*args: Any, **kwargs: Any) -> Any:
        if not entry["failed"] and time.monotonic() > deadline + LAST_RESORT:
            entry["stopped_by_budget"] = True
            raise BudgetSpent
        entry["examples"] += 1
        try:
            return inner(*args, **kwargs)
        except Exception as exc:
            if type(exc).__name__ not in ("UnsatisfiedAssumption", "StopTest"):
                entry["failed"] = True
            raise

    handle.inner_test = counted
    item.stash[_INNER] = (handle, inner)
    _measure_as(item.nodeid)


def _measure_as(nodeid: str) -> None:
    """Under coverage.py (tests/fuzz/run.py), the lines run from here on are the test's."""
    try:
        import coverage
    except ImportError:
        return
    current = coverage.Coverage.current()
    if current is not None:
        current.switch_context(nodeid)


_INNER = pytest.StashKey[tuple[Any, Any]]()


def _spent(exc: BaseException | None) -> bool:
    """BudgetSpent, or raised while it went up: a test drawing from `st.data()` stopped
    before its draws, which hypothesis reports as a FlakyStrategyDefinition on the way."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, BudgetSpent):
            return True
        exc, seen = exc.__context__ or exc.__cause__, seen + 1
    return False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if call.excinfo is not None and _spent(call.excinfo.value):
        report.outcome = "passed"
        report.longrepr = None
    entry = BUDGET.stats.get(item.nodeid)
    if entry is None:
        return
    if report.when == "call" or report.failed:
        entry["outcome"] = report.outcome
        entry["seconds"] = round(time.monotonic() - entry.pop("started", time.monotonic()), 1)
        if report.failed:
            entry["failure"] = report.longreprtext[-6000:]
        BUDGET.save()
    if report.when == "teardown":
        saved = item.stash.get(_INNER, None)
        if saved is not None:
            saved[0].inner_test = saved[1]
