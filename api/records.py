"""The domain's records: one frozen, typed value for each kind of resource the service
keeps (agent, identity, thread, turn, approval, token, connection, revision).

The core builds and reads these, never bare mappings: a record is written to the store as
`stored()` and read back with `read()`, which checks the document's fields (a document
that does not have them is StoreDamaged, never a half-read value). The HTTP API answers
with the records themselves: api.http.answers reuses these classes as its response
models, `/openapi.json` is generated from them, and a record is written as JSON by its
`shown()` fields (api.service.encoding), so what the document describes is what the
handlers send. Fields in `HIDDEN` (a sealed credential, a token's hash) are kept by the
store and never shown: not in an answer, not in the schema. Each has a default, so an
answer, which never holds one, still reads as its record (a client's, a test's); one
missing from a stored document reads as that default, which grants nothing (an empty
hash matches no token).

A record read back keeps exactly the fields its document has (`stored()` and `shown()`
dump what was set, not defaults): a document written before a field existed reads with
the default and writes back as it was, so its entity tag (api.service.etags, a digest of
the stored document) stays the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.json_schema import SkipJsonSchema

from policy import identities
from policy.store import Doc, StoreDamaged

Effect = Literal["allow", "deny", "pause"]
Period = Literal["1m", "1h", "24h", "7d", "total"]
AgentStatus = Literal["idle", "running", "stopped", "error"]
ThreadStatus = Literal["open", "running", "waiting", "done", "failed", "cancelled"]
ApprovalStatus = Literal["pending", "approved", "rejected"]
Scope = Literal["admin", "decide", "agent"]


class Record(BaseModel):
    """A stored document of one kind (`KIND`), typed and frozen: a change is a new record
    (`changed`)."""

    model_config = ConfigDict(frozen=True)

    KIND: ClassVar[str]
    HIDDEN: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def read(cls, doc: Mapping[str, Any]) -> Self:
        """The record a stored document holds; StoreDamaged if it lacks a field or holds
        one of the wrong type (written behind the service's back: never served)."""
        try:
            # (the model's validator itself: model_validate's own checks cost a
            # decision that names a thread or a turn a microsecond more)
            found: Self = cls.__pydantic_validator__.validate_python(doc)
            return found
        except ValidationError as exc:
            # Where and what, never a value: a document may hold a secret.
            wrong = ", ".join(
                f"`{'.'.join(map(str, error['loc']))}` {error['type']}" for error in exc.errors()
            )
            what = f"document {cls.KIND}/{doc.get('id', doc.get('revision', '?'))}"
            raise StoreDamaged(
                what, f"its fields do not read as a {cls.__name__}: {wrong}"
            ) from None

    def stored(self) -> Doc:
        """The document the store keeps: every field set, the hidden ones too."""
        return self.model_dump(exclude_unset=True)

    def shown(self) -> Doc:
        """What an answer shows: the fields set, less the hidden ones."""
        return self.model_dump(exclude_unset=True, exclude=set(self.HIDDEN))

    def changed(self, **fields: Any) -> Self:
        """This record with `fields` replaced, checked as a new one is."""
        return self.model_validate({**self.stored(), **fields})


# ---- decisions ----------------------------------------------------------------------------
class Reason(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: str
    message: str
    role: str | None = None
    hook: str | None = None
    location: str | None = None


class ConditionError(BaseModel):
    model_config = ConfigDict(frozen=True)

    location: str
    message: str
    effect: str  # what the erroring rule or hook did: "ignored allow", "applied deny", ...


class DecisionResponse(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    seq: int
    effect: Effect
    args: dict[str, Any] | None
    reasons: list[Reason]
    errors: list[ConditionError]
    near_misses: list[Reason]
    revision: int
    approval_id: str | None = None
    # With `?receipt=true`: the decision signed by the server (api.service.receipts), a
    # COSE_Sign1 in base64url; `charter receipt verify` checks it offline.
    receipt: str | None = None


# ---- resources ----------------------------------------------------------------------------
class StoredBudget(BaseModel):
    model_config = ConfigDict(frozen=True)

    amount: str  # USD, a decimal's text
    period: Period


class Agent(Record):
    KIND = "agents"
    HIDDEN = frozenset({"context_at"})

    id: str
    name: str
    identity: str
    profile: str
    budget: StoredBudget | None = None
    metadata: dict[str, Any] = {}
    parent: str | None = None  # the agent that made it; None: a root
    status: AgentStatus = "idle"
    created_at: int
    updated_at: int
    # Its Seed `AgentDefinition`, normalized (policy.seed), when it was made or changed
    # from one (`PUT /v1/agents/{id}/definition`); its `tools` narrow what it may call
    # (api.service.seedgrants). None: an agent of Charter's own, its profile alone.
    definition: dict[str, Any] | None = None
    # When what conditions read of it (`agent.name`, `.identity`, `.metadata`) last
    # changed, ms since the epoch: a logged decision explained later reads the agent as it
    # is only when that is before the call (api.service.logexplain). A change of its
    # status or budget alone leaves it. None: not recorded (`updated_at` stands for it).
    context_at: SkipJsonSchema[int | None] = None


class Identity(Record):
    """A signing identity: its Seed secret's metadata. The sealed seed is never shown."""

    KIND = "secrets"

    id: str
    account_id: str
    secret_name: str
    name: str | None
    label: str | None
    metadata: dict[str, Any]
    created_at: int
    updated_at: int

    @classmethod
    def of_secret(cls, doc: Doc) -> Identity:
        """The identity a stored Seed secret holds (policy.identities keeps each identity
        as a document of kind "secrets"): its public view, read as a stored document is."""
        return cls.read(identities.public_view(doc))


class Thread(Record):
    KIND = "threads"

    id: str
    agent: str
    prompt: str
    max_cost: str | None  # USD, a decimal's text
    depth: int = 0
    status: ThreadStatus
    created_at: int
    updated_at: int


class Feed(Record):
    """A feed of messages, numbered 1, 2, ... without gaps (api.service.feeds)."""

    KIND = "feeds"

    id: str
    name: str
    last_seq: int  # the newest message's number; 0 while it has none
    created_at: int
    updated_at: int


# How long a turn stored without its `ends_at` runs, from its `created_at`: an hour.
UNSTAMPED_TURN_MS = 3_600_000


class Turn(Record):
    """A turn pins its agent's calls to a revision and a profile until `ends_at`."""

    KIND = "turns"

    id: str
    agent: str
    thread: str | None
    revision: int
    profile: str | None = Field(
        default=None,
        description="null for a turn stored without one: its calls are decided on the "
        "agent's profile",
    )
    created_at: int
    ends_at: int = Field(description="ms since the epoch: from then on, its calls are 409")

    @model_validator(mode="before")
    @classmethod
    def _stamped(cls, doc: Any) -> Any:
        if isinstance(doc, Mapping) and "ends_at" not in doc and "created_at" in doc:
            return {**doc, "ends_at": int(doc["created_at"]) + UNSTAMPED_TURN_MS}
        return doc


class Connection(Record):
    """The credential is sealed at rest and never shown."""

    KIND = "connections"
    HIDDEN = frozenset({"sealed_credential"})

    id: str
    name: str
    toolset: str
    owner: str | None = None  # an identity; None: the workspace
    sealed_credential: SkipJsonSchema[bytes] = b""
    created_at: int
    updated_at: int


class Approval(Record):
    """A pause's approval; its call's arguments as logged (secrets redacted)."""

    KIND = "approvals"
    HIDDEN = frozenset({"sealed_call", "hook_digests"})

    id: str
    status: ApprovalStatus
    agent: str
    tool: str
    args: dict[str, Any] | None
    thread: str | None
    turn: str | None
    connection: str | None
    revision: int
    reasons: list[Reason]
    management: bool  # the call is an agent's management request, run once approved
    # What the call would be charged (USD, a decimal's text): its `expected_cost`, or None
    # when it gave none. A person weighs it against the agent's remaining budget.
    expected_cost: str | None = None
    # The call as it was made, sealed (its arguments unredacted), decided again when
    # approved; and {hook name: digest} of the hooks that paused it (api.service.approved).
    sealed_call: SkipJsonSchema[bytes | None] = None
    hook_digests: SkipJsonSchema[dict[str, str] | None] = None
    created_at: int
    decided_at: int | None
    decided_by: str | None
    final: DecisionResponse | None  # the decision the approval's re-check made
    # An agent's `PATCH` or `DELETE` sent with `If-Match`: approving runs it only while the
    # resource still has that `ETag` (else 412 `resource-moved`). Set when the approval
    # opens, so an answer lists it before a rejection's `reason`, in the order they are set.
    if_match: str | None = None
    reason: str | None = None  # a rejection's


class Token(Record):
    """A bearer token as kept: its SHA-256, never the token."""

    KIND = "tokens"
    HIDDEN = frozenset({"hash"})

    id: str
    hash: SkipJsonSchema[str] = ""
    scope: Scope
    agent: str | None = None  # the agent an agent token acts as
    name: str = ""
    created_at: int
    # ms since the epoch: from then on it is refused (`token-expired`); None: never
    expires_at: int | None = None
    # ms since the epoch, to the minute (api.service.tokenuse); None: never used
    last_used_at: int | None = None


class RevisionSummary(BaseModel):
    model_config = ConfigDict(frozen=True)

    toolsets: list[str]
    roles: list[str]
    hooks: list[str]
    profiles: list[str]
    tests: int


class Revision(Record):
    """A policy revision as its history shows it."""

    KIND = "revisions"

    revision: int
    author: str
    note: str
    created_at: int
    summary: RevisionSummary
    files: list[str]  # their paths (`GET /v1/policy?revision=` gives the text)


# The records kept as documents, by their kind (policy.store's `kind`).
DOCUMENTS: dict[str, type[Record]] = {
    record.KIND: record for record in (Agent, Thread, Turn, Connection, Approval, Token, Feed)
}
