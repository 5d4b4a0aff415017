"""A typed client of a Charter server's HTTP API: `Client` (blocking) and `AsyncClient`
(asyncio), on httpx (`pip install 'charter[client]'`).

    from charter.client import Client

    with Client("http://127.0.0.1:8080", token) as charter:
        decision = charter.decide("demo-support", "mail.send", {"to": "bob@example.com"})
        if decision.effect == "pause":
            approval = charter.wait_for_approval(decision.approval_id, timeout=300)

Answers are the server's own models (api.records, api.http.answers, the AuthZEN model);
a refusal raises ProblemError with its stable `code` (docs/http.md, "The Python client").
"""

from __future__ import annotations

from api.http.answers import (
    Approved,
    CostCharged,
    ListedTool,
    NotReady,
    Ready,
    Rejected,
    ThreadEvent,
    ThreadEventPage,
    ToolListing,
)
from api.http.authzenmodel import (
    Action,
    Decision,
    Decisions,
    Evaluation,
    Evaluations,
    Partial,
    Resource,
    Subject,
)
from api.http.models import DecisionRequest
from api.records import Approval, DecisionResponse, Reason, Thread, Turn
from charter.client.asynchronous import AsyncClient
from charter.client.errors import ClientError, NoAnswer, Paused, ProblemError
from charter.client.events import ApprovalEvent
from charter.client.operations import call
from charter.client.sync import Client

__all__ = [
    "Action",
    "Approval",
    "ApprovalEvent",
    "Approved",
    "AsyncClient",
    "Client",
    "ClientError",
    "CostCharged",
    "Decision",
    "DecisionRequest",
    "DecisionResponse",
    "Decisions",
    "Evaluation",
    "Evaluations",
    "ListedTool",
    "NoAnswer",
    "NotReady",
    "Partial",
    "Paused",
    "ProblemError",
    "Ready",
    "Reason",
    "Rejected",
    "Resource",
    "Subject",
    "Thread",
    "ThreadEvent",
    "ThreadEventPage",
    "ToolListing",
    "Turn",
    "call",
]  # fmt: skip
