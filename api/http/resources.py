"""Resources as routes: each maps to its built-in tool (`agents.create`, ...) and runs
through api.service.manage, so an agent's token is decided exactly like a tool call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from api import commands as c
from api import records as r
from api.http import answers as a
from api.http import approvals, threadwait
from api.http import models as m
from api.http.auth import require_admin, require_manager
from api.http.body import body, checked
from api.http.pagination import IntQuery, int_query, list_args
from api.http.pagination import query as query_of
from api.http.parts import parts_of, service_of
from api.http.preconditions import ENTITY_TAG, if_match
from api.http.routing import (
    SAFE_METHODS,
    Endpoint,
    Spec,
    Table,
    bounded_id,
    json_response,
    path_ids,
)
from api.service import tokenlist, tokens
from api.service.errors import ErrorCode, ServiceError
from api.service.manage import manage
from api.service.ops import Outcome
from api.service.tokens import act_for

# What an operation did, as the HTTP status its answer carries.
STATUS: dict[Outcome, int] = {
    Outcome.DONE: 200,
    Outcome.CREATED: 201,
    Outcome.PENDING: 202,
    Outcome.REMOVED: 204,
}
PAGE = ("cursor", "limit")  # every list's own query parameters (api.http.pagination)
# The code that refuses a request without a query parameter its command requires.
REQUIRED_QUERY: dict[str, ErrorCode] = {"path": "bad-memory-path"}
# The integer query parameters of a read that is no list (a feed's messages), with their
# bounds.
INT_QUERY: dict[IntQuery, tuple[int, int | None]] = {"after_seq": (0, None), "limit": (1, 200)}


def managed(spec: Spec) -> tuple[Spec, Endpoint]:
    """The route of `spec`, run as its built-in tool `spec.tool`, with the tool's command
    (api.commands): the body (read with its model, `spec.request`: its fields as sent), a
    list's query parameters and the path's. Its `If-Match`, when it reads one, is no
    argument (nothing a policy decides on or a log shows: api.service.manage keeps it
    apart)."""
    tool, model = spec.tool, spec.request
    assert tool is not None
    command = c.COMMANDS[tool]
    listing = "cursor" in spec.query  # (a list: `.list`, a thread's events)
    query = tuple(name for name in spec.query if name not in PAGE)
    guarded = "If-Match" in spec.headers
    required = {name for name in query if command.model_fields[name].is_required()}
    source = f"`GET {spec.path}` (or the last write's answer)"

    async def endpoint(request: Request) -> Response:
        actor = require_manager(request)
        path = path_ids(request)  # (before a long id is decided, logged or looked up)
        expected = None
        if guarded:
            expected = if_match(request, ENTITY_TAG, "an entity tag in double quotes", source)
        fields: dict[str, Any] = {}
        if model is not None:  # (nesting, exact numbers, duplicate keys: checked there)
            fields.update((await body(request, model)).model_dump(exclude_unset=True))
        if listing:
            fields.update(list_args(request, *query))
            if "agent" in fields:  # (an id: the threads' filter, memory's owner)
                bounded_id(fields["agent"], "the query's `agent`")
        else:  # (a read's or a delete's arguments in the query: memory's `agent`, `path`)
            for number, (low, high) in INT_QUERY.items():
                if number in spec.query and query_of(request, number):
                    fields[number] = int_query(request, number, 0, minimum=low, maximum=high)
            for name in (name for name in query if name not in INT_QUERY):
                value = query_of(request, name)
                if value:  # (empty: not given, as a list's filter)
                    fields[name] = (
                        bounded_id(value, "the query's `agent`") if name == "agent" else value
                    )
                elif name in required:
                    raise ServiceError(REQUIRED_QUERY[name], f"the query has no `{name}`")
        fields.update(path)
        service = service_of(request)  # (brought up to date by the token check)
        result = await run_in_threadpool(manage, service, actor, checked(command, fields), expected)
        if request.method not in SAFE_METHODS and result.outcome is not Outcome.PENDING:
            await flush_uses(request)
        response = json_response(result.body, STATUS[result.outcome])
        if result.etag is not None:
            response.headers["ETag"] = result.etag
        return response

    return spec, endpoint


async def flush_uses(request: Request) -> None:
    """Once a request has written what it writes: the token uses due, written in a
    transaction of their own (api.service.tokenuse), before the answer."""

    def flush() -> None:
        act_for(None)  # (this thread's copy of the context: no token to read again)
        parts_of(request).tokens.uses.flush(service_of(request).store)

    await run_in_threadpool(flush)


def _a(one: str) -> str:
    """`Agent` as `an agent`, `Role` as `a role`: a kind's one item, in a summary."""
    return ("an " if one[0] in "AEIOU" else "a ") + one.lower()


def _crud(
    kind: str, one: str, key: str, page: type[BaseModel], out: type[BaseModel],
    create: type[BaseModel] | None = None, update: type[BaseModel] | None = None,
    extra_query: tuple[str, ...] = (), errors: Mapping[str, tuple[int, ...]] | None = None,
    created: tuple[int, ...] = (201,), tagged: bool = False,
) -> Table:  # fmt: skip
    """A kind's list and get, and its create, update and delete when it has them (their
    operation ids `listAgents`, `getAgent`, ...: `one` is the kind's singular, `Agent`);
    `errors`: each action's problem statuses beyond those of its shape (api.http.openapi);
    `created`: a create's statuses (the first the usual one); `tagged`: a kind of stored
    documents (or roles, files of the policy: api.service.views), whose get, create and
    update answer with an `ETag` and whose update and delete take `If-Match`
    (api.service.etags)."""
    base = f"/v1/{kind}"
    item = f"{base}/{{{key}}}"
    more = errors or {}
    guard = ("If-Match",) if tagged else ()
    moved = (412,) if tagged else ()  # (`resource-moved`)
    table: Table = [
        managed(Spec("GET", base, f"List {kind}", "manage", None, page,
                     query=(*PAGE, *extra_query), tool=f"{kind}.list",
                     errors=more.get("list", ()), operation=f"list{kind.title()}", tag=kind)),
        managed(Spec("GET", item, f"Get {_a(one)}", "manage", None, out, tool=f"{kind}.get",
                     errors=more.get("get", ()), etag=tagged, operation=f"get{one}", tag=kind)),
    ]  # fmt: skip
    if create is not None:
        table.append(
            managed(Spec("POST", base, f"Create {_a(one)}", "manage", create, out,
                         created[0], tool=f"{kind}.create", errors=more.get("create", ()),
                         also=created[1:], etag=tagged, operation=f"create{one}", tag=kind))
        )  # fmt: skip
    if update is not None:
        table.append(
            managed(Spec("PATCH", item, f"Update {_a(one)}", "manage", update, out,
                         tool=f"{kind}.update", errors=(*more.get("update", ()), *moved),
                         etag=tagged, headers=guard, operation=f"update{one}", tag=kind))
        )  # fmt: skip
        table.append(
            managed(Spec("DELETE", item, f"Delete {_a(one)}", "manage", status=204,
                         tool=f"{kind}.delete", errors=(*more.get("delete", ()), *moved),
                         headers=guard, operation=f"delete{one}", tag=kind))
        )  # fmt: skip
    return table


async def create_token(request: Request) -> Response:
    require_admin(request)
    item = await body(request, m.TokenCreate)
    expires_at = tokens.expiry(item.expires_in, item.expires_at)
    # tokens.issue checks the agent, as for `charter token`; its ServiceError is the answer
    token, issued = tokens.issue(
        service_of(request).store, item.scope, item.agent, item.name, expires_at
    )
    await flush_uses(request)
    return json_response({**issued.shown(), "token": token}, 201)


async def list_tokens(request: Request) -> Response:
    require_admin(request)
    args = list_args(request)
    page = await run_in_threadpool(
        tokenlist.listed, service_of(request), parts_of(request).tokens.uses,
        args.get("cursor"), args.get("limit"),
    )  # fmt: skip
    return json_response(page, 200)


async def delete_token(request: Request) -> Response:
    require_admin(request)
    if not tokens.revoke(service_of(request), [path_ids(request)["id"]]):
        raise ServiceError("token-not-found", "token not found")
    return json_response(None, 204)


# Problem statuses beyond each route's shape: 409 for a conflict, and for `no-policy`
# where the operation reads the latest revision (a profile, a toolset, a declaration).
_POLICY_VIEW = {"list": (409,), "get": (409,)}
# (a declaration's writes through the API: api.service.declwrites)
_POLICY_WRITES = {**_POLICY_VIEW, "create": (404, 409), "update": (409,), "delete": (409, 422)}
ROUTES: Table = [
    # (a create with a `request_id` already used answers 200 with the identity it made, or
    # 404 once that one was deleted, or 409 when its body differs)
    *_crud("identities", "Identity", "id", a.IdentityPage, r.Identity, c.IdentityCreate, c.IdentityUpdate,
           errors={"create": (404, 409), "delete": (409,)}, created=(201, 200), tagged=True),
    managed(Spec("POST", "/v1/identities/import", "Import a 32-byte Ed25519 seed", "manage",
                 c.IdentityImport, r.Identity, 201, tool="identities.import", errors=(409,),
                 etag=True, operation="importIdentity", tag="identities")),
    # (an agent's token whose own profile the latest revision lacks: 404 on a create)
    *_crud("agents", "Agent", "id", a.AgentPage, r.Agent, c.AgentCreate, c.AgentUpdate,
           errors={"create": (404, 409), "update": (409,), "delete": (409,)}, tagged=True),
    # (a Seed `AgentDefinition`: makes the agent when it is not there, else changes it)
    managed(Spec("PUT", "/v1/agents/{id}/definition",
                 "Make or change an agent from a Seed agent definition", "manage",
                 c.AgentDefinitionPut, a.AgentDefinitionView, 200, tool="agents.define",
                 errors=(404, 409, 412), also=(201,), etag=True, headers=("If-Match",),
                 operation="defineAgent", tag="agents")),
    managed(Spec("GET", "/v1/agents/{id}/definition", "Get an agent's Seed definition",
                 "manage", None, a.AgentDefinitionView, tool="agents.get_definition",
                 etag=True, operation="getAgentDefinition", tag="agents")),
    *_crud("threads", "Thread", "id", a.ThreadPage, r.Thread, c.ThreadCreate, c.ThreadUpdate, ("agent",),
           errors={"create": (404,)}, tagged=True),
    managed(Spec("GET", "/v1/agents/{id}/spending", "Read an agent's spending per budget window",
                 "manage", None, a.AgentSpending, tool="agents.spending",
                 operation="getAgentSpending", tag="agents")),
    managed(Spec("GET", "/v1/threads/{id}/spending", "Read a thread's spending per window",
                 "manage", None, a.ThreadSpending, tool="threads.spending",
                 operation="getThreadSpending", tag="threads")),
    # (a long poll: the wait is the endpoint's, after the decision: api.http.threadwait)
    (Spec("POST", "/v1/threads/{id}/wait", "Wait until a thread stops running",
          "manage", c.ThreadWait, r.Thread, also=(202,), tool="threads.wait",
          operation="waitThread", tag="threads"), threadwait.wait_thread),
    managed(Spec("GET", "/v1/threads/{id}/events", "List a thread's events, oldest first",
                 "manage", None, a.ThreadEventPage, query=PAGE, tool="threads.events",
                 operation="listThreadEvents", tag="threads")),
    *_crud("connections", "Connection", "id", a.ConnectionPage, r.Connection, c.ConnectionCreate,
           c.ConnectionUpdate, errors={"create": (409,)}, tagged=True),
    *_crud("roles", "Role", "name", a.RolePage, a.Role, c.RoleWrite, c.RoleUpdate,
           errors=_POLICY_WRITES, tagged=True),
    *_crud("profiles", "Profile", "name", a.ProfilePage, a.Profile, c.ProfileWrite, c.ProfileUpdate,
           errors=_POLICY_WRITES, tagged=True),
    *_crud("hooks", "Hook", "name", a.HookPage, a.Hook, c.HookWrite, c.HookUpdate,
           errors=_POLICY_WRITES, tagged=True),
    *_crud("toolsets", "Toolset", "name", a.ToolsetPage, a.Toolset, c.ToolsetWrite,
           c.ToolsetUpdate, errors=_POLICY_WRITES, tagged=True),
    managed(Spec("GET", "/v1/approvals", "List approvals", "manage", None, a.ApprovalPage,
                 query=(*PAGE, "status"), tool="approvals.list", operation="listApprovals",
                 tag="approvals")),
    # (the stream before `{id}`, which `events` would match)
    (Spec("GET", "/v1/approvals/events",
          "Stream approvals opened and decided (Server-Sent Events)", "manage",
          media="text/event-stream", headers=("Last-Event-ID",), errors=(400,),
          operation="readApprovalEvents",
          tag="approvals"), approvals.approval_events),
    # (`wait` is no argument of `approvals.get`: how long the answer waits, not what it is)
    (Spec("GET", "/v1/approvals/{id}", "Get an approval, or wait until it is decided",
          "manage", None, r.Approval, query=("wait",), tool="approvals.get",
          operation="getApproval", tag="approvals"), approvals.get_approval),
    # Approving runs an approved management request: its refusals are the approval's.
    managed(Spec("POST", "/v1/approvals/{id}/approve",
                 "Approve: re-check and return the final decision", "manage", None, a.Approved,
                 tool="approvals.approve", errors=(400, 409, 412, 413, 422),
                 operation="approve", tag="approvals")),
    managed(Spec("POST", "/v1/approvals/{id}/reject", "Reject a pending approval", "manage",
                 c.Reject, a.Rejected, tool="approvals.reject", errors=(409,),
                 operation="reject", tag="approvals")),
    # Schedules (api.service.schedules; their runs: api.service.schedulerun).
    *_crud("schedules", "Schedule", "id", a.SchedulePage, a.Schedule, c.ScheduleCreate,
           c.ScheduleUpdate, ("agent",), errors={"create": (404,)}, tagged=True),
    managed(Spec("POST", "/v1/schedules/{id}/run", "Run a schedule now: start its thread",
                 "manage", None, a.ScheduleRun, 201, tool="schedules.run",
                 operation="runSchedule", tag="schedules")),
    # An agent's memory (api.service.memoryentries): the built-in tools `memory.*`.
    managed(Spec("GET", "/v1/memory", "List an agent's memory entries under a path",
                 "manage", None, a.MemoryPage, query=(*PAGE, "agent", "path"),
                 tool="memory.list", errors=(404,), operation="listMemory", tag="memory")),
    managed(Spec("GET", "/v1/memory/entry", "Read a memory entry", "manage", None,
                 a.MemoryEntry, query=("agent", "path"), tool="memory.read", errors=(404,),
                 operation="readMemory", tag="memory")),
    managed(Spec("PUT", "/v1/memory/entry", "Write a memory entry", "manage", c.MemoryWrite,
                 a.MemoryEntry, 200, tool="memory.write", errors=(404,), also=(201,),
                 operation="writeMemory", tag="memory")),
    managed(Spec("DELETE", "/v1/memory/entry", "Delete a memory entry", "manage", status=204,
                 query=("agent", "path"), tool="memory.delete", errors=(404,),
                 operation="deleteMemory", tag="memory")),
    # Feeds (api.service.feeds): the built-in tools `feeds.*`.
    *_crud("feeds", "Feed", "id", a.FeedPage, r.Feed, c.FeedCreate, c.FeedUpdate,
           errors={"create": ()}, tagged=True),
    managed(Spec("POST", "/v1/feeds/{feed}/messages", "Publish a message to a feed", "manage",
                 c.FeedPublish, a.FeedMessage, 201, tool="feeds.publish",
                 operation="publishMessage", tag="feeds")),
    managed(Spec("GET", "/v1/feeds/{feed}/messages",
                 "Read a feed's messages numbered after a sequence number", "manage", None,
                 a.MessagePage, query=("after_seq", "limit"), tool="feeds.messages",
                 operation="readMessages", tag="feeds")),
    (Spec("POST", "/v1/tokens", "Issue a token (shown once)", "admin", m.TokenCreate,
          a.TokenIssued, status=201, errors=(404,), operation="issueToken", tag="tokens"),
     create_token),
    (Spec("GET", "/v1/tokens", "List tokens, with their last use (never a token)", "admin",
          None, a.TokenPage, query=PAGE, operation="listTokens", tag="tokens"), list_tokens),
    (Spec("DELETE", "/v1/tokens/{id}", "Revoke a token", "admin", status=204,
          operation="revokeToken", tag="tokens"), delete_token),
]  # fmt: skip
