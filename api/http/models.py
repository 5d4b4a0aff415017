"""Request and response models (pydantic v2); `/openapi.json` is generated from these."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.service.budget import MAX_USD

MAX_ID = 256  # agent, tool and other ids: 1 to 256 characters
MAX_BATCH = 1000  # calls in one batch
MAX_COST = int(MAX_USD)  # USD: the largest `expected_cost`, as an int for a fast comparison
Id = Field(min_length=1, max_length=MAX_ID)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DecisionRequest(Strict):
    agent: str = Id
    tool: str = Field(min_length=1, max_length=MAX_ID)
    args: dict[str, Any] = Field(default_factory=dict)
    thread: str | None = None
    turn: str | None = None
    context: dict[str, Any] | None = None
    expected_cost: Decimal | None = Field(
        default=None, ge=0, le=MAX_USD, allow_inf_nan=False, description="USD, 0 to 10^9"
    )
    connection: str | None = None


class BatchRequest(Strict):
    calls: list[DecisionRequest] = Field(min_length=1, max_length=MAX_BATCH)


class Reason(BaseModel):
    kind: str
    message: str
    role: str | None = None
    hook: str | None = None
    location: str | None = None


class DecisionResponse(BaseModel):
    id: str
    seq: int
    effect: Literal["allow", "deny", "pause"]
    args: dict[str, Any] | None
    reasons: list[Reason]
    errors: list[dict[str, Any]]
    near_misses: list[Reason]
    revision: int
    approval_id: str | None = None


class BatchResponse(BaseModel):
    decisions: list[DecisionResponse]


class LogPage(BaseModel):
    decisions: list[dict[str, Any]]
    next_after_seq: int


class Page(BaseModel):
    items: list[dict[str, Any]]
    next_cursor: str | None


class FitRequest(Strict):
    agent: str = Id
    kind: Literal["role", "profile"] = "role"
    source: str | None = Field(default=None, max_length=256_000)
    profile: str | None = None


class TurnRequest(Strict):
    agent: str = Id
    thread: str | None = None


class Turn(BaseModel):
    id: str
    agent: str
    thread: str | None
    revision: int
    profile: str
    created_at: int
    ends_at: int = Field(description="ms since the epoch: from then on, its calls are 409")


class PolicyFile(Strict):
    path: str = Field(min_length=1, max_length=512)
    text: str


class PolicyUpload(Strict):
    files: list[PolicyFile] = Field(min_length=1, max_length=10_000)
    note: str = ""


class Policy(BaseModel):
    revision: int
    files: list[PolicyFile]


class Budget(Strict):
    amount: Decimal = Field(ge=0, le=MAX_USD, allow_inf_nan=False, description="USD, 0 to 10^9")
    period: Literal["24h", "7d", "total"]


def _stripped(name: str | None) -> str | None:
    # An agent's name is stored stripped (api.service.resources), so it is stripped here,
    # before an agent's request is decided: `deny agents.create where args.name == "root"`
    # must see the `root` that `" root "` becomes. The same str.strip(), so the service's
    # own strip changes nothing more; a blank name is still its 400 `invalid-name`.
    return None if name is None else name.strip()


class AgentCreate(Strict):
    name: str = Field(min_length=1, max_length=256)
    profile: str = Id
    identity: str | None = None
    budget: Budget | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    _strip_name = field_validator("name")(_stripped)


class AgentUpdate(Strict):
    name: str | None = Field(default=None, min_length=1, max_length=256)
    profile: str | None = None
    budget: Budget | None = None
    metadata: dict[str, Any] | None = None
    status: Literal["idle", "running", "stopped", "error"] | None = None

    _strip_name = field_validator("name")(_stripped)


class Agent(BaseModel):
    id: str
    name: str
    identity: str
    profile: str
    budget: dict[str, str] | None
    metadata: dict[str, Any]
    parent: str | None
    status: Literal["idle", "running", "stopped", "error"]
    created_at: int
    updated_at: int


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


class Identity(BaseModel):
    id: str
    account_id: str
    secret_name: str
    name: str | None
    label: str | None
    metadata: dict[str, Any]
    created_at: int
    updated_at: int


class ThreadCreate(Strict):
    prompt: str = Field(default="", max_length=65_536)
    agent: str | None = None
    max_cost: Decimal | None = Field(
        default=None, ge=0, le=MAX_USD, allow_inf_nan=False, description="USD, 0 to 10^9"
    )


class ThreadUpdate(Strict):
    status: Literal["open", "running", "waiting", "done", "failed", "cancelled"] | None = None


class ConnectionCreate(Strict):
    name: str = Field(min_length=1, max_length=256)
    toolset: str = Id
    credential: str = Field(min_length=1, max_length=65_536)
    owner: str | None = Field(default=None, description="an identity; absent = the workspace")


class ConnectionUpdate(Strict):
    name: str | None = Field(default=None, max_length=256)
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
    agent: str | None = None
    name: str = Field(default="", max_length=256)


class Problem(BaseModel):
    type: str
    title: str
    status: int
    code: str
    detail: str


def dump(model: BaseModel) -> dict[str, Any]:
    """A request model as tool-call arguments: only what the caller sent."""
    return model.model_dump(exclude_unset=True)
