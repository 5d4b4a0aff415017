"""A call to decide (`Call`) and the call resolved for its transaction (`Prepared`).

`api.service.decide` makes a `Prepared` from a `Call` (`prepare`); `api.service.decisionlog`
logs any number of them in one write transaction. Both read these records, and neither
imports the other for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType
from typing import Any, NamedTuple

from api.records import Agent, Thread
from engine.compile import Snapshot
from engine.decision import Decision, Request


class Call(NamedTuple):
    """One call to decide (a named tuple: built once per call, so it is built cheaply)."""

    agent: str
    tool: str
    args: Mapping[str, Any] = MappingProxyType({})
    thread: str | None = None
    turn: str | None = None
    context: Mapping[str, Any] | None = None
    expected_cost: Decimal | None = None
    connection: str | None = None


@dataclass(slots=True)
class Prepared:
    """A call resolved, with its decision of steps 2-5 and 7; None for a call whose
    conditions read `thread.cost`: api.service.decisionlog decides that one inside the
    write transaction, on the thread's running cost, from its `request` (whose `thread`
    lacks the cost; only such a call has a `request`: the others are decided from their
    fields, `Snapshot.decide_call`)."""

    call: Call
    agent: Agent
    snapshot: Snapshot
    thread: Thread | None
    decision: Decision | None = None
    request: Request | None = None
    # The latest revision, for a child's call that a turn decides on an older one (its
    # ancestors' profiles may be declared only there: budget.caps_for).
    latest: Snapshot | None = None
