"""A standard 5-field cron expression and the next UTC minute it matches.

The fields, separated by spaces, are minute (0-59), hour (0-23), day of the month (1-31),
month (1-12) and day of the week (0-7, where both 0 and 7 are Sunday). A field is a list
of items joined by `,`; an item is `*`, a number `a`, a range `a-b` (a <= b), or `*` or a
range followed by a step `/n` (n >= 1). Numbers are ASCII digits. Anything else, or a
number out of its field's bounds, is `invalid-cron`.

As in the common cron daemons, when both the day of the month and the day of the week are
restricted (neither field starts with `*`), a day matches when either one does; otherwise
a day matches when both do.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from api.service.errors import ServiceError

MAX_CRON_CHARS = 256
# How far ahead `next_run` looks: a year and a day (a leap year's 29 February included).
HORIZON = timedelta(days=366)
_MINUTE_MS = 60_000
_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of the month", 1, 31),
           ("month", 1, 12), ("day of the week", 0, 7))  # fmt: skip
_HELP = "a cron expression is 5 fields: minute hour day-of-month month day-of-week, as `*/15 9-17 * * 1-5`"


def _bad(why: str) -> ServiceError:
    return ServiceError("invalid-cron", f"the cron expression {why}", help=_HELP)


@dataclass(frozen=True)
class Cron:
    """A parsed expression: each field's set of values (Sunday is 0 only)."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    either_day: bool  # both day fields restricted: a day matches when either one does

    def day_matches(self, day: datetime) -> bool:
        if day.month not in self.months:
            return False
        by_date = day.day in self.days
        by_weekday = (day.isoweekday() % 7) in self.weekdays  # (Sunday: 0)
        return (by_date or by_weekday) if self.either_day else (by_date and by_weekday)

    def matches(self, at: datetime) -> bool:
        """Whether the minute `at` (UTC) is one the expression names."""
        return at.minute in self.minutes and at.hour in self.hours and self.day_matches(at)


def _number(text: str, name: str, low: int, high: int) -> int:
    if not text or not text.isascii() or not text.isdigit() or len(text) > 4:
        raise _bad(f"has `{text}` in its {name} field, not a number")
    value = int(text)
    if not low <= value <= high:
        raise _bad(f"has {value} in its {name} field, outside {low}-{high}")
    return value


def _field(text: str, name: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):
        span, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not step_text.isascii() or not step_text.isdigit() or len(step_text) > 4:
                raise _bad(f"has the step `{step_text}` in its {name} field, not a number")
            step = int(step_text)
            if step < 1:
                raise _bad(f"has the step 0 in its {name} field")
        if span == "*":
            first, last = low, high
        elif "-" in span:
            a, _, b = span.partition("-")
            first, last = _number(a, name, low, high), _number(b, name, low, high)
            if first > last:
                raise _bad(
                    f"has the range `{span}` in its {name} field, whose start is after its end"
                )
        else:
            first = last = _number(span, name, low, high)
            if slash:
                raise _bad(f"has a step after the single value `{span}` in its {name} field")
        values.update(range(first, last + 1, step))
    return frozenset(values)


def parse(expression: str) -> Cron:
    """The expression, or `invalid-cron` saying which field is wrong and why."""
    if len(expression) > MAX_CRON_CHARS:
        raise _bad(f"has {len(expression)} characters, more than {MAX_CRON_CHARS}")
    if not expression.isascii() or any(not char.isprintable() for char in expression):
        raise _bad("has a character that is not printable ASCII")
    fields = expression.split()
    if len(fields) != len(_FIELDS):
        raise _bad(f"`{expression}` has {len(fields)} fields, not 5")
    sets = [_field(text, *spec) for text, spec in zip(fields, _FIELDS, strict=True)]
    weekdays = frozenset(day % 7 for day in sets[4])
    either = not fields[2].startswith("*") and not fields[4].startswith("*")
    return Cron(sets[0], sets[1], sets[2], sets[3], weekdays, either)


def next_run(cron: Cron, after_ms: int) -> int | None:
    """The first minute (ms since the epoch, UTC) after `after_ms` that `cron` matches,
    or None when none does within HORIZON of it."""
    start = datetime.fromtimestamp((after_ms // _MINUTE_MS + 1) * 60, UTC)
    end = start + HORIZON
    hours, minutes = sorted(cron.hours), sorted(cron.minutes)
    day = start.replace(hour=0, minute=0)
    while day < end:
        if cron.day_matches(day):
            for hour in hours:
                for minute in minutes:
                    at = day.replace(hour=hour, minute=minute)
                    if at >= end:
                        return None
                    if at >= start:
                        return int(at.timestamp()) * 1000
        day += timedelta(days=1)
    return None
