"""A fit check in a process of its own (engine.fit.isolated): stopped at its deadline
whatever z3 does, and otherwise the same answer as in this process."""

from __future__ import annotations

import random
import string
import threading
import time

import pytest

import engine.fit
from engine.fit import isolated
from engine.fit.result import FitResult
from policy.diagnostics import CharterError
from tests.fit.support import snapshot

CALLER = """
role mailer {
  allow mail.send where args.to endswith "@example.com"
}
profile caller { roles mailer }
"""


def _literal(rnd: random.Random, size: int) -> str:
    return "".join(rnd.choice(string.ascii_letters) for _ in range(size))


def pathological(seed: int = 1) -> str:
    """Seven `!=` of 4,000-character literals, under every size cap of the encoding: z3
    takes them in for about 7 s on this machine, deaf to its timeout and its interrupt."""
    rnd = random.Random(seed)
    tests = " and ".join(f'args.to != "{_literal(rnd, 4000)}"' for _ in range(7))
    return f"role r {{ allow mail.send where {tests} }}"


def test_a_pathological_check_is_stopped_at_its_deadline() -> None:
    snap, source = snapshot(CALLER), pathological()
    started = time.monotonic()
    result = isolated.run(engine.fit.fit_source, snap, "caller", source, timeout_ms=1000)
    took = time.monotonic() - started
    assert not result.fits
    assert [v.kind for v in result.violations] == ["timeout"]
    assert took < 1.0 + isolated.MARGIN_MS / 1000 + 0.5, took


def _deaf(*args: object, timeout_ms: int) -> FitResult:
    time.sleep(60)  # (as z3 taking in a long literal: deaf to every deadline)
    return FitResult.of([])


def test_a_check_that_does_not_stop_is_killed_at_its_deadline() -> None:
    started = time.monotonic()
    result = isolated.run(_deaf, timeout_ms=300)
    took = time.monotonic() - started
    assert result == isolated.out_of_time() and not result.fits
    assert 0.3 + isolated.MARGIN_MS / 1000 <= took < 0.3 + isolated.MARGIN_MS / 1000 + 0.5


def test_the_answer_is_the_one_made_here() -> None:
    snap = snapshot(CALLER)
    for source in (
        'role r { allow mail.send where args.to endswith "@example.com" and len(args.cc) == 0 }',
        'role r { allow mail.send where args.to endswith ".org" }',
        "role r { allow mail.search }",
    ):
        here = engine.fit.fit_source(snap, "caller", source)
        there = isolated.run(engine.fit.fit_source, snap, "caller", source, timeout_ms=2000)
        assert there == here
    assert not there.fits and there.violations[0].counterexample is not None


def test_bad_text_raises_its_diagnostics() -> None:
    with pytest.raises(CharterError) as raised:
        isolated.run(
            engine.fit.fit_source, snapshot(CALLER), "caller", "role r { allow nope.x }",
            timeout_ms=2000,
        )  # fmt: skip
    assert "no tool is named `nope.x`" in str(raised.value)


def _fails(*args: object, timeout_ms: int) -> FitResult:
    raise KeyError("a secret the text held")


def test_another_error_names_its_type_only() -> None:
    with pytest.raises(RuntimeError) as raised:
        isolated.run(_fails, timeout_ms=2000)
    assert str(raised.value) == "the fit check failed with KeyError"


def test_checks_run_side_by_side() -> None:
    # Each in its own process: one stuck in z3 holds nobody else's check.
    snap = snapshot(CALLER)
    answers: dict[str, tuple[FitResult, float]] = {}

    def check(name: str, source: str, timeout_ms: int) -> None:
        started = time.monotonic()
        found = isolated.run(engine.fit.fit_source, snap, "caller", source, timeout_ms=timeout_ms)
        answers[name] = (found, time.monotonic() - started)

    stuck = threading.Thread(target=check, args=("stuck", pathological(2), 3000))
    stuck.start()
    time.sleep(0.3)
    check("quick", 'role r { allow mail.send where args.to == "bob@example.com" }', 3000)
    stuck.join(10)
    assert answers["quick"][0].fits and answers["quick"][1] < 2.0
    # Stopped at its deadline, or by its memory cap first (z3 passes 1,024 MB on it within
    # about 2 s on a quiet machine): either way, does not fit.
    [stopped] = answers["stuck"][0].violations
    assert stopped.kind == "timeout" or (
        stopped.kind == "unsupported" and "out of memory" in stopped.message
    ), stopped


def _greedy(*args: object, timeout_ms: int) -> FitResult:
    hoard = [bytearray(16 << 20) for _ in range(256)]  # 4 GB, past any cap
    return FitResult(len(hoard) == 0)


def test_a_check_that_grows_past_its_memory_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolated, "MEMORY_MB", 64)
    assert isolated.run(_greedy, timeout_ms=5000) == isolated.out_of_memory()
    snap = snapshot(CALLER)  # and a real check fits in the same cap
    source = 'role r { allow mail.send where args.to endswith ".org" }'
    there = isolated.run(engine.fit.fit_source, snap, "caller", source, timeout_ms=5000)
    assert there == engine.fit.fit_source(snap, "caller", source)
