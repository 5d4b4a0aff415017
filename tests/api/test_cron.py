"""The cron parser (api.service.cron): what an expression matches, read from its
generated parts independently of the parser, and `next_run` against stepping minute by
minute over a bounded window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.service import cron
from api.service.errors import ServiceError

BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
WINDOW_MINUTES = 3 * 24 * 60  # the brute force's window: three days
# 2024 (a leap year) to 2031, so windows cross month ends, 29 February and year ends
SINCE = datetime(2024, 1, 1, tzinfo=UTC)
UNTIL = datetime(2031, 12, 31, tzinfo=UTC)


@st.composite
def item(draw: st.DrawFn, low: int, high: int) -> tuple[str, set[int]]:
    """A field's item as text, and the values it names (computed here, not by the parser)."""
    kind = draw(st.sampled_from(("star", "step", "one", "range", "range-step")))
    if kind == "star":
        return "*", set(range(low, high + 1))
    if kind == "step":
        step = draw(st.integers(1, high - low + 2))
        return f"*/{step}", set(range(low, high + 1, step))
    first = draw(st.integers(low, high))
    if kind == "one":
        return str(first), {first}
    last = draw(st.integers(first, high))
    if kind == "range":
        return f"{first}-{last}", set(range(first, last + 1))
    step = draw(st.integers(1, high - low + 2))
    return f"{first}-{last}/{step}", set(range(first, last + 1, step))


@st.composite
def expression(draw: st.DrawFn) -> tuple[str, list[set[int]], bool]:
    """An expression, each field's values, and whether both day fields are restricted."""
    texts: list[str] = []
    values: list[set[int]] = []
    for low, high in BOUNDS:
        items = draw(st.lists(item(low, high), min_size=1, max_size=3))
        texts.append(",".join(text for text, _ in items))
        values.append(set().union(*(named for _, named in items)))
    values[4] = {day % 7 for day in values[4]}
    either = not texts[2].startswith("*") and not texts[4].startswith("*")
    return " ".join(texts), values, either


def _matches(values: list[set[int]], either: bool, at: datetime) -> bool:
    minutes, hours, days, months, weekdays = values
    by_date, by_weekday = at.day in days, (at.isoweekday() % 7) in weekdays
    day = (by_date or by_weekday) if either else (by_date and by_weekday)
    return at.minute in minutes and at.hour in hours and at.month in months and day


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression(), st.datetimes(min_value=SINCE.replace(tzinfo=None),
                                  max_value=UNTIL.replace(tzinfo=None)))  # fmt: skip
def test_next_run_is_the_first_matching_minute_after_now(
    parsed: tuple[str, list[set[int]], bool], now: datetime
) -> None:
    text, values, either = parsed
    now = now.replace(tzinfo=UTC)
    found = cron.next_run(cron.parse(text), _ms(now))
    start = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    first = next((start + timedelta(minutes=step) for step in range(WINDOW_MINUTES)
                  if _matches(values, either, start + timedelta(minutes=step))), None)  # fmt: skip
    if first is not None:
        assert found == _ms(first), text
    else:  # none in the window: later than it (and a match), or none within a year
        end = start + timedelta(minutes=WINDOW_MINUTES)
        if found is not None:
            at = datetime.fromtimestamp(found / 1000, UTC)
            assert end <= at < start + cron.HORIZON and _matches(values, either, at), text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=" *,-/0123456789x\t", max_size=40))
def test_any_text_parses_or_is_invalid_cron(text: str) -> None:
    try:
        cron.parse(text)
    except ServiceError as error:
        assert error.code == "invalid-cron"


@pytest.mark.parametrize(
    ("text", "now", "expected"),
    [
        ("0 0 29 2 *", datetime(2027, 6, 1, tzinfo=UTC), datetime(2028, 2, 29, tzinfo=UTC)),
        ("0 0 29 2 *", datetime(2025, 3, 1, tzinfo=UTC), None),  # 2028: more than a year
        ("0 0 31 2 *", datetime(2025, 1, 1, tzinfo=UTC), None),  # never
        ("0 0 31 * *", datetime(2025, 1, 31, 0, 0, 30, tzinfo=UTC),
         datetime(2025, 3, 31, tzinfo=UTC)),  # (strictly after now's minute)
        ("59 23 31 12 7", datetime(2025, 12, 31, 23, 58, tzinfo=UTC),
         datetime(2025, 12, 31, 23, 59, tzinfo=UTC)),  # a Wednesday: either day field
        ("0 12 * * 0", datetime(2025, 12, 4, tzinfo=UTC), datetime(2025, 12, 7, 12, tzinfo=UTC)),
        ("0 12 * * 7", datetime(2025, 12, 4, tzinfo=UTC), datetime(2025, 12, 7, 12, tzinfo=UTC)),
    ],
)  # fmt: skip
def test_far_and_edge_runs(text: str, now: datetime, expected: datetime | None) -> None:
    found = cron.next_run(cron.parse(text), _ms(now))
    assert found == (None if expected is None else _ms(expected))


@pytest.mark.parametrize(
    "text",
    ["", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * 32 * *",
     "* * * 0 *", "* * * 13 *", "* * * * 8", "5-1 * * * *", "*/0 * * * *", "5/2 * * * *",
     "1,,2 * * * *", "a * * * *", "-1 * * * *", "1- * * * *", "*5 * * * *", "１ * * * *",
     "1-2-3 * * * *", "* * * * *\x00", "*/99999 * * * *", "* " * 200],
)  # fmt: skip
def test_invalid(text: str) -> None:
    with pytest.raises(ServiceError) as caught:
        cron.parse(text)
    assert caught.value.code == "invalid-cron"
