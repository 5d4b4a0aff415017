"""docs/design.md section 2 step 6: budgets. Every cap in the chain must hold.

The chain is the agent, then its parent agent, and so on: each contributes its profile's
budget (read from the revision deciding the call, else, for an ancestor's profile that
revision does not declare, from the latest) and its own budget. A thread's
`max_cost` is one more cap. A profile's budget caps each agent on it separately. An
allowed call with an expected cost is charged to the agent, every ancestor and the
thread, so a child's spending counts against every ancestor's caps.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

from api.records import Agent, Thread
from api.service.errors import ErrorCode, ServiceError
from engine.compile import Snapshot
from policy.money import (
    MAX_MICROS,
    MAX_USD,
    MICROS,
    WINDOWS_MS,
    Cap,
    cap_micros,
    decimal_amount,
    over_cap,
    profile_cap,
    thread_cap,
    to_micros,
)
from policy.store import Store

# (the money arithmetic lives in policy/money.py, shared with `charter test`)
__all__ = [
    "MAX_MICROS", "MAX_USD", "MICROS", "WINDOWS_MS", "Cap", "cap_micros", "over_cap", "to_micros",
]  # fmt: skip

MAX_CHAIN = 64  # an ancestor chain longer than this is a cycle or an abuse: stop there
# An amount a request gives as a string is read only when the string holds what a JSON
# number may: Decimal() took `٥` as 5, `1_0` as 10, ` 5 ` as 5 and `+5`, `.5` and `5.`,
# none of which the same amount sent as a number may be. ASCII digits only (`[0-9]`, not
# `\d`), and fullmatch, as `$` matches before a final newline.
_AMOUNT_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
AMOUNT_FORM = (
    "a string amount must be written as a JSON number is: ASCII digits, an optional `.` and "
    "digits, an optional exponent (`5`, `0.25`, `1e3`); no spaces, `+`, `_` or other digits"
)


def amount_text(text: str) -> str:
    """`text`, a string amount a request gave, if it is written as a JSON number is;
    ValueError saying what an amount looks like if not."""
    if _AMOUNT_TEXT.fullmatch(text) is None:
        raise ValueError(AMOUNT_FORM)
    return text


def parse_usd(value: Any, code: ErrorCode, field: str) -> str:
    """An amount a request gave (a budget's, a thread's `max_cost`) as it is stored: a
    number from 0 to MAX_USD (a string: written as a JSON number, `amount_text`), else
    `code` saying `field` must be one."""
    if isinstance(value, str) and _AMOUNT_TEXT.fullmatch(value) is None:
        raise ServiceError(
            code, f"{field} must be a number from 0 to {MAX_USD} USD", help=AMOUNT_FORM
        )
    try:
        to_micros(value)  # (ValueError: not a finite number, or past MAX_USD either way)
        # The number's own sign, not its micro-USD's: one just under 0 (`-0.0000001`)
        # rounds up to 0 and was stored, a cap of -1 micro-USD rounded down (no call passed).
        if decimal_amount(value) < 0:
            raise ValueError
    except ValueError:
        raise ServiceError(code, f"{field} must be a number from 0 to {MAX_USD} USD") from None
    return str(Decimal(str(value)))


def agent_cap(agent: Agent | None) -> tuple[Decimal, str] | None:
    budget = None if agent is None else agent.budget
    if budget is None:
        return None
    return Decimal(budget.amount), budget.period


def ancestors(agent: Agent, load_agent: Callable[[str], Agent | None]) -> Iterator[Agent]:
    """`agent`, then its parent, its parent's parent, ... up to a root (or a parent that is
    gone); a chain that comes back on itself or runs past MAX_CHAIN stops there."""
    current: Agent | None = agent
    seen: set[str] = set()
    while current is not None and len(seen) < MAX_CHAIN and current.id not in seen:
        seen.add(current.id)
        yield current
        current = load_agent(current.parent) if current.parent else None


def caps_for(
    snapshot: Snapshot,
    agent: Agent,
    thread: Thread | None,
    load_agent: Callable[[str], Agent | None],
    latest: Snapshot | None = None,
) -> tuple[list[Cap], list[str]]:
    """(caps to check, ledger subjects to charge) for a call by `agent`. `latest`: the
    latest revision, for a call a turn decides on an older one (`snapshot`): an ancestor
    moved since to a profile `snapshot` does not declare is capped by its budget there
    (left out, the turn's calls spent past it until the turn ended)."""
    caps: list[Cap] = []
    subjects: list[str] = []
    for current in ancestors(agent, load_agent):
        subject = f"agent:{current.id}"
        subjects.append(subject)
        profile = snapshot.served.profiles.get(current.profile)
        if profile is None and latest is not None:
            profile = latest.served.profiles.get(current.profile)
        if profile is not None and profile.budget is not None:
            budget = profile.budget
            caps.append(profile_cap(subject, profile.name, budget.amount, budget.period))
        own = agent_cap(current)
        if own is not None:
            caps.append(
                Cap(
                    subject,
                    cap_micros(own[0]),
                    own[1],
                    f"agent `{current.id}` budget {own[0]} USD per {own[1]}",
                )
            )
    if thread is not None:
        subject = f"thread:{thread.id}"
        subjects.append(subject)
        if thread.max_cost is not None:
            caps.append(thread_cap(thread.id, thread.max_cost))
    return caps, subjects


class Ledger:
    """The store's budget ledger as one batch sees it, inside one write transaction.

    Sums are read once per (subject, window start) and kept up to date with the batch's
    own charges: the store holds each subject the transaction read until it ends
    (policy.store.Ledger), so nobody else charges it meanwhile, and a batch of 1,000
    calls by one agent costs one query per cap instead of 1,000. `charge_within` is the
    check and the charge of one call, atomic for the same reason."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._sums: dict[tuple[str, int], int] = {}

    def spent(self, subject: str, since_ms: int) -> int:
        key = (subject, since_ms)
        total = self._sums.get(key)
        if total is None:
            total = self._sums[key] = self.store.spent(subject, since_ms)
        return total

    def charge(self, subjects: list[str], micros: int, at_ms: int) -> None:
        self.store.charge(subjects, micros, at_ms)
        charged = set(subjects)
        for key in list(self._sums):
            if key[0] not in charged:
                continue
            if at_ms >= key[1]:
                self._sums[key] += micros
            else:
                # The store may record the charge later than `at_ms` (at its subject's last
                # row's time, policy/store/ledger.py), inside this window: read it again.
                del self._sums[key]


def charge_within(
    ledger: Ledger, caps: list[Cap], subjects: list[str], cost_micros: int, now_ms: int
) -> Cap | None:
    """Check and charge, as one: the first cap `cost_micros` would pass (nothing charged),
    or None once every subject is charged. Inside the batch's transaction, which holds
    each cap's subject from its check on (see Ledger)."""
    cap = over_cap(ledger, caps, cost_micros, now_ms)
    if cap is None:
        ledger.charge(subjects, cost_micros, now_ms)
    return cap
