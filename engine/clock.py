"""The time a condition reads as `time.*`: the moment the call is decided, in UTC.

Conditions read it through `fields()`, never from the caller: a caller's `context` could
say any time, the server's clock cannot be told one. `charter test` and the properties
fix it for a block (`fixed(ms)`) so that what a test decides does not depend on when it
runs; a service decides at the time of its clock, fixed for each group of calls it
decides and logs together (api.service.core.one_moment), so that every condition of a
call reads the moment its log row gives.

| field | type | value |
| --- | --- | --- |
| `time.ms` | int | ms since the epoch |
| `time.year`, `time.month`, `time.day` | int | the date's parts (`month` 1-12) |
| `time.date` | int | the date as one number, `20261204`, so dates compare in order |
| `time.hour`, `time.minute` | int | the time of day (0-23, 0-59) |
| `time.weekday` | str | `mon`, `tue`, `wed`, `thu`, `fri`, `sat` or `sun` |
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from grammar.literals import moment_at

FIELDS: dict[str, str] = {
    "ms": "int", "year": "int", "month": "int", "day": "int", "date": "int",
    "hour": "int", "minute": "int", "weekday": "str",
}  # fmt: skip
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")

_FIXED: ContextVar[int | None] = ContextVar("charter_fixed_time", default=None)


def now_ms() -> int:
    fixed = _FIXED.get()
    return fixed if fixed is not None else int(time.time() * 1000)


@contextmanager
def fixed(ms: int) -> Iterator[None]:
    """Decide as if it were `ms` (ms since the epoch) inside the block."""
    token = _FIXED.set(ms)
    try:
        yield
    finally:
        _FIXED.reset(token)


def fields(ms: int | None = None) -> dict[str, Any]:
    """The `time` map at `ms` (default: now)."""
    at = now_ms() if ms is None else ms
    moment = moment_at(at)
    return {
        "ms": at, "year": moment.year, "month": moment.month, "day": moment.day,
        "date": moment.year * 10_000 + moment.month * 100 + moment.day,
        "hour": moment.hour, "minute": moment.minute, "weekday": WEEKDAYS[moment.weekday()],
    }  # fmt: skip


def read(parts: tuple[str, ...]) -> Any:
    """`time.<part>` (the checker admits only the FIELDS, one part deep)."""
    values = fields()
    return values if not parts else values[parts[0]]
