"""The management operations' commands: one frozen, strict model for each built-in tool
(`agents.create`, `threads.list`, ...) holding all of its arguments, which every front end
builds and the core's operations take (api.service.manage).

A command's fields are the tool's arguments: the body's (the body models below, which
`/openapi.json` gives as the HTTP request schemas), the path's (`id`, or `name` for a
role and the policy's other views) and a list's (`cursor`, `limit` and its filters).
Each class extends the body model of its tool, so a body is checked exactly as its schema
says, and a command adds only what the path or the query gives. `COMMANDS` names the
class of each tool (tests/api/test_commands.py checks that it covers every operation).

`Command.args()` is what an agent's request is decided on: the fields the caller gave,
without those given as null. A rewrite hook's changed arguments are read back into the
same class (api.service.manage), so an operation always runs on a valid command.

This module is the core's: it imports nothing of the HTTP layer.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.records import AgentStatus, Period, ThreadStatus
from api.service.budget import MAX_USD, amount_text
from grammar.source import MAX_NAME_CHARS

# Agent, tool and other ids: 1 to 256 characters. The DSL's own limit on a declared name
# (E0120), so that every role, profile, hook, toolset and tool a policy declares can be
# named in a request.
MAX_ID = MAX_NAME_CHARS
Id = Field(min_length=1, max_length=MAX_ID)
# An id a request may name (a thread, a turn, a connection): bounded like the others, so a
# megabyte "id" is refused as such, not looked up and echoed back in a 404. (Every id or
# name a body gives is at most MAX_ID characters, and so is one in a path or a query:
# api.http.routing.bounded_id.)
OptionalId = Field(default=None, min_length=1, max_length=MAX_ID)


def exact(value: Any) -> Any:
    # A USD amount's validator, before its own: a float is read as the Decimal of its
    # exact value. pydantic reads it as the Decimal of its shortest text, another number:
    # the readers (api.http.body, api.http.calls) keep a number a float only when the
    # float is exactly what its text says, so a `max_cost` of
    # 0.1000000000000000055511151231257827021181583404541015625 (the double nearest 0.1)
    # must not become 0.1 and meet `args.max_cost > 0.1` as false. A string is taken only
    # when it is written as a JSON number is (pydantic's Decimal reads `٥` as 5, `1_0` as
    # 10).
    if type(value) is str:
        return amount_text(value)
    return Decimal(value) if type(value) is float else value


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---- the bodies -------------------------------------------------------------------------
class Budget(Strict):
    amount: Decimal = Field(ge=0, le=MAX_USD, allow_inf_nan=False, description="USD, 0 to 10^9")
    period: Period

    _exact_amount = field_validator("amount", mode="before")(exact)


class Rate(Strict):
    """A profile's `rate N calls per P` (docs/dsl.md, "Profiles")."""

    calls: int = Field(ge=0, le=10**12)
    period: Period


def _stripped(name: str | None) -> str | None:
    # An agent's name is stored stripped (api.service.resources), so it is stripped here,
    # before an agent's request is decided: `deny agents.create where args.name == "root"`
    # must see the `root` that `" root "` becomes. The same str.strip(), so the service's
    # own strip changes nothing more; a blank name is still its 400 `invalid-name`.
    return None if name is None else name.strip()


class AgentCreate(Strict):
    name: str = Field(min_length=1, max_length=256)
    profile: str = Id
    identity: str | None = Field(default=None, max_length=MAX_ID)
    budget: Budget | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    _strip_name = field_validator("name")(_stripped)


class AgentUpdate(Strict):
    name: str | None = Field(default=None, min_length=1, max_length=256)
    profile: str | None = Field(default=None, max_length=MAX_ID)
    budget: Budget | None = None
    metadata: dict[str, Any] | None = None
    status: AgentStatus | None = None

    _strip_name = field_validator("name")(_stripped)


class AgentDefinitionPut(Strict):
    # (an object of any fields: policy.seed checks them, with Seed's own messages)
    definition: dict[str, Any] = Field(description="a Seed `AgentDefinition`")
    profile: str | None = Field(
        default=None, max_length=MAX_ID, description="required to create; absent: kept"
    )


class IdentityCreate(Strict):
    label: str | None = Field(default=None, max_length=256)
    request_id: str | None = Field(default=None, max_length=256)


class IdentityImport(Strict):
    seed: str = Field(min_length=1, max_length=512, description="32 bytes: 64 hex digits or base64")
    label: str | None = Field(default=None, max_length=256)


class IdentityUpdate(Strict):
    label: str | None = Field(default=None, max_length=256)
    name: str | None = Field(default=None, max_length=256)
    metadata: dict[str, Any] | None = None


class ThreadCreate(Strict):
    prompt: str = Field(default="", max_length=65_536)
    agent: str | None = Field(default=None, max_length=MAX_ID)
    max_cost: Decimal | None = Field(
        default=None, ge=0, le=MAX_USD, allow_inf_nan=False, description="USD, 0 to 10^9"
    )

    _exact_max_cost = field_validator("max_cost", mode="before")(exact)


# How long a `POST /v1/threads/{id}/wait` may wait, in seconds.
MAX_THREAD_WAIT = 60


class ThreadWait(Strict):
    timeout: int = Field(default=MAX_THREAD_WAIT, ge=0, le=MAX_THREAD_WAIT, strict=True,
                         description="seconds, 0 to 60")  # fmt: skip


class ThreadUpdate(Strict):
    status: ThreadStatus | None = None


class ConnectionCreate(Strict):
    name: str = Field(min_length=1, max_length=256)
    toolset: str = Id
    credential: str = Field(min_length=1, max_length=65_536)
    owner: str | None = Field(
        default=None, max_length=MAX_ID, description="an identity; absent = the workspace"
    )


class ConnectionUpdate(Strict):
    name: str | None = Field(default=None, min_length=1, max_length=256)  # (as a create's)
    credential: str | None = Field(default=None, min_length=1, max_length=65_536)


class RoleWrite(Strict):
    name: str = Field(min_length=1, max_length=128)
    source: str = Field(min_length=1, max_length=256_000)


class RoleUpdate(Strict):
    source: str = Field(min_length=1, max_length=256_000)


# A profile's `roles` and `hooks`: names, at most 1,024 of them (each checked as a name by
# the operation: api.service.declsources).
Names = list[Annotated[str, Field(min_length=1, max_length=MAX_ID)]]
MAX_NAMES = 1024


class ProfileWrite(Strict):
    name: str = Field(min_length=1, max_length=128)
    roles: Names = Field(default_factory=list, max_length=MAX_NAMES)
    hooks: Names = Field(default_factory=lambda: ["default"], max_length=MAX_NAMES)
    budget: Budget | None = None
    rate: Rate | None = None


class ProfileUpdate(Strict):
    roles: Names | None = Field(default=None, max_length=MAX_NAMES)
    hooks: Names | None = Field(default=None, max_length=MAX_NAMES)
    budget: Budget | None = Field(default=None, description="null drops the profile's budget")
    rate: Rate | None = Field(default=None, description="null drops the profile's rate")


class HookWrite(Strict):
    name: str = Field(min_length=1, max_length=128)
    source: str = Field(min_length=1, max_length=256_000)


class HookUpdate(Strict):
    source: str = Field(min_length=1, max_length=256_000)


class ToolsetWrite(Strict):
    name: str = Field(min_length=1, max_length=128)
    source: str = Field(min_length=1, max_length=256_000)
    url: str | None = Field(default=None, min_length=1, max_length=2048)


class ToolsetUpdate(Strict):
    source: str | None = Field(default=None, min_length=1, max_length=256_000)
    url: str | None = Field(default=None, min_length=1, max_length=2048)


class Reject(Strict):
    reason: str | None = Field(default=None, max_length=4096)


class ScheduleCreate(Strict):
    name: str = Field(min_length=1, max_length=256)
    cron: str = Field(description="5 fields: minute hour day-of-month month day-of-week")
    prompt: str = Field(max_length=65_536)
    agent: str | None = Field(default=None, max_length=MAX_ID)


class ScheduleUpdate(Strict):
    cron: str | None = None
    prompt: str | None = Field(default=None, max_length=65_536)


# A memory entry's content: at most 65,536 characters (api.service.memoryentries).
MAX_MEMORY_CONTENT = 65_536


class MemoryWrite(Strict):
    # (`agent`: whose entry; an agent's token leaves it out, or names itself)
    agent: str | None = OptionalId
    path: str = Field(description="`/`-separated, as `/notes/today`")
    content: str = Field(max_length=MAX_MEMORY_CONTENT)


# A feed's name (not unique: a feed is named by its id) and a message's text, in characters
# (api.service.feeds).
MAX_FEED_NAME = 256
MAX_MESSAGE = 65_536


class FeedCreate(Strict):
    name: str = Field(min_length=1, max_length=MAX_FEED_NAME)


class FeedUpdate(Strict):
    name: str | None = Field(default=None, min_length=1, max_length=MAX_FEED_NAME)


class FeedPublish(Strict):
    message: str = Field(max_length=MAX_MESSAGE)


# ---- the commands -----------------------------------------------------------------------
class Command(BaseModel):
    """A management tool's arguments, all of them, checked: built by a front end (an HTTP
    request's body, path and query; the command line) or read back from a rewrite hook's
    arguments or an approval's stored call, and run by the operation of `tool`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: ClassVar[str]

    def args(self) -> dict[str, Any]:
        """The tool call's arguments, as an agent's request is decided on them: the fields
        the caller gave (a default it left is not one), but for those it gave as null."""
        given = self.model_dump(exclude_unset=True)
        return {key: value for key, value in given.items() if value is not None}

    def given(self, *names: str) -> bool:
        """Whether any of the fields `names` is among `args()`: given, and not as null."""
        return any(name in self.model_fields_set and getattr(self, name) is not None
                   for name in names)  # fmt: skip


class ById(Command):
    """A command on one document, named by the path's `{id}`."""

    id: str = Id


class ByName(Command):
    """A command on one declaration of the policy, named by the path's `{name}`."""

    name: str = Id


class Listing(Command):
    """A page of a list: after `cursor` (one the list gave), at most `limit` items (the
    operation checks both: api.service.pages)."""

    cursor: str | None = None
    limit: int | None = None


# Each tool's command. The path's or the list's fields come first in the bases, so that a
# command's arguments list the body's fields first, as the request gives them.
class ListIdentities(Listing):
    tool = "identities.list"


class GetIdentity(ById):
    tool = "identities.get"


class CreateIdentity(Command, IdentityCreate):
    tool = "identities.create"


class ImportIdentity(Command, IdentityImport):
    tool = "identities.import"


class UpdateIdentity(ById, IdentityUpdate):
    tool = "identities.update"


class DeleteIdentity(ById):
    tool = "identities.delete"


class ListAgents(Listing):
    tool = "agents.list"


class GetAgent(ById):
    tool = "agents.get"


# An agent's name is stripped as it is read (`_stripped`), and read again from a stripped
# name (a command built from a body, a rewrite's or an approval's arguments): the body's
# `min_length` holds of the name as sent, and a name blank once stripped is the
# operation's own refusal, `invalid-name`.
class CreateAgent(Command, AgentCreate):
    tool = "agents.create"

    name: str = Field(max_length=256)


class UpdateAgent(ById, AgentUpdate):
    tool = "agents.update"

    name: str | None = Field(default=None, max_length=256)


class DeleteAgent(ById):
    tool = "agents.delete"


class DefineAgent(ById, AgentDefinitionPut):
    tool = "agents.define"


class GetAgentDefinition(ById):
    tool = "agents.get_definition"


class AgentSpending(ById):
    tool = "agents.spending"


class ListThreads(Listing):
    tool = "threads.list"

    agent: str | None = OptionalId  # (the agent whose threads are listed)


class GetThread(ById):
    tool = "threads.get"


class CreateThread(Command, ThreadCreate):
    tool = "threads.create"


class UpdateThread(ById, ThreadUpdate):
    tool = "threads.update"


class DeleteThread(ById):
    tool = "threads.delete"


class ThreadSpending(ById):
    tool = "threads.spending"


class WaitThread(ById, ThreadWait):
    tool = "threads.wait"


class ThreadEvents(ById, Listing):
    tool = "threads.events"


class ListConnections(Listing):
    tool = "connections.list"


class GetConnection(ById):
    tool = "connections.get"


class CreateConnection(Command, ConnectionCreate):
    tool = "connections.create"


class UpdateConnection(ById, ConnectionUpdate):
    tool = "connections.update"


class DeleteConnection(ById):
    tool = "connections.delete"


class ListRoles(Listing):
    tool = "roles.list"


class GetRole(ByName):
    tool = "roles.get"


class CreateRole(Command, RoleWrite):
    tool = "roles.create"


class UpdateRole(ByName, RoleUpdate):
    tool = "roles.update"


class DeleteRole(ByName):
    tool = "roles.delete"


class ListProfiles(Listing):
    tool = "profiles.list"


class GetProfile(ByName):
    tool = "profiles.get"


class CreateProfile(Command, ProfileWrite):
    tool = "profiles.create"


class UpdateProfile(ByName, ProfileUpdate):
    tool = "profiles.update"


class DeleteProfile(ByName):
    tool = "profiles.delete"


class ListHooks(Listing):
    tool = "hooks.list"


class GetHook(ByName):
    tool = "hooks.get"


class CreateHook(Command, HookWrite):
    tool = "hooks.create"


class UpdateHook(ByName, HookUpdate):
    tool = "hooks.update"


class DeleteHook(ByName):
    tool = "hooks.delete"


class ListToolsets(Listing):
    tool = "toolsets.list"


class GetToolset(ByName):
    tool = "toolsets.get"


class CreateToolset(Command, ToolsetWrite):
    tool = "toolsets.create"


class UpdateToolset(ByName, ToolsetUpdate):
    tool = "toolsets.update"


class DeleteToolset(ByName):
    tool = "toolsets.delete"


class ListApprovals(Listing):
    tool = "approvals.list"

    # (checked by the operation, `invalid-status`, as a stored approval's status is read)
    status: str | None = None


class GetApproval(ById):
    tool = "approvals.get"


class ApproveApproval(ById):
    tool = "approvals.approve"


class RejectApproval(ById, Reject):
    tool = "approvals.reject"


class ListSchedules(Listing):
    tool = "schedules.list"

    agent: str | None = OptionalId  # (the agent whose schedules are listed)


class GetSchedule(ById):
    tool = "schedules.get"


class CreateSchedule(Command, ScheduleCreate):
    tool = "schedules.create"


class UpdateSchedule(ById, ScheduleUpdate):
    tool = "schedules.update"


class DeleteSchedule(ById):
    tool = "schedules.delete"


class RunSchedule(ById):
    tool = "schedules.run"


class MemoryCommand(Command):
    """A memory tool's command: `agent`, whose entries (an admin names it; an agent's
    token leaves it out, or names itself)."""

    agent: str | None = OptionalId
    path: str | None = None  # (a list's prefix, where None is `/`; an entry's path: given)


class ListMemory(MemoryCommand, Listing):
    tool = "memory.list"


class ReadMemory(MemoryCommand):
    tool = "memory.read"

    path: str


class WriteMemory(MemoryCommand, MemoryWrite):
    tool = "memory.write"

    path: str  # (the body's, required: MemoryCommand's optional one comes first)


class DeleteMemory(MemoryCommand):
    tool = "memory.delete"

    path: str


class ListFeeds(Listing):
    tool = "feeds.list"


class GetFeed(ById):
    tool = "feeds.get"


class CreateFeed(Command, FeedCreate):
    tool = "feeds.create"


class UpdateFeed(ById, FeedUpdate):
    tool = "feeds.update"


class DeleteFeed(ById):
    tool = "feeds.delete"


class PublishMessage(Command, FeedPublish):
    """A message appended to feed `feed` (the path's `{feed}`)."""

    tool = "feeds.publish"

    feed: str = Id


class ReadMessages(Command):
    """Feed `feed`'s messages numbered after `after_seq` (None: from the first), at most
    `limit` (None: DEFAULT_LIMIT of api.service.pages)."""

    tool = "feeds.messages"

    feed: str = Id
    after_seq: int | None = Field(default=None, ge=0)
    limit: int | None = None


COMMANDS: dict[str, type[Command]] = {
    command.tool: command
    for command in (
        ListIdentities, GetIdentity, CreateIdentity, ImportIdentity, UpdateIdentity,
        DeleteIdentity,
        ListAgents, GetAgent, CreateAgent, UpdateAgent, DeleteAgent, DefineAgent,
        GetAgentDefinition, AgentSpending,
        ListThreads, GetThread, CreateThread, UpdateThread, DeleteThread, ThreadSpending,
        WaitThread, ThreadEvents,
        ListConnections, GetConnection, CreateConnection, UpdateConnection, DeleteConnection,
        ListRoles, GetRole, CreateRole, UpdateRole, DeleteRole,
        ListProfiles, GetProfile, CreateProfile, UpdateProfile, DeleteProfile,
        ListHooks, GetHook, CreateHook, UpdateHook, DeleteHook,
        ListToolsets, GetToolset, CreateToolset, UpdateToolset, DeleteToolset,
        ListApprovals, GetApproval, ApproveApproval, RejectApproval,
        ListMemory, ReadMemory, WriteMemory, DeleteMemory,
        ListSchedules, GetSchedule, CreateSchedule, UpdateSchedule, DeleteSchedule,
        RunSchedule,
        ListFeeds, GetFeed, CreateFeed, UpdateFeed, DeleteFeed, PublishMessage, ReadMessages,
    )
}  # fmt: skip
