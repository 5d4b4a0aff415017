"""What an agent and a thread have spent, per budget window (`GET /v1/agents/{id}/spending`,
`GET /v1/threads/{id}/spending`: the built-in tools `agents.spending` and
`threads.spending`).

Each window (`24h`, `7d`, `total`) gives what the ledger holds charged to the agent (its
own calls and its descendants': a child's spending counts against every ancestor's caps)
or to the thread within it, the tightest cap of that window that applies to it, and what
is left under that cap (never below 0). An agent's caps are its profile's budget, in the
latest revision, and its own; a thread's is its `max_cost`, a `total`. Amounts are USD,
as decimal strings, exact to the micro-USD the ledger counts in.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from api import commands as c
from api.records import Thread
from api.service.budget import WINDOWS_MS, agent_cap, cap_micros
from api.service.core import Service, now_ms
from api.service.ops import Operation, Outcome, Result
from api.service.threads import reach_thread
from api.service.tokens import Principal
from policy.store import SPENT_OVERFLOW


def usd(micros: int) -> str:
    """`micros` micro-USD as a USD amount's text: `0.6`, `10`, `0.000001`."""
    text = format(Decimal(micros).scaleb(-6), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _windows(service: Service, subject: str, caps: dict[str, int]) -> dict[str, Any]:
    """Each window's spent, cap and remaining for ledger `subject`; `caps`: the tightest
    cap (micro-USD) of each window that has one."""
    now = now_ms()
    out: dict[str, Any] = {}
    for period, window in WINDOWS_MS.items():
        spent = service.store.spent(subject, 0 if window is None else now - window)
        cap = caps.get(period)
        over = spent == SPENT_OVERFLOW  # (past 64 bits: past every cap)
        out[period] = {
            "spent": None if over else usd(spent),
            "cap": None if cap is None else usd(cap),
            "remaining": None if cap is None else usd(0 if over else max(0, cap - spent)),
        }
    return out


def _tightest(found: list[tuple[int, str]]) -> dict[str, int]:
    caps: dict[str, int] = {}
    for micros, period in found:
        caps[period] = min(micros, caps.get(period, micros))
    return caps


def agents_spending(service: Service, actor: Principal, command: c.AgentSpending) -> Result:
    agent = service.agent(command.id)
    found: list[tuple[int, str]] = []
    profile = service.current().served.profiles.get(agent.profile)
    if profile is not None and profile.budget is not None:
        found.append((cap_micros(profile.budget.amount), profile.budget.period))
    own = agent_cap(agent)
    if own is not None:
        found.append((cap_micros(own[0]), own[1]))
    windows = _windows(service, f"agent:{agent.id}", _tightest(found))
    return Result(Outcome.DONE, {"agent": agent.id, "windows": windows})


def threads_spending(service: Service, actor: Principal, command: c.ThreadSpending) -> Result:
    thread: Thread = reach_thread(service, actor, command.id)
    found = [] if thread.max_cost is None else [(cap_micros(thread.max_cost), "total")]
    windows = _windows(service, f"thread:{thread.id}", _tightest(found))
    return Result(Outcome.DONE, {"thread": thread.id, "agent": thread.agent, "windows": windows})


OPERATIONS: dict[str, Operation] = {
    "agents.spending": agents_spending,
    "threads.spending": threads_spending,
}
