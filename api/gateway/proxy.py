"""The gateway's MCP server: the upstream servers' tools, as Charter lets the agent see and
call them.

Each upstream server's tools are its toolset's (`toolset demo` for an upstream configured
with `toolset = "demo"`: its tool `search` is Charter's `demo.search`), and the client sees
them under the upstream's names. A session acts for one agent, on one turn at a time: the
listing it is shown and every call it makes are decided on the turn's revision and
profile. When a newer revision is uploaded, the session moves to a turn on it; if its
listing changed, the client is sent `notifications/tools/list_changed`.

- `tools/list`: the tools the listing allows (`allow`, or `narrow` with the condition in
  plain words in the description: api.gateway.describe); a denied tool, or one the policy
  does not declare, is not shown.
- `tools/call`: decided, and logged, as any call (api.gateway.local, or by a server:
  api.gateway.remote). Allowed: forwarded with the decided arguments (defaults filled
  in, rewrites applied), and the upstream's answer is the answer. Denied: a tool error (`isError`) with the reasons; nothing is
  forwarded. Paused: the call waits for its approval, up to `pause_wait` seconds: approved
  (and allowed by the re-check), it is forwarded; rejected, a tool error; still pending, a
  tool error saying that the call awaits approval and did not run. A client that takes
  form elicitation (its capabilities at `initialize`) is first asked, up to `ask_rounds`
  times, whether its user wants to wait another `pause_wait` (`elicitation/create`,
  `KEEP_WAITING`): only an accepted `keep_waiting: true` waits on. The question names the
  tool, the approval and the pause's reasons, never the arguments; the answer approves
  nothing (a person approves, through the approvals API or the console).
- cost: an allowed call whose upstream result reports what it cost, in its `_meta` under
  `COST_KEY` (`"charter/cost_usd": "0.12"`, USD, a string written as a JSON number or a
  number, 0 to 10^9), is charged that amount (api.service.costs): to the agent, its
  ancestors and its thread, once, even past a cap (the call ran); the next call over the
  cap is denied. A cost that is not an amount, or a charge refused, is said on stderr;
  the result is answered either way.
- shadow mode: every call is decided and logged, then forwarded whatever the decision;
  a call that would have been denied or paused is reported (`ShadowReport`).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TextIO

import anyio
import mcp_types as types
from mcp.client.session import ClientSession, IncomingMessage, MessageHandlerFnT
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from api.gateway.config import ConfigError, GatewayConfig, Upstream
from api.gateway.decider import Decider, Refused, Turn, Verdict
from api.gateway.describe import described
from api.service.budget import amount_text
from charter import __version__
from policy.money import MAX_USD, decimal_amount

POLL = 0.1  # seconds between looks at a pending approval
# The key of an upstream result's `_meta` that says what the call cost, in USD (a `_meta`
# key's prefix, `charter/`, names who defines it, as the MCP specification asks).
COST_KEY = "charter/cost_usd"
# What a paused call asks the client's user (form elicitation) when its wait ran out.
KEEP_WAITING: dict[str, Any] = {
    "type": "object",
    "properties": {
        "keep_waiting": {
            "type": "boolean",
            "title": "Keep waiting",
            "description": "Wait longer for a person to approve or reject the call",
            "default": True,
        }
    },
    "required": ["keep_waiting"],
}
Ask = Callable[[str, Verdict], Awaitable[bool]]  # (tool, the pause) -> wait on?
STDIO = "stdio"  # the one session of a gateway serving stdio
# Sessions kept over HTTP (whose ends the gateway is not told of): past it, the oldest is
# forgotten, and a request of it starts it again on a new turn.
MAX_SESSIONS = 1024
ASK_TIMEOUT = 600.0  # seconds the client's user has to answer whether to wait on
ADMISSIONS = 3  # turns admitted at most for one listing (see `Gateway._admit`)


@dataclass
class Connected:
    """An upstream server, connected and initialized; its tools by name. `changed`: the
    server said its tools changed (`notifications/tools/list_changed`) since they were
    last listed."""

    config: Upstream
    session: ClientSession
    tools: dict[str, types.Tool]
    changed: bool = False


def changes_of(holder: list[Connected]) -> MessageHandlerFnT:
    """A client session's message handler that marks the upstream in `holder` (filled once
    it is connected) `changed` when its server says its tools changed."""

    async def handle(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            for up in holder:
                up.changed = True

    return handle


@dataclass
class Session:
    """A downstream session: the agent it acts for, its turn and what it was shown."""

    agent: str
    turn: Turn
    listing: dict[str, dict[str, Any]]  # Charter's tool name -> its listing entry
    shown: list[types.Tool]
    peer: ServerSession | None = None  # (any request's: notifications go to the connection)
    lock: anyio.Lock = field(default_factory=anyio.Lock)


class ShadowReport:
    """Shadow mode's report: one JSON line per call that would have been denied or
    paused (its tool, effect, reasons and the decision's id in the log)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def add(self, agent: str, tool: str, verdict: Verdict) -> None:
        line = {
            "shadow": verdict.effect,
            "agent": agent,
            "tool": tool,
            "reasons": list(verdict.reasons),
            "decision": verdict.decision,
            "approval": verdict.approval,
        }
        self.out.write(json.dumps(line, sort_keys=True) + "\n")
        self.out.flush()


async def list_all(session: ClientSession) -> dict[str, types.Tool]:
    """Every tool an upstream server lists, page by page."""
    tools: dict[str, types.Tool] = {}
    cursor: str | None = None
    while True:
        params = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
        page = await session.list_tools(params=params)
        for tool in page.tools:
            tools[tool.name] = tool
        cursor = page.next_cursor
        if not cursor:
            return tools


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


class Gateway:
    def __init__(
        self,
        config: GatewayConfig,
        decider: Decider,
        upstreams: list[Connected],
        report: ShadowReport | None = None,
    ) -> None:
        self.config = config
        self.decider = decider
        self.report = report or ShadowReport(sys.stderr)
        self.upstreams = upstreams
        self.tools = _tools_of(upstreams)
        self.sessions: dict[str, Session] = {}
        self.server: Server[Any] = Server(
            "charter-gateway",
            version=__version__,
            instructions="Tools behind Charter: each call is decided by its policy.",
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
        )

    def options(self) -> Any:
        return self.server.create_initialization_options(NotificationOptions(tools_changed=True))

    # ---- sessions -----------------------------------------------------------------------
    def _key(self, ctx: ServerRequestContext[Any, Any]) -> str:
        """A session's key: over HTTP, its session id and a digest of its bearer token (a
        request with another token is another session); over stdio, the one session."""
        headers = getattr(ctx.request, "headers", None)
        if headers is None:
            return STDIO
        token = _bearer(headers) or ""
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return f"{headers.get('mcp-session-id') or ''}:{digest}"

    async def _agent(self, ctx: ServerRequestContext[Any, Any]) -> str:
        """The agent a session acts for: over HTTP, the bearer token's agent when the
        request has one; else the configuration's `agent`, or its `token`'s agent."""
        headers = getattr(ctx.request, "headers", None)
        token = None if headers is None else _bearer(headers)
        if token is not None:
            return await self.decider.agent_of_token(token)
        if self.config.agent is not None:
            return self.config.agent
        if self.config.token is None:  # (over HTTP: `charter gateway` refuses it on stdio)
            raise Refused(
                "unauthorized", "the request has no bearer token, and the gateway names no agent"
            )
        return await self.decider.agent_of_token(self.config.token)

    async def session(self, ctx: ServerRequestContext[Any, Any]) -> Session:
        key = self._key(ctx)
        found = self.sessions.get(key)
        if found is None:
            agent = await self._agent(ctx)
            turn, listing, shown = await self._admit(agent)
            if len(self.sessions) >= MAX_SESSIONS:  # (the oldest, most likely gone)
                self.sessions.pop(next(iter(self.sessions)))
            found = self.sessions.setdefault(key, Session(agent, turn, listing, shown))
        found.peer = ctx.session
        return found

    async def _admit(self, agent: str) -> tuple[Turn, dict[str, dict[str, Any]], list[types.Tool]]:
        """A turn on the latest revision, and what the client is shown on it. (A server
        lists the latest revision's tools: one uploaded between the turn and its listing
        is `revision-moved`, and a turn on it is admitted in turn.)"""
        attempts = 0
        while True:
            turn = await self.decider.admit(agent)
            try:
                return (turn, *await self._shown(turn))
            except Refused as exc:
                attempts += 1
                if exc.code != "revision-moved" or attempts == ADMISSIONS:
                    raise

    async def _shown(self, turn: Turn) -> tuple[dict[str, dict[str, Any]], list[types.Tool]]:
        listing = {entry["tool"]: entry for entry in await self.decider.listing(turn)}
        shown = []
        for name, (up, tool) in self.tools.items():
            entry = listing.get(f"{up.config.toolset}.{name}")
            if entry is None or entry.get("status") not in ("allow", "narrow"):
                continue
            text = described(tool.description, entry)
            shown.append(tool.model_copy(update={"description": text}))
        return listing, shown

    async def refresh(
        self, session: Session, latest: int | None = None, relisted: bool = False
    ) -> bool:
        """Move `session` to a turn on the latest revision (`latest`, if known) when it is
        not on it, or show it the upstreams' tools again (`relisted`); whether what the
        client is shown changed."""
        async with session.lock:
            if latest is not None and session.turn.revision == latest:
                if not relisted:
                    return False
                listing, shown = await self._shown(session.turn)
                changed = _seen(shown) != _seen(session.shown)
                session.listing, session.shown = listing, shown
                return changed
            turn, listing, shown = await self._admit(session.agent)
            changed = _seen(shown) != _seen(session.shown)
            session.turn, session.listing, session.shown = turn, listing, shown
            return changed

    async def _relist(self) -> bool:
        """List again the tools of each upstream that said they changed; whether any
        did. (Two upstreams that come to serve one name keep the tools they had.)"""
        stale = [up for up in self.upstreams if up.changed]
        if not stale:
            return False
        before = {up.config.toolset: up.tools for up in stale}
        for up in stale:
            up.changed = False
            up.tools = await list_all(up.session)
        try:
            self.tools = _tools_of(self.upstreams)
        except ConfigError as exc:
            for up in stale:
                up.tools = before[up.config.toolset]
            sys.stderr.write(f"charter gateway: upstream tools kept as they were: {exc.message}\n")
            return False
        return True

    async def watch(self) -> None:
        """Look for a new revision (and upstream tools that changed) every `watch` seconds;
        a session whose listing it changes is sent `notifications/tools/list_changed`. A
        look that fails is said on stderr and tried again: the sessions keep deciding on
        their turns, which end after their lifetime whatever happens here."""
        said = None  # (a problem is said once, not every `watch` seconds)
        while True:
            await anyio.sleep(self.config.watch)
            try:
                relisted = await self._relist()
                latest = await self.decider.latest()
                for key, session in list(self.sessions.items()):
                    changed = await self.refresh(session, latest, relisted)
                    if not changed or session.peer is None:
                        continue
                    try:
                        await session.peer.send_tool_list_changed()
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        self.sessions.pop(key, None)  # its client is gone
                said = None
            except Exception as exc:  # (calls go on deciding on their turns meanwhile)
                why = exc.message if isinstance(exc, Refused) else f"{type(exc).__name__}: {exc}"
                if why != said:
                    sys.stderr.write(f"charter gateway: cannot follow the policy: {why}\n")
                said = why

    # ---- the handlers -------------------------------------------------------------------
    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        try:
            session = await self.session(ctx)
        except Refused as exc:
            raise _mcp_error(exc) from None
        return types.ListToolsResult(tools=list(session.shown))

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            session = await self.session(ctx)
        except Refused as exc:
            return _error(f"charter cannot decide: {exc.message}")
        found = self.tools.get(params.name)
        if found is None:
            return _error(f"no tool `{params.name}`")
        up, _ = found
        tool = f"{up.config.toolset}.{params.name}"
        args = dict(params.arguments or {})
        try:
            verdict = await self._decide(session, tool, args)
            if self.config.shadow:
                if verdict.effect != "allow":
                    self.report.add(session.agent, tool, verdict)
                shadowed = await up.session.call_tool(params.name, args)
                return await self._charged(tool, verdict, shadowed)
            if verdict.effect == "pause":
                verdict = await self.await_approval(verdict, args, tool, asker(ctx))
        except Refused as exc:
            return _error(f"charter cannot decide `{tool}`: {exc.message}")
        if verdict.effect == "allow":
            result = await up.session.call_tool(params.name, verdict.args or {})
            return await self._charged(tool, verdict, result)
        return _error(refusal(tool, verdict))

    async def _charged(
        self, tool: str, verdict: Verdict, result: types.CallToolResult
    ) -> types.CallToolResult:
        """`result`, once the cost it reports (if any) is charged for the allowed call
        `verdict` (in shadow mode, a call not allowed is charged nothing)."""
        if verdict.effect != "allow":
            return result
        try:
            amount = reported_cost(result)
            if amount is not None:
                await self.decider.report_cost(verdict, amount)
        except ValueError as exc:
            sys.stderr.write(f"charter gateway: `{tool}` ran; its cost was not charged: {exc}\n")
        except Refused as exc:
            sys.stderr.write(
                f"charter gateway: `{tool}` ran; its cost was not charged: {exc.message}\n"
            )
        return result

    async def _decide(self, session: Session, tool: str, args: dict[str, Any]) -> Verdict:
        try:
            return await self.decider.decide(session.turn, tool, args)
        except Refused as exc:
            if exc.code != "turn-ended":
                raise
        # (the turn ran for its lifetime: a new one, on the latest revision)
        if await self.refresh(session) and session.peer is not None:
            await session.peer.send_tool_list_changed()
        return await self.decider.decide(session.turn, tool, args)

    async def await_approval(
        self, paused: Verdict, args: dict[str, Any], tool: str = "", ask: Ask | None = None
    ) -> Verdict:
        """The call once its approval is decided, or the pause itself: at `pause_wait`,
        when `ask` is None or says not to wait on (or after `ask_rounds` more waits)."""
        rounds = 0
        while True:
            found, ran_out = await self._wait(paused, args)
            if not ran_out or ask is None or rounds >= self.config.ask_rounds:
                return found
            if not await ask(tool, paused):
                return found
            rounds += 1

    async def _wait(self, paused: Verdict, args: dict[str, Any]) -> tuple[Verdict, bool]:
        """The call once its approval is decided within `pause_wait`, or the pause; and
        whether the wait ran out (the approval still pending)."""
        assert paused.approval is not None
        deadline = time.monotonic() + self.config.pause_wait
        while time.monotonic() < deadline:
            await anyio.sleep(min(POLL, max(0.0, deadline - time.monotonic())))
            state = await self.decider.approval(paused.approval, paused.args or args)
            if state.status == "pending":
                continue
            if state.status == "unfollowed":  # (a server token that may not read it)
                return paused, False
            if state.status == "approved" and state.final is not None:
                return state.final, False
            reasons = (f"rejected: {state.reason}",) if state.reason else (state.status,)
            return Verdict("deny", None, reasons, paused.approval, paused.decision), False
        return paused, True


def asker(ctx: ServerRequestContext[Any, Any]) -> Ask | None:
    """How a paused call asks the client's user whether to wait on (form elicitation,
    related to the call's request), or None for a client that declared no form
    elicitation. An answer that is not an accepted `keep_waiting: true`, an error, or no
    answer within `ASK_TIMEOUT` seconds, is no."""
    caps = ctx.session.client_capabilities
    elicitation = None if caps is None else caps.elicitation
    # (`elicitation: {}`, as clients of 2025-06-18 declare it, is form mode)
    if elicitation is None or (elicitation.form is None and elicitation.url is not None):
        return None

    async def ask(tool: str, paused: Verdict) -> bool:
        why = "; ".join(paused.reasons) or "a hook pauses it"
        message = (
            f"`{tool}` awaits a person's approval (approval `{paused.approval}`): {why}. "
            "Keep waiting for it? (This does not approve the call.)"
        )
        try:
            with anyio.fail_after(ASK_TIMEOUT):
                answer = await ctx.session.elicit_form(
                    message, KEEP_WAITING, related_request_id=ctx.request_id
                )
        except (MCPError, ValidationError, TimeoutError, anyio.ClosedResourceError,
                anyio.BrokenResourceError):  # fmt: skip
            return False
        content = answer.content or {}
        return answer.action == "accept" and content.get("keep_waiting") is True

    return ask


def reported_cost(result: types.CallToolResult) -> Decimal | None:
    """The cost `result` reports (`_meta` `COST_KEY`), in USD; None when it reports none;
    ValueError saying why when what it reports is not an amount from 0 to MAX_USD."""
    value = (result.meta or {}).get(COST_KEY)
    if value is None:
        return None
    wrong = f"`{COST_KEY}` must be a number or its text, from 0 to {MAX_USD} USD"
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(wrong)
    try:
        if isinstance(value, str):
            amount_text(value)
        amount = decimal_amount(value)
    except ValueError:
        raise ValueError(wrong) from None
    if not 0 <= amount <= MAX_USD:
        raise ValueError(wrong)
    return amount


def _bearer(headers: Mapping[str, str]) -> str | None:
    found = headers.get("authorization") or ""
    scheme, _, token = found.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def _tools_of(upstreams: list[Connected]) -> dict[str, tuple[Connected, types.Tool]]:
    """Every upstream tool by the name the client calls it (ConfigError for a name two
    upstreams serve: which one a call went to could not be told)."""
    tools: dict[str, tuple[Connected, types.Tool]] = {}
    for up in upstreams:
        for name, tool in up.tools.items():
            if name in tools:
                other = tools[name][0].config.toolset
                raise ConfigError(
                    f"tool `{name}` is served by the upstreams of `{other}` and "
                    f"`{up.config.toolset}`",
                    "give each toolset an upstream whose tools have names of their own",
                )
            tools[name] = (up, tool)
    return tools


def _seen(tools: list[types.Tool]) -> list[tuple[str, str | None]]:
    return sorted((tool.name, tool.description) for tool in tools)


def refusal(tool: str, verdict: Verdict) -> str:
    """The tool error's text for a call that did not run."""
    why = "; ".join(verdict.reasons) or "no rule allows it"
    if verdict.effect == "pause":
        return (
            f"`{tool}` awaits a person's approval (approval `{verdict.approval}`) and did not "
            f"run: {why}"
        )
    return f"charter denied `{tool}`: {why}"


def _mcp_error(exc: Refused) -> MCPError:
    return MCPError(types.INTERNAL_ERROR, f"charter cannot list the tools: {exc.message}")
