"""What the gateway asks of Charter, in-process (api.gateway.local) or of a server.

A session acts for one agent on one turn: the turn pins the revision and profile its
listing and its calls are decided on, so what the client was shown is what is decided.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol


class Refused(Exception):
    """Charter refused to decide (an unknown agent, no policy, ...): `code` is its stable
    error code, `message` says why; the call is not forwarded."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Turn:
    id: str
    agent: str
    revision: int
    profile: str


@dataclass(frozen=True)
class Verdict:
    """A decision: its effect, the final arguments (unredacted: what is forwarded), the
    reasons' messages, and for a pause the approval it opened."""

    effect: str  # "allow" | "deny" | "pause"
    args: dict[str, Any] | None
    reasons: tuple[str, ...] = ()
    approval: str | None = None
    decision: str = ""  # the decision's id in the log
    seq: int = 0  # and its place there


@dataclass(frozen=True)
class Waited:
    """An approval as it stands: `pending`, `approved` (with the decision its re-check
    made, `final`), `rejected` (with its reason) or `expired`."""

    status: str
    final: Verdict | None = None
    reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Decider(Protocol):
    async def agent_of_token(self, token: str) -> str: ...

    async def admit(self, agent: str) -> Turn: ...

    async def latest(self) -> int: ...

    async def listing(self, turn: Turn) -> list[dict[str, Any]]: ...

    async def decide(self, turn: Turn, tool: str, args: dict[str, Any]) -> Verdict: ...

    async def approval(self, approval_id: str, asked: dict[str, Any]) -> Waited: ...

    async def report_cost(self, verdict: Verdict, amount: Decimal) -> None:
        """Charge `amount` USD, what the allowed call `verdict` cost once it ran, to its
        budgets (api.service.costs), once."""
        ...

    async def close(self) -> None: ...


# What a refusal's reasons leave out: what allowed the call, which is not why it stopped.
_NOT_WHY = frozenset({"allow", "hook-rewrite", "approved"})


def reasons_of(decision: dict[str, Any]) -> tuple[str, ...]:
    """The messages of a decision's reasons (a decision document's `reasons`); for a call
    denied or paused, the reasons it was (not the roles that allow it)."""
    refused = decision.get("effect") != "allow"
    found = []
    for reason in decision.get("reasons") or ():
        if not isinstance(reason, dict) or (refused and reason.get("kind") in _NOT_WHY):
            continue
        message = reason.get("message")
        if message:
            found.append(str(message))
    return tuple(found)
