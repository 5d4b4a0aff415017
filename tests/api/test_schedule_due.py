"""When a schedule runs (api.service.scheduledue), as a function of the tick's time: no
sleeping. A runner that ticks at least every minute runs every matching minute exactly
once, in order; one that was down runs a missed stretch once, at its first tick after,
and skips the rest of it; nothing runs before its time."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from api.service import cron
from api.service.scheduledue import Step, step

MINUTE = 60_000
T0 = int(datetime(2028, 2, 28, 23, 0, tzinfo=UTC).timestamp()) * 1000  # (a leap day ahead)
CRONS = ("* * * * *", "*/7 * * * *", "0,30 23,0 * * *", "59 23 28-29 2 *", "0 0 1 3 *",
         "*/15 0-1 * * 2")  # fmt: skip


def _made(expression: str, at: int) -> dict[str, object]:
    """A schedule as `schedules.create` stores it at `at`."""
    return {"id": "s", "agent": "a", "cron": expression, "prompt": "p",
            "next_run": cron.next_run(cron.parse(expression), at)}  # fmt: skip


def _apply(doc: dict[str, object], found: Step | None) -> int | None:
    """`found` taken, as `schedulerun.claim` takes it: the due time it ran, if any."""
    if found is None:
        return None
    assert found.holds(doc)
    doc["next_run"] = found.next_run
    return found.due


def test_a_due_time_runs_once_and_moves_on() -> None:
    doc = _made("*/5 * * * *", T0 + 1)
    due = doc["next_run"]
    assert due == T0 + 5 * MINUTE
    assert step(doc, T0 + 5 * MINUTE - 1) is None  # (a millisecond early: nothing)
    found = step(doc, T0 + 5 * MINUTE)
    assert found is not None and found.run and found.due == due
    assert found.next_run == T0 + 10 * MINUTE
    _apply(doc, found)
    assert step(doc, T0 + 5 * MINUTE + 30_000) is None  # (the same minute again: done)
    # a claim made from a stale read fails once another runner has taken the due time
    assert not found.holds(doc)


def test_a_server_down_for_a_stretch_runs_it_once() -> None:
    doc = _made("* * * * *", T0)  # due every minute
    first = doc["next_run"]
    later = T0 + 90 * MINUTE + 12_345  # back an hour and a half later
    found = step(doc, later)
    assert found is not None and found.due == first  # the first missed time, once
    _apply(doc, found)
    assert doc["next_run"] == (later // MINUTE + 1) * MINUTE  # the rest skipped
    assert step(doc, later + 1_000) is None


def test_no_time_within_a_year_and_a_schedule_without_next_run() -> None:
    never = _made("0 0 31 2 *", T0)
    assert never["next_run"] is None and step(never, T0 + 10**9) is None
    # 29 February 2032 is more than a year after T0 + a year: found once within the year
    leap = _made("0 12 29 2 *", T0 + 2 * MINUTE * 60 * 24)  # (just past 29 Feb 2028)
    assert leap["next_run"] is None
    soon = int(datetime(2031, 6, 1, tzinfo=UTC).timestamp()) * 1000
    found = step(leap, soon)
    assert found is not None and not found.run
    assert found.next_run == int(datetime(2032, 2, 29, 12, 0, tzinfo=UTC).timestamp()) * 1000
    # stored without next_run (a charter that did not run schedules): its first next_run
    # from the first tick, nothing run
    old = {"id": "s", "agent": "a", "cron": "0 * * * *", "prompt": "p"}
    found = step(old, T0 + 1)
    assert found is not None and found.missing and not found.run
    assert found.holds(old) and not found.holds({**old, "next_run": None})
    assert found.next_run == T0 + 60 * MINUTE


@settings(max_examples=120, deadline=None)
@given(
    expression=st.sampled_from(CRONS),
    gaps=st.lists(st.integers(1, 3 * MINUTE), min_size=1, max_size=120),
)
def test_each_tick_runs_the_first_minute_since_the_last(expression: str, gaps: list[int]) -> None:
    """Ticks at any times (gaps of a millisecond to three minutes): each runs the first
    minute the cron matches since the tick before, if there is one (found here by brute
    force, minute by minute), and no other: a runner that ticks at least once a minute
    runs every matching minute, once each, in order; a longer gap runs one of its minutes
    and skips the rest."""
    parsed = cron.parse(expression)
    doc = _made(expression, T0)
    tick, ran = T0, []
    for gap in gaps:
        now = tick + gap
        matching = [
            m for m in range((tick // MINUTE + 1) * MINUTE, now + 1, MINUTE)
            if parsed.matches(datetime.fromtimestamp(m / 1000, UTC))
        ]  # fmt: skip
        due = _apply(doc, step(doc, now))
        assert due == (matching[0] if matching else None), (tick, now, matching)
        stored = doc["next_run"]
        assert isinstance(stored, int) and stored > now  # (each of CRONS matches within a year)
        if due is not None:
            ran.append(due)
        tick = now
    assert ran == sorted(set(ran))
