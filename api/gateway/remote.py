"""Decisions asked of a Charter server (`server` in the configuration), over its HTTP API.

The same operations as in-process (api.gateway.local), each one request: a turn
(`POST /v1/turns`), the listing (`GET /v1/agents/{id}/tools`, of the latest revision: a
turn on an older one is admitted again until they agree), a decision (`POST
/v1/decisions` with the turn), an approval (`GET /v1/approvals/{id}`) and the latest
revision (`GET /readyz`). The server logs each decision as it logs any. Its token
(`server_token`) must be able to decide for the agents (`decide` or `admin`); following an
approval takes an `admin` token: with another, a paused call answers at once that it
awaits approval. The server redacts a secret argument in the decisions it answers; the
value forwarded is the one the client sent (api.gateway.local.unredacted).
"""

from __future__ import annotations

from typing import Any

import httpx

from api.gateway.decider import Refused, Turn, Verdict, Waited, reasons_of
from api.gateway.local import unredacted, waited

TIMEOUT = 30.0  # seconds a request to the server may take


class RemoteDecider:
    def __init__(self, url: str, token: str) -> None:
        self.http = httpx.AsyncClient(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=TIMEOUT,
        )

    async def _ask(self, method: str, path: str, body: Any = None) -> Any:
        try:
            answer = await self.http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise Refused("unavailable", f"the Charter server did not answer: {exc}") from None
        if answer.status_code >= 400:
            try:
                problem = answer.json()
                code, detail = str(problem["code"]), str(problem["detail"])
            except (ValueError, KeyError, TypeError):
                code, detail = "unavailable", f"the Charter server answered {answer.status_code}"
            raise Refused(code, detail)
        return answer.json()

    async def agent_of_token(self, token: str) -> str:
        raise Refused(
            "unauthorized",
            "an agent token names its agent in-process only; with `server`, give `agent`",
        )

    async def admit(self, agent: str) -> Turn:
        made = await self._ask("POST", "/v1/turns", {"agent": agent})
        return Turn(made["id"], made["agent"], made["revision"], made.get("profile") or "")

    async def latest(self) -> int:
        try:
            answer = await self.http.get("/readyz")
            revision = answer.json().get("revision")
        except (httpx.HTTPError, ValueError, AttributeError):
            raise Refused("unavailable", "the Charter server did not say its revision") from None
        if not isinstance(revision, int):
            raise Refused("unavailable", "the Charter server did not say its revision")
        return revision

    async def listing(self, turn: Turn) -> list[dict[str, Any]]:
        found = await self._ask("GET", f"/v1/agents/{turn.agent}/tools")
        if found["revision"] != turn.revision:
            raise Refused("revision-moved", "a newer revision was uploaded meanwhile")
        tools: list[dict[str, Any]] = found["tools"]
        return tools

    async def decide(self, turn: Turn, tool: str, args: dict[str, Any]) -> Verdict:
        call = {"agent": turn.agent, "tool": tool, "args": args, "turn": turn.id}
        found = await self._ask("POST", "/v1/decisions", call)
        return Verdict(
            found["effect"], unredacted(found.get("args"), args), reasons_of(found),
            found.get("approval_id"), found["id"],
        )  # fmt: skip

    async def approval(self, approval_id: str, asked: dict[str, Any]) -> Waited:
        try:
            found = await self._ask("GET", f"/v1/approvals/{approval_id}")
        except Refused as exc:
            if exc.code != "insufficient-scope":
                raise
            return Waited("unfollowed")
        return waited(found, asked)

    async def close(self) -> None:
        await self.http.aclose()
