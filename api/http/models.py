"""What the endpoints read: the request models (pydantic v2), which `/openapi.json` gives
with the answers' (api.http.answers)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.service.budget import MAX_USD, amount_text
from api.service.tokens import MAX_NAME as MAX_TOKEN_NAME
from grammar.source import MAX_NAME_CHARS

# Agent, tool and other ids: 1 to 256 characters. The DSL's own limit on a declared name
# (E0120), so that every role, profile, hook, toolset and tool a policy declares can be
# named in a request.
MAX_ID = MAX_NAME_CHARS
MAX_BATCH = 1000  # calls in one batch
MAX_COST = int(MAX_USD)  # USD: the largest `expected_cost`, as an int for a fast comparison
Id = Field(min_length=1, max_length=MAX_ID)
# An id a request may name (a thread, a turn, a connection): bounded like the others, so a
# megabyte "id" is refused as such, not looked up and echoed back in a 404. (Every id or
# name a body gives is at most MAX_ID characters, and so is one in a path or a query:
# api.http.routing.bounded_id.)
OptionalId = Field(default=None, min_length=1, max_length=MAX_ID)


def _exact(value: Any) -> Any:
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


class DecisionRequest(Strict):
    agent: str = Id
    tool: str = Field(min_length=1, max_length=MAX_ID)
    args: dict[str, Any] = Field(default_factory=dict)
    thread: str | None = OptionalId
    turn: str | None = OptionalId
    context: dict[str, Any] | None = None
    expected_cost: Decimal | None = Field(
        default=None, ge=0, le=MAX_USD, allow_inf_nan=False, description="USD, 0 to 10^9"
    )
    connection: str | None = OptionalId

    _exact_cost = field_validator("expected_cost", mode="before")(_exact)


class BatchRequest(Strict):
    calls: list[DecisionRequest] = Field(min_length=1, max_length=MAX_BATCH)


class FitRequest(Strict):
    agent: str = Id
    kind: Literal["role", "profile"] = "role"
    source: str | None = Field(default=None, max_length=256_000)
    profile: str | None = Field(default=None, max_length=MAX_ID)


class TurnRequest(Strict):
    agent: str = Id
    thread: str | None = OptionalId


class PolicyFile(Strict):
    path: str = Field(min_length=1, max_length=512)
    text: str


class PolicyUpload(Strict):
    files: list[PolicyFile] = Field(min_length=1, max_length=10_000)
    note: str = ""


class Budget(Strict):
    amount: Decimal = Field(ge=0, le=MAX_USD, allow_inf_nan=False, description="USD, 0 to 10^9")
    period: Literal["24h", "7d", "total"]

    _exact_amount = field_validator("amount", mode="before")(_exact)


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
    status: Literal["idle", "running", "stopped", "error"] | None = None

    _strip_name = field_validator("name")(_stripped)


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

    _exact_max_cost = field_validator("max_cost", mode="before")(_exact)


class ThreadUpdate(Strict):
    status: Literal["open", "running", "waiting", "done", "failed", "cancelled"] | None = None


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


class Reject(Strict):
    reason: str | None = Field(default=None, max_length=4096)


class TokenCreate(Strict):
    scope: Literal["admin", "decide", "agent"]
    agent: str | None = Field(default=None, max_length=MAX_ID)
    name: str = Field(default="", max_length=MAX_TOKEN_NAME)


def dump(model: BaseModel) -> dict[str, Any]:
    """A request model as tool-call arguments: only what the caller sent."""
    return model.model_dump(exclude_unset=True)
