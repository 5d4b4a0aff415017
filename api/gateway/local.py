"""Decisions in-process, against the store `charter serve --db` serves (`open_service`).

A call goes through the application core's own path, `decide_detailed` (the one approvals
and agents' management requests take): prepared on the turn's revision, decided, and
logged in one transaction with its sequence number, as a `POST /v1/decisions` is. The
store is read and written on one worker thread, one operation at a time, so the event
loop serving the MCP sessions never waits on a commit.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import orjson

from api.gateway.decider import Refused, Turn, Verdict, Waited, reasons_of
from api.http.decisions import tool_listing
from api.records import Approval
from api.service.calls import Call
from api.service.core import Service
from api.service.costs import report_cost
from api.service.decide import decide_detailed
from api.service.encoding import dumps
from api.service.errors import ServiceError
from api.service.resources import admit_turn
from api.service.tokens import TokenCache
from engine.redaction import REDACTED

T = TypeVar("T")
REPORTER = "charter gateway"  # who reported a cost, in its record (no token: in-process)


class LocalDecider:
    def __init__(self, service: Service) -> None:
        self.service = service
        self._limiter = anyio.CapacityLimiter(1)
        self._tokens = TokenCache(service.store)

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await anyio.to_thread.run_sync(fn, *args, limiter=self._limiter)
        except ServiceError as exc:
            raise Refused(exc.code, exc.message) from None

    async def agent_of_token(self, token: str) -> str:
        def look() -> str:
            self.service.sync()
            actor = self._tokens.lookup(token)
            if actor is None or actor.agent is None or actor.expired():
                # (never the token itself: a secret)
                raise Refused("unauthorized", "the token is not an agent's token")
            return actor.agent

        return await self._run(look)

    async def admit(self, agent: str) -> Turn:
        def admit() -> Turn:
            service = self.service
            service.sync()
            turn = admit_turn(service, agent, None, service.current())
            profile = turn.profile or service.agent(agent).profile
            return Turn(turn.id, turn.agent, turn.revision, profile)

        return await self._run(admit)

    async def latest(self) -> int:
        def latest() -> int:
            self.service.sync()
            return self.service.snapshots.latest

        return await self._run(latest)

    async def listing(self, turn: Turn) -> list[dict[str, Any]]:
        def listed() -> list[dict[str, Any]]:
            snapshot = self.service.snapshots.get(turn.revision)
            tools: list[dict[str, Any]] = orjson.loads(tool_listing(snapshot, turn.profile))
            return tools

        return await self._run(listed)

    async def decide(self, turn: Turn, tool: str, args: dict[str, Any]) -> Verdict:
        def decide() -> Verdict:
            call = Call(turn.agent, tool, args, turn=turn.id)
            responses, raw = decide_detailed(self.service, [call])
            found = responses[0]
            final = raw[0]
            return Verdict(
                found["effect"],
                None if final is None else orjson.loads(dumps(final)),
                reasons_of(found),
                found.get("approval_id"),
                found["id"],
                found["seq"],
            )

        return await self._run(decide)

    async def approval(self, approval_id: str, asked: dict[str, Any]) -> Waited:
        def look() -> Waited:
            self.service.sync()
            found = self.service.record(Approval, "approval", approval_id)
            view = found.model_dump(mode="json", include={"status", "final", "reason"})
            return waited(view, asked)

        return await self._run(look)

    async def report_cost(self, verdict: Verdict, amount: Decimal) -> None:
        def charge() -> None:
            self.service.sync()
            report_cost(self.service, verdict.decision, verdict.seq, amount, REPORTER)

        await self._run(charge)

    async def close(self) -> None:
        self.service.store.close()


def waited(approval: dict[str, Any], asked: dict[str, Any]) -> Waited:
    """An approval document (`GET /v1/approvals/{id}`) as the gateway reads it; its final
    decision's arguments are redacted, and `unredacted` fills them in from `asked`."""
    status = str(approval.get("status"))
    final = approval.get("final")
    verdict = None
    if isinstance(final, dict):
        verdict = Verdict(
            str(final.get("effect")), unredacted(final.get("args"), asked), reasons_of(final),
            final.get("approval_id"),
            str(final.get("id", "")), int(final.get("seq") or 0),
        )  # fmt: skip
    return Waited(status, verdict, approval.get("reason"))


def unredacted(args: Any, asked: dict[str, Any]) -> dict[str, Any] | None:
    """A decision's final arguments as answered (a secret one `[redacted]`), with each
    redacted argument's value the one the call was decided with (`asked`). (A rewrite that
    sets a secret argument is seen by `LocalDecider.decide` alone, which reads the
    decision's arguments unredacted: an approved call, or a server's decision, forwards
    the value the call was made with.)"""
    if not isinstance(args, dict):
        return None
    return {k: asked.get(k, v) if v == REDACTED else v for k, v in args.items()}
