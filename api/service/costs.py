"""A cost reported after the fact: what an allowed call cost once it ran (an MCP tool's
result says so to `charter gateway`), charged to the budgets its decision would have
charged an `expected_cost` to (api/service/budget.py): its agent, each ancestor, and its
thread.

The call ran: the charge cannot stop it, so it is recorded even when it takes the
spending past a cap (the next call over that cap is denied, as any call over it is).
A decision is charged once: the report is a document of kind `cost`, keyed by the
decision's id, inserted in the charge's transaction (a second report finds it and
is refused, `cost-already-reported`); it says what was charged, when, to whom and who
reported it, so the charge can be told from the calls' own in the ledger's history.

A decision is named by its id and its place in the log (`seq`, answered with it), so
finding it is one read of the log, whatever the log's length.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson

from api.service import threadevents
from api.service.budget import ancestors
from api.service.core import Service, now_ms
from api.service.errors import ServiceError
from policy.money import to_micros
from policy.store import Damaged, StoreDamaged

KIND = "cost"  # the documents that record the reports, by decision id


def logged(service: Service, decision_id: str, seq: int) -> dict[str, Any]:
    """The log row of decision `decision_id` at `seq` (`decision-not-found` if the row
    there is another decision's, or there is none)."""
    rows = service.store.read_decisions(seq - 1, 1) if seq >= 1 else []
    if not rows or rows[0][0] != seq:
        raise ServiceError("decision-not-found", f"no decision `{decision_id}` at seq {seq}")
    row = rows[0][1]
    if isinstance(row, Damaged):
        raise StoreDamaged(f"decision {seq}", "it does not match its checksum")
    entry: dict[str, Any] = orjson.loads(row)
    if entry.get("id") != decision_id:
        raise ServiceError("decision-not-found", f"no decision `{decision_id}` at seq {seq}")
    return entry


def report_cost(
    service: Service,
    decision_id: str,
    seq: int,
    amount: Decimal,
    reporter: str,
    may_report: Callable[[str], None] = lambda agent: None,
) -> dict[str, Any]:
    """Charge `amount` USD (0 to MAX_USD, checked by the caller's model) for the allowed
    decision `decision_id` at `seq`, once; the record of the charge. `may_report(agent)`
    raises for a reporter who may not decide for the decision's agent."""
    entry = logged(service, decision_id, seq)
    agent_id = str(entry.get("agent"))
    may_report(agent_id)
    if entry.get("effect") != "allow":
        raise ServiceError(
            "decision-not-allowed",
            f"decision `{decision_id}` is a `{entry.get('effect')}`: only an allowed call ran",
        )
    micros = to_micros(amount)
    agent = service.find_agent(agent_id)
    # (an agent deleted since: its own subject still, as its decision charged it)
    subjects = (
        [f"agent:{agent_id}"]
        if agent is None
        else [f"agent:{a.id}" for a in ancestors(agent, service.find_agent)]
    )
    thread = entry.get("thread")
    if thread is not None:
        subjects.append(f"thread:{thread}")
    at = now_ms()
    record = {
        "decision": decision_id, "seq": seq, "agent": agent_id, "amount": str(amount),
        "micros": micros, "charged": subjects, "at": at, "by": reporter,
    }  # fmt: skip
    store = service.store
    with store.atomic():
        if not store.insert(KIND, decision_id, record):
            raise ServiceError(
                "cost-already-reported", f"decision `{decision_id}` has its cost reported"
            )
        if micros > 0:
            store.charge(subjects, micros, at)
        if thread is not None and store.get("threads", str(thread)) is not None:
            threadevents.record(
                store, str(thread), "cost", at, decision=decision_id, seq=seq,
                charged=str(amount), by=reporter,
            )  # fmt: skip
    return record
