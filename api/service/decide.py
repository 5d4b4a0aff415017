"""Deciding calls for agents: docs/design.md section 2 around the engine's compiled plans.

The engine decides steps 2-5 and 7 on a snapshot; here: step 1 (the revision a turn
pinned, else the latest). Step 6 (budgets and connections), the pending approval for a
pause and the log are api.service.decisionlog's, and so are steps 2-5 and 7 of a call
whose conditions read `thread.cost`: decided inside the write transaction, on what the
thread has spent by then (the calls before it in the transaction included). A batch is
resolved completely before anything is written (an unknown agent, turn or thread is
not found and nothing is logged), then logged in one transaction, so every decision is logged
exactly once with a gap-free sequence number.

The work is split so that concurrent requests can share one write transaction (the
group commit, api.service.groupcommit): `prepare` resolves one request's calls (and
raises for it alone); decisionlog builds the rows of any number of prepared calls and
logs them inside one `store.atomic()`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, Literal, TypeVar

import cbor2

from api.records import Agent, Approval, Thread, Turn
from api.service.approved import Approved
from api.service.budget import MAX_USD
from api.service.calls import Call, Prepared
from api.service.core import Service, now_ms, one_moment
from api.service.decisionlog import write
from api.service.errors import ErrorCode, ServiceError, no_policy
from engine.compile import Snapshot
from engine.decision import Request
from policy.store import StoreDamaged


def agent_context(agent: Agent) -> dict[str, Any]:
    """What conditions read of an agent (`agent.id`, `agent.name`, `agent.identity`,
    `agent.metadata.*`)."""
    return {
        "id": agent.id,
        "name": agent.name,
        "identity": agent.identity,
        "metadata": agent.metadata,
    }


def _agent_context(service: Service, agent: Agent) -> dict[str, Any]:
    """The agent's context, built once per cached agent record (`ReadModel.contexts`)."""
    contexts = service.read.contexts
    hit = contexts.get(agent.id)
    if hit is not None and hit[0] is agent:
        return hit[1]
    context = agent_context(agent)
    if len(contexts) > 16_384:
        contexts.clear()
    contexts[agent.id] = (agent, context)
    return context


def _pinned(service: Service, agent: Agent, profile: str) -> Agent:
    """`agent` under `profile`, the same record for as long as `agent` is the cached one."""
    key = (agent.id, profile)
    hit = service.read.pinned.get(key)
    if hit is not None and hit[0] is agent:
        return hit[1]
    if len(service.read.pinned) > 16_384:
        service.read.pinned.clear()
    pinned = agent.model_copy(update={"profile": profile})
    service.read.pinned[key] = (agent, pinned)
    return pinned


T = TypeVar("T", Thread, Turn)

_MISMATCH: dict[Literal["turn", "thread"], ErrorCode] = {
    "turn": "turn-agent-mismatch",
    "thread": "thread-agent-mismatch",
}


def owned(service: Service, cls: type[T], id: str, agent: Agent) -> T:
    """The turn or thread `id`, which must belong to `agent` (`{what}-not-found` unknown,
    `{what}-agent-mismatch` foreign)."""
    what: Literal["turn", "thread"] = "turn" if cls is Turn else "thread"
    return _mine(service.record(cls, what, id), what, agent)


def _mine(found: T, what: Literal["turn", "thread"], agent: Agent) -> T:
    if found.agent != agent.id:
        raise ServiceError(_MISMATCH[what], f"{what} `{found.id}` belongs to another agent")
    return found


def _check_running(turn: Turn) -> None:
    """A turn decides on its revision and profile until it ends (`ends_at`, set when it was
    admitted; a turn admitted before turns ended, an hour after it began): a turn kept
    for ever would keep a grant that a later upload or a narrowed profile took away, the
    emergency upload included. `turn-ended` once it has ended."""
    if now_ms() >= turn.ends_at:
        raise ServiceError(
            "turn-ended", f"turn `{turn.id}` has ended; it ran for its lifetime",
            help="admit a new turn (POST /v1/turns): it decides on the latest revision",
        )  # fmt: skip


def _in_turns_thread(call: Call, turn: Turn) -> Call:
    """A call of a turn admitted in a thread is in that thread, named or not: left out, the
    thread's `max_cost` and `thread.*` conditions did not apply to it; another thread is
    `turn-thread-mismatch`."""
    thread = turn.thread
    if thread is None or call.thread == thread:
        return call
    if call.thread is None:
        return call._replace(thread=thread)
    raise ServiceError(
        "turn-thread-mismatch",
        f"turn `{turn.id}` runs in thread `{thread}`, not in thread `{call.thread}`",
    )  # fmt: skip


def _snapshot(
    service: Service, snapshots: dict[int, Snapshot], revision: int, compile: bool
) -> Snapshot:
    """Revision `revision`'s snapshot, through the request's memo `snapshots` (`prepare`
    inlines this for its common case)."""
    snapshot = snapshots.get(revision)
    if snapshot is None:
        snapshot = snapshots[revision] = service.snapshots.get(revision, compile)
    return snapshot


def _prepare(
    service: Service, call: Call, snapshots: dict[int, Snapshot], compile: bool
) -> Prepared:
    agent = service.agent(call.agent)
    context = _agent_context(service, agent)
    revision = service.snapshots.latest
    if call.turn is not None:
        turn = _mine(service.read.turn(call.turn), "turn", agent)  # (cached)
        _check_running(turn)
        revision = turn.revision
        pinned = agent.profile if turn.profile is None else turn.profile
        if pinned != agent.profile:  # a running turn keeps the profile it started with
            agent = _pinned(service, agent, pinned)  # (its budget caps too, in step 6)
        call = _in_turns_thread(call, turn)
    if revision == 0:
        raise no_policy()
    snapshot = _snapshot(service, snapshots, revision, compile)
    thread = None
    thread_ctx = None
    if call.thread is not None:
        thread = _mine(service.read.thread(call.thread), "thread", agent)  # (cached)
        # Without its cost: what the thread spent is read only where it cannot move, in
        # the write transaction, and only for a call whose conditions read it (the
        # snapshot knows which: their decision is left to decisionlog).
        thread_ctx = {"id": thread.id, "depth": thread.depth}
    prepared = Prepared(call, agent, snapshot, thread)
    if revision != service.snapshots.latest and agent.parent:
        prepared.latest = _snapshot(service, snapshots, service.snapshots.latest, compile)
    if thread is None or not snapshot.reads_thread_cost(agent.profile, call.tool):
        prepared.decision = snapshot.decide_call(
            agent.profile, call.tool, call.args, call.context, context, thread_ctx
        )
    else:  # decided in the write transaction, on the thread's running cost
        prepared.request = Request(
            agent.profile, call.tool, call.args, call.context, context, thread_ctx
        )
    return prepared


def decide_calls(service: Service, calls: Sequence[Call]) -> list[dict[str, Any]]:
    """Decide and log every call; returns one response document per call, in order."""
    return decide_detailed(service, calls)[0]


def decide_detailed(
    service: Service,
    calls: Sequence[Call],
    *,
    management: bool = False,
    approval: Approved | None = None,
) -> tuple[list[dict[str, Any]], list[Mapping[str, Any] | None]]:
    """Decide and log every call: (responses, the final arguments unredacted), in order.

    With `approval` (the approval a human granted), this re-checks the approved call: a
    pause left by the hooks the human was asked about means the call is allowed by the
    roles, so it becomes the allow the human granted (never more); a pause by another
    hook stays a pause (`Approved`).

    Prepared on the caches, then checked inside the write transaction as a group commit
    is (api.service.groupcommit): if anything cached moved meanwhile (an agent, a thread
    deleted, a revision), the calls are prepared again there, on what nobody can change
    before the COMMIT. (Inside a caller's transaction, the usual case for approvals and
    management calls, nothing can move.)
    """
    service.sync()
    seen = service.read.moves
    with one_moment():  # (its conditions' `time.*` is its rows' `at`)
        prepared = prepare(service, calls, {})
        with service.store.atomic():
            service.sync()
            if service.read.moves != seen:
                prepared = prepare(service, calls, {})
            return write(service, prepared, management=management, approval=approval)


def prepare(
    service: Service, calls: Sequence[Call], snapshots: dict[int, Snapshot], compile: bool = True
) -> list[Prepared]:
    """Resolve the calls of one request (step 1, the agent, turn and thread) and decide
    steps 2-5 and 7 on the snapshot, but for a call whose conditions read `thread.cost`
    (see `Prepared`). Raises ServiceError (not found, a conflict) for the whole request: nothing
    is written for it; with `compile` False, NotCompiled for a revision this process has
    not compiled yet (api.service.snapshots). Call `service.sync()` first."""
    prepared = []
    latest = service.snapshots.latest
    agents: dict[str, tuple[Agent, dict[str, Any]]] = {}  # a batch is mostly one agent's
    for call in calls:
        cost = call.expected_cost
        if cost is not None and not 0 <= cost <= MAX_USD:
            raise _cost_refused(cost)
        if call.turn is not None or call.thread is not None:
            prepared.append(_prepare(service, call, snapshots, compile))
        else:  # the common case, inline: no turn to pin a revision, no thread
            hit = agents.get(call.agent)
            if hit is None:
                agent = service.agent(call.agent)
                hit = agents[call.agent] = (agent, _agent_context(service, agent))
            if latest == 0:
                raise no_policy()
            snapshot = snapshots.get(latest)
            if snapshot is None:
                snapshot = snapshots[latest] = service.snapshots.get(latest, compile)
            agent, context = hit
            decision = snapshot.decide_call(
                agent.profile, call.tool, call.args, call.context, context
            )
            prepared.append(Prepared(call, agent, snapshot, None, decision))
    return prepared


def _cost_refused(cost: Decimal) -> ServiceError:
    """The models refuse such a cost (api.http.models); this refuses it for any other way
    a call comes in, before anything is written (the ledger's integers are 64-bit)."""
    kind = "less_than_equal" if cost > 0 else "greater_than_equal"
    message = f"`expected_cost` must be from 0 to {MAX_USD} USD"
    error = {"loc": ["expected_cost"], "message": message, "type": kind}
    return ServiceError("invalid-body", "the body does not match the schema", errors=[error])


def unseal_call(service: Service, approval: Approval) -> Call:
    """The call `approval` paused, as it was made (its arguments unredacted)."""
    if approval.sealed_call is None:  # (every approval is opened with one)
        raise StoreDamaged(f"document {Approval.KIND}/{approval.id}", "it has no sealed call")
    inner = cbor2.loads(service.sealer.open(approval.sealed_call))
    cost = inner.get("expected_cost")
    return Call(
        approval.agent,
        approval.tool,
        inner["args"],
        approval.thread,
        None,  # approving re-checks on the current revision, not the pinned one
        inner.get("context"),
        Decimal(cost) if cost is not None else None,
        approval.connection,
    )
