"""What the endpoints answer: the response models `/openapi.json` is generated from
(api.http.openapi), one for each operation's answer as its handler builds it.

A resource's answer is its domain record (api.records), written by the record's own
`shown()`: the model is the serialiser. The other answers (decisions, pages, listings)
are built by their handlers; tests/api/test_openapi.py checks real answers of a live
server against every model, with no field left undescribed. A field that holds what a caller sent (a call's
`args`, an agent's `metadata`) or the policy's own vocabulary (a condition as JSON) is
`dict[str, Any]`.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from api.http.models import PolicyFile
from api.records import (
    Agent,
    Approval,
    ConditionError,
    Connection,
    DecisionResponse,
    Effect,
    Feed,
    Identity,
    Period,
    Reason,
    Revision,
    StoredBudget,
    Thread,
    Token,
)


# ---- decisions ----------------------------------------------------------------------------
class BatchResponse(BaseModel):
    decisions: list[DecisionResponse]


class CostCharged(BaseModel):
    """A decision's cost, reported once its call ran, and what it was charged to."""

    decision: str
    seq: int
    agent: str
    amount: str  # USD, as reported
    micros: int  # what the ledger was charged, rounded up to whole micro-USD
    charged: list[
        str
    ]  # the ledger subjects: `agent:<id>` (the agent, its ancestors), `thread:<id>`
    at: int  # when it was charged, ms since the epoch
    by: str  # the id of the token that reported it


class LoggedDecision(BaseModel):
    """A row of the log, every field filled in (api.service.logrows.expand)."""

    seq: int
    id: str
    at: int  # when it was decided, ms since the epoch
    agent: str
    profile: str
    tool: str
    args: dict[str, Any] | None
    effect: Effect
    reasons: list[Reason] | None  # (None: the reasons' record is gone)
    revision: int
    final_args: dict[str, Any] | None
    errors: list[ConditionError]
    near_misses: list[Reason]
    thread: str | None
    turn: str | None
    expected_cost: str | None  # USD, a decimal's text
    approval: str | None


class DamagedDecisions(BaseModel):
    """Decisions `seq` to `last_seq` that the log holds damaged (or has lost): never
    served as data (docs/operations.md, "Damaged rows")."""

    seq: int
    last_seq: int
    damaged: Literal[
        "checksum-mismatch", "chain-broken", "missing", "undecodable", "reasons-damaged"
    ]
    detail: str


class LogPage(BaseModel):
    decisions: list[LoggedDecision | DamagedDecisions]
    next_after_seq: int


class ExplainUnavailable(BaseModel):
    why: Literal[
        "damaged", "revision-gone", "revision-does-not-check", "context-not-logged",
        "arguments-redacted", "thread-cost-not-logged", "thread-gone", "agent-gone",
        "agent-changed",
    ]  # fmt: skip
    message: str


class LoggedExplain(BaseModel):
    """A logged decision explained again on its revision (`GET /v1/log/{seq}/explain`):
    `trace` and `effect` are null when `unavailable` says why they cannot be made."""

    seq: int
    revision: int | None
    logged_effect: Effect | None
    trace: str | None  # `charter explain`'s account, line by line, secrets `[redacted]`
    effect: Effect | None  # what the policy decides for the call
    same_effect: bool | None  # whether that is the logged effect
    note: str | None  # why the logged effect differs (step 6, an approval), when it does
    inputs: Literal["log", "approval"] | None  # where the arguments and context came from
    unavailable: ExplainUnavailable | None


class HookNote(BaseModel):
    name: str
    kind: Literal["pause", "rewrite", "deny"]
    condition: str | None
    location: str


class ListedTool(BaseModel):
    tool: str
    status: Literal["allow", "narrow", "deny"]
    # A narrowed tool's residual condition: as DSL text, whether that text alone is exact,
    # and the exact residual (allowed iff one holds), each a condition as JSON.
    condition: str | None = None
    exact: bool | None = None
    any_of: list[dict[str, Any]] | None = None
    hooks: list[HookNote]


class ToolListing(BaseModel):
    agent: str
    profile: str
    revision: int
    tools: list[ListedTool]


class Violation(BaseModel):
    tool: str | None
    kind: Literal["widens", "drops-deny", "drops-hook", "budget", "rate", "identity", "unsupported",
                  "timeout"]  # fmt: skip
    message: str
    grant: str | None
    location: str | None
    counterexample: dict[str, Any] | None  # a call the evaluator confirmed


class FitAnswer(BaseModel):
    revision: int
    fits: bool
    violations: list[Violation]


# ---- the policy ---------------------------------------------------------------------------
class Diagnostic(BaseModel):
    code: str
    severity: Literal["error", "warning"]
    message: str
    file: str
    line: int
    column: int
    end_line: int
    end_column: int
    help: str | None


class InUseBy(BaseModel):
    kind: Literal["agent", "approval", "connection", "profile"]
    id: str


class InUse(BaseModel):
    """A name a policy removes and who still uses it: the first 10 (`more`: the rest)."""

    kind: Literal["profile", "toolset", "tool", "role"]
    name: str
    used_by: list[InUseBy]
    more: int


class PolicyUploaded(BaseModel):
    revision: int
    warnings: list[Diagnostic]
    # What the upload removed that was in use (`?remove_in_use=true`; else a 409)
    removed_in_use: list[InUse]


class Policy(BaseModel):
    revision: int
    files: list[PolicyFile]


# ---- drafts: the policy playground --------------------------------------------------------
class DraftChecked(BaseModel):
    checks: bool  # no error: the draft could be uploaded as it is
    # Its errors, or (when it checks) the checker's warnings and the lints'
    diagnostics: list[Diagnostic]


class DecidedCall(BaseModel):
    effect: Effect
    args: dict[str, Any] | None  # (its secret arguments `[redacted]`)
    reasons: list[Reason]
    errors: list[ConditionError]
    near_misses: list[Reason]


class DraftDecided(BaseModel):
    decision: DecidedCall
    trace: str  # `charter explain`'s account, line by line


class ExpectResult(BaseModel):
    test: str
    location: str
    expected: str
    tool: str
    actual: Effect
    passed: bool
    failure: str | None
    decision: DecidedCall


class Reached(BaseModel):
    reached: int
    total: int


class Unreached(BaseModel):
    kind: Literal["rule", "hook"]
    name: str
    location: str
    text: str


class Coverage(BaseModel):
    rules: Reached
    hooks: Reached
    unreached: list[Unreached]


class DraftTested(BaseModel):
    passed: int
    failed: int
    results: list[ExpectResult]
    coverage: Coverage | None = None  # (asked with `coverage: true`)
    warnings: list[Diagnostic]


class DraftFitted(BaseModel):
    fits: bool
    violations: list[Violation]


class Declaration(BaseModel):
    """A role, hook, profile or toolset of the latest revision (or, listed, of the
    revision the listing's first page pinned), with its source."""

    name: str
    file: str
    line: int
    source: str
    revision: int


class Role(Declaration):
    pass


class Hook(Declaration):
    pass


class ProfileRate(BaseModel):
    calls: int
    period: Period


class Profile(Declaration):
    roles: list[str]
    hooks: list[str]
    budget: StoredBudget | None
    rate: ProfileRate | None


class Toolset(Declaration):
    tools: list[str]
    url: str | None
    connection_required: bool
    runs_code: bool


# ---- resources ----------------------------------------------------------------------------
class Approved(BaseModel):
    approval: Approval
    decision: DecisionResponse
    # An approved management request that its re-check allowed has run: its answer (None
    # for one that answers 204).
    result: Any = None


class Rejected(BaseModel):
    approval: Approval


class AgentDefinitionView(BaseModel):
    """An agent's Seed definition (api.service.definitions), normalized, with what it
    grants: the Seed callables and `publish` its definition and its ancestors' allow,
    and the same grants as a Charter role."""

    id: str
    profile: str
    identity: str
    definition: dict[str, Any]
    grants: list[str]
    role: str
    updated_at: int


class TokenIssued(Token):
    token: str  # shown once: only its SHA-256 is kept


class Pending(BaseModel):
    """The 202 of an agent's management request that its policy paused: the operation
    runs once a human approves (`POST /v1/approvals/{id}/approve`)."""

    status: Literal["pending"]
    approval_id: str
    decision: DecisionResponse


# ---- pages --------------------------------------------------------------------------------
T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_cursor: str | None  # None: the last page


class AgentPage(Page[Agent]):
    pass


class IdentityPage(Page[Identity]):
    pass


class ThreadPage(Page[Thread]):
    pass


class ConnectionPage(Page[Connection]):
    pass


class RolePage(Page[Role]):
    pass


class ProfilePage(Page[Profile]):
    pass


class HookPage(Page[Hook]):
    pass


class ToolsetPage(Page[Toolset]):
    pass


class Window(BaseModel):
    """A budget window's spending: USD amounts as decimal strings; `cap` and `remaining`
    null when no cap of that window applies (`spent` null: past 64 bits of micro-USD)."""

    spent: str | None
    cap: str | None
    remaining: str | None


class AgentSpending(BaseModel):
    agent: str
    windows: dict[Period, Window]  # (each of `24h`, `7d` and `total`)


class ThreadSpending(BaseModel):
    thread: str
    agent: str
    windows: dict[Period, Window]  # (each of `24h`, `7d` and `total`)


ThreadEventKind = Literal["created", "turn", "call", "approval", "cost", "status"]


class ThreadEvent(BaseModel):
    """One thing that happened on a thread (api.service.threadevents); an event has the
    fields of its kind only."""

    id: str
    thread: str
    event: ThreadEventKind
    at: int  # ms since the epoch
    # created: its agent, who made it (`schedule` and `due`: a schedule's run), its cap
    agent: str | None = None
    by: str | None = None  # (also: who changed the status, answered, reported a cost)
    max_cost: str | None = None
    schedule: str | None = None
    due: int | None = None  # ms since the epoch: the schedule's due time that ran
    # turn: the turn admitted, the revision and profile it pinned, when it ends
    turn: str | None = None  # (also: a call's turn)
    revision: int | None = None
    profile: str | None = None
    ends_at: int | None = None
    # call: the tool, its effect, its place and id in the decision log, what it charged
    tool: str | None = None  # (also: an approval's call)
    effect: Literal["allow", "deny", "pause"] | None = None
    seq: int | None = None  # (also: a reported cost's decision)
    decision: str | None = None
    charged: str | None = None  # USD: an allowed call's `expected_cost`, a reported cost
    approval: str | None = None  # a pause's approval; the approval answered
    # approval: `approved` or `rejected`; status: the new status and the one before
    status: str | None = None
    was: str | None = None


class ThreadEventPage(Page[ThreadEvent]):
    # After this page's last event (the cursor asked with, when the page is empty): read
    # with it later, and the page holds only the events committed since. Tailing a
    # thread, where `next_cursor` is None on the last page.
    tail_cursor: str | None


class Schedule(BaseModel):
    """A schedule (api.service.schedules): its next run due, and its last run."""

    id: str
    agent: str
    name: str
    cron: str  # 5 fields: minute hour day-of-month month day-of-week (UTC)
    prompt: str
    created_at: int  # ms since the epoch
    updated_at: int
    next_run: int | None  # ms since the epoch: the run due next (null: none within a year)
    last_run: int | None  # ms since the epoch: the due time last run, or a run-now's moment
    last_thread: str | None  # the thread the last run started


class ScheduleRun(BaseModel):
    """A run of a schedule: the schedule with its `last_run`, and the thread started."""

    schedule: Schedule
    thread: Thread


class SchedulePage(Page[Schedule]):
    pass


class MemoryEntry(BaseModel):
    """An agent's memory entry (api.service.memoryentries), as written."""

    agent: str
    path: str
    content: str
    created_at: int  # ms since the epoch
    updated_at: int


class MemoryItem(BaseModel):
    """An entry in a memory list: its path and size, not its content."""

    path: str
    chars: int  # the content's length in characters
    updated_at: int


class MemoryPage(Page[MemoryItem]):
    pass


class FeedPage(Page[Feed]):
    pass


class FeedMessage(BaseModel):
    """A feed's message (api.service.feeds), as published."""

    seq: int  # its number in its feed: 1, 2, ... without gaps
    message: str
    published_at: int  # ms since the epoch


class MessagePage(BaseModel):
    """A feed's messages numbered after the request's `after_seq`, oldest first."""

    items: list[FeedMessage]
    next_after_seq: int  # the last one's number (the request's `after_seq` when none)


class TokenPage(Page[Token]):
    pass


class ApprovalPage(Page[Approval]):
    pass


class RevisionPage(Page[Revision]):
    pass


class DiffBudget(BaseModel):
    amount: float  # a JSON number, the policy's digits exactly (a decimal, not rounded)
    period: str


class BudgetChange(BaseModel):
    old: DiffBudget | None  # (None: no budget, unlimited)
    new: DiffBudget | None


class Change(BaseModel):
    """One thing of a profile's access that got wider or narrower, or may have
    (`unknown`: the solver did not decide, counted as wider)."""

    profile: str
    tool: str | None
    direction: Literal["wider", "narrower", "unknown"]
    message: str
    role: str | None  # the role whose rule makes the difference
    location: str | None  # file:line:col of the rule, profile or budget
    counterexample: dict[str, Any] | None  # a call one side allows, secrets redacted
    kind: Literal["allow", "deny", "hook", "budget"]
    widens: bool  # counts as widening: wider, or undecided
    hook: str | None
    budget: BudgetChange | None


class RevisionDiff(BaseModel):
    revision: int
    against: int  # (0: the empty policy, before the first upload)
    widened: bool
    narrowed: bool
    changes: list[Change]


# ---- operations ---------------------------------------------------------------------------
class Health(BaseModel):
    status: Literal["ok"]


class Ready(BaseModel):
    status: Literal["ready"]
    revision: int


class NotReady(BaseModel):
    status: Literal["unavailable"]
    # `store-cannot-write` while the store's writes fail (the disk full, an I/O error);
    # absent for the other reasons
    code: str | None = None
    # "store", "no policy yet", that the database file was removed or replaced, "compiling
    # revision N", or that revision N does not check with this version of charter
    reason: str


# ---- errors -------------------------------------------------------------------------------
class FieldError(BaseModel):
    loc: list[str]
    message: str
    type: str


class Problem(BaseModel):
    """application/problem+json (RFC 9457); `code` is stable, one of the error codes.
    Some codes add fields: those below, and `fit` (`does-not-fit`), `violation`
    (`budget-looser`), `attributes` (`agent-attribute-differs`), `limit` (`bad-limit`)."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    code: str
    detail: str
    help: str | None = None
    errors: list[FieldError] | None = None  # `invalid-body`
    diagnostics: list[Diagnostic] | None = None  # `policy-invalid`, `not-utf8`
    decision: DecisionResponse | None = None  # `denied-by-policy`
    in_use: list[InUse] | None = None  # `policy-in-use`: the first 100 names
    in_use_more: int | None = None  # `policy-in-use`: the names left out of `in_use`


# ---- the server's keys and the log's verification ------------------------------------------
class PublishedKey(BaseModel):
    """An Ed25519 public key as a JWK (RFC 8037), with its validity."""

    kty: Literal["OKP"]
    crv: Literal["Ed25519"]
    x: str  # the public key, base64url without padding
    kid: str  # its RFC 7638 thumbprint
    alg: Literal["EdDSA"]
    use: Literal["sig"]
    not_before: int  # ms since the epoch: it signs from then on
    not_after: int | None  # when it stopped signing (a rotation); null: it signs now


class KeySet(BaseModel):
    """The server's signing keys, oldest first (a JWK set, RFC 7517)."""

    keys: list[PublishedKey]
    current: str | None  # the `kid` of the key that signs now


class LogFinding(BaseModel):
    """Decisions `seq` to `last_seq` are not as logged (`why`: docs/operations.md)."""

    seq: int
    last_seq: int
    why: Literal[
        "checksum-mismatch", "chain-broken", "missing", "undecodable",
        "checkpoint-mismatch", "checkpoint-forged",
    ]  # fmt: skip
    detail: str


class SignedCheckpoint(BaseModel):
    """A checkpoint whose signature verified: the chain's digest through `seq`."""

    seq: int
    digest: str  # hex
    at: int  # when it was signed, ms since the epoch
    kid: str  # the key that signed it


class LogVerification(BaseModel):
    """The whole log checked against its chain and its signed checkpoints."""

    sound: bool
    head: int  # the last seq logged
    covered_through: int  # the last seq a verified checkpoint vouches for (0: none)
    checkpoints: int  # the checkpoints that verified
    last_checkpoint: SignedCheckpoint | None
    first_bad: LogFinding | None  # the first stretch that is wrong
    found: int  # how many stretches are wrong
    findings: list[LogFinding]  # the first 100 of them, in seq order
