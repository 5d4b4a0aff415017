"""Money in the ledger's units: amounts in micro-USD, caps and their windows.

What the service's budget step (api/service/budget.py, docs/design.md section 2 step 6)
and `charter test` (engine/testing.py) both read, so a test decides a budget as the
service does: a cost rounds up to whole micro-USD and a cap rounds down, and a call
passes a cap while what was spent in the cap's window plus the call's cost is within it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, InvalidOperation
from typing import Protocol

WINDOWS_MS = {
    "1m": 60_000, "1h": 3_600_000, "24h": 86_400_000, "7d": 7 * 86_400_000, "total": None,
}  # fmt: skip
MICROS = Decimal(1_000_000)
_ONE_MICRO = Decimal("0.000001")
# The largest amount a request may give (an `expected_cost`, a budget's amount, a
# thread's `max_cost`): a billion USD, 10^15 micro-USD, so one charge is far inside the
# ledger's signed 64-bit integers (9.2 * 10^18) and a sum overflows only after 9,223
# charges of that size (`Store.spent` then says SPENT_OVERFLOW: over every cap).
MAX_USD = Decimal(1_000_000_000)
MAX_MICROS = (1 << 63) - 1  # the ledger's integers; no cap is above it
_MAX_CAP_USD = Decimal(MAX_MICROS) / MICROS  # exact: 9223372036854.775807


@dataclass(frozen=True, slots=True)
class Cap:
    subject: str  # the ledger subject: `agent:<id>` or `thread:<id>`
    micros: int
    period: str
    label: str  # what a denial says: "profile `support` budget 5 USD per 24h"


class Spending(Protocol):
    """What a cap is checked against: micro-USD charged to a subject since a time."""

    def spent(self, subject: str, since_ms: int) -> int: ...


def profile_cap(subject: str, profile: str, amount: Decimal, period: str) -> Cap:
    """A profile's `budget`, capping the agent `subject`."""
    label = f"profile `{profile}` budget {amount} USD per {period}"
    return Cap(subject, cap_micros(amount), period, label)


def thread_cap(thread: str, max_cost: Decimal | str) -> Cap:
    """A thread's `max_cost`, over everything charged to it."""
    return Cap(
        f"thread:{thread}",
        cap_micros(max_cost),
        "total",
        f"thread `{thread}` max_cost {max_cost} USD",
    )


def rate_cap(agent: str, profile: str, calls: int, period: str) -> Cap:
    """A profile's `rate`: allowed calls counted for the agent, one unit each."""
    label = f"profile `{profile}` rate {calls} calls per {period}"
    return Cap(f"calls:{agent}", calls, period, label)


def over_rate(cap: Cap) -> str:
    """What a call past a `rate` is denied with."""
    return f"the call is over the {cap.label}"


def over_cap(
    ledger: Spending, caps: list[Cap], cost_micros: int, now_ms: int | None = None
) -> Cap | None:
    """The first cap the expected cost would exceed, or None. A store's ledger: call it
    inside store.atomic()."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    for cap in caps:
        window = WINDOWS_MS[cap.period]
        since = 0 if window is None else now - window
        if ledger.spent(cap.subject, since) + cost_micros > cap.micros:
            return cap
    return None


def decimal_amount(amount: Decimal | str | int | float) -> Decimal:
    """An amount as a finite Decimal; ValueError if it is not one."""
    try:
        value = Decimal(str(amount))
    except InvalidOperation:
        raise ValueError("not a number") from None
    if not value.is_finite():
        raise ValueError("not a finite number")
    return value


def to_micros(amount: Decimal | str | int | float) -> int:
    """An amount a request gave, in micro-USD, rounded up: a cost is charged in whole
    micro-USD, and a cost of 0.0000004 rounded to the nearest would be charged 0, so any
    number of them would pass any cap (a cap rounds down, `cap_micros`). ValueError for
    a value that is not a finite number or is past MAX_USD either way: compared before
    any scaling, so `1e999990` costs a comparison, not a million-digit integer."""
    value = decimal_amount(amount)
    if value.copy_abs() > MAX_USD:
        raise ValueError(f"more than {MAX_USD} USD")
    return _scaled(value, ROUND_CEILING)


def cap_micros(amount: Decimal | str | int | float) -> int:
    """A cap in micro-USD: a profile's budget written in the policy, or an agent's or a
    thread's stored one (stored before MAX_USD bounded them, it may be larger), rounded
    down to whole micro-USD, as costs round up. A cap at or past the ledger's integers is
    MAX_MICROS, which no sum the ledger can hold exceeds."""
    value = decimal_amount(amount)
    if value.copy_abs() >= _MAX_CAP_USD:  # compared before scaling, as in to_micros
        return MAX_MICROS if value > 0 else -MAX_MICROS
    return _scaled(value, ROUND_FLOOR)


def _scaled(value: Decimal, rounding: str) -> int:
    """`value` USD in whole micro-USD, rounded once, exactly, the way `rounding` says.
    Not `value * 10^6` then rounded: the product is first rounded to the context's 28
    digits, to the nearest, so 1.0000000000000000000000000000001 USD would become
    1,000,000 micro-USD as a cost (a call a hair over a 1 USD cap would pass it) and a
    cap of 0.9999999999999999999999999999999 USD 1,000,000 as well; and 1e-1000000000
    scaled is past Decimal's exponents, 0. Quantizing rounds the digits past the sixth
    decimal alone, and the result (at most 19 digits, both callers bound `value`) fits
    the context; scaling it by 10^6 is then exact."""
    return int(value.quantize(_ONE_MICRO, rounding=rounding).scaleb(6))
