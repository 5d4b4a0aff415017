"""Decisions asked of a Charter server (`server` in the configuration), over its HTTP API,
with charter.client's AsyncClient.

The same operations as in-process (api.gateway.local), each one request: a turn
(`POST /v1/turns`), the listing (`GET /v1/agents/{id}/tools`, of the latest revision: a
turn on an older one is admitted again until they agree), a decision (`POST
/v1/decisions` with the turn), an approval (`GET /v1/approvals/{id}`), the latest
revision (`GET /readyz`) and a cost reported (`POST /v1/decisions/{id}/cost`). The
server logs each decision as it logs any. Its token
(`server_token`) must be able to decide for the agents (`decide` or `admin`); following an
approval takes an `admin` token: with another, a paused call answers at once that it
awaits approval. The server redacts a secret argument in the decisions it answers; the
value forwarded is the one the client sent (api.gateway.local.unredacted). A refusal is
the server's code and detail; no answer (or one that is not the API's) is `unavailable`.
"""

from __future__ import annotations

from collections.abc import Awaitable
from decimal import Decimal
from typing import Any, TypeVar

from api.gateway.decider import Refused, Turn, Verdict, Waited, reasons_of
from api.gateway.local import unredacted, waited
from api.http.answers import Ready
from charter.client import AsyncClient, ClientError, ProblemError

TIMEOUT = 30.0  # seconds a request to the server may take
T = TypeVar("T")


async def _asked(pending: Awaitable[T]) -> T:
    try:
        return await pending
    except ProblemError as exc:
        raise Refused(exc.code, exc.detail) from None
    except ClientError as exc:
        raise Refused("unavailable", f"the Charter server did not answer: {exc}") from None


class RemoteDecider:
    def __init__(self, url: str, token: str) -> None:
        self.client = AsyncClient(url, token, timeout=TIMEOUT)

    async def agent_of_token(self, token: str) -> str:
        raise Refused(
            "unauthorized",
            "an agent token names its agent in-process only; with `server`, give `agent`",
        )

    async def admit(self, agent: str) -> Turn:
        made = await _asked(self.client.admit_turn(agent))
        return Turn(made.id, made.agent, made.revision, made.profile or "")

    async def latest(self) -> int:
        found = await _asked(self.client.readiness())
        if not isinstance(found, Ready):
            raise Refused("unavailable", "the Charter server did not say its revision")
        return found.revision

    async def listing(self, turn: Turn) -> list[dict[str, Any]]:
        found = await _asked(self.client.list_tools(turn.agent))
        if found.revision != turn.revision:
            raise Refused("revision-moved", "a newer revision was uploaded meanwhile")
        return [tool.model_dump(mode="json", exclude_unset=True) for tool in found.tools]

    async def decide(self, turn: Turn, tool: str, args: dict[str, Any]) -> Verdict:
        found = await _asked(self.client.decide(turn.agent, tool, args, turn=turn.id))
        return Verdict(
            found.effect, unredacted(found.args, args), reasons_of(found.model_dump()),
            found.approval_id, found.id, found.seq,
        )  # fmt: skip

    async def approval(self, approval_id: str, asked: dict[str, Any]) -> Waited:
        try:
            found = await _asked(self.client.approval(approval_id))
        except Refused as exc:
            if exc.code != "insufficient-scope":
                raise
            return Waited("unfollowed")
        return waited(found.shown(), asked)

    async def report_cost(self, verdict: Verdict, amount: Decimal) -> None:
        await _asked(self.client.report_cost(verdict.decision, verdict.seq, amount))

    async def close(self) -> None:
        await self.client.close()
