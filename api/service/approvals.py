"""Approvals: a pause leaves one pending; approving re-checks, rejecting closes it.

Approving grants nothing by itself: the call is decided again on the current revision
(roles, denies, hooks, budget, connection) and only a pause left by the hooks turns into
the allow the human gave. The final decision is logged like any other, with the
approval id. An approved management call (an agent's `roles.create`, ...) then runs,
with what the registry of management operations gives the approvals' operations
(`operations(managed)`: api.service.managedcalls).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any, get_args

from api import commands as c
from api.records import Approval, ApprovalStatus
from api.service import pages, threadevents
from api.service.approved import Approved
from api.service.calls import Call
from api.service.core import Service, now_ms
from api.service.decide import decide_detailed, prepare, unseal_call
from api.service.errors import ServiceError
from api.service.managedcalls import ManagedCalls
from api.service.ops import Operation, Outcome, Result, command_of
from api.service.pages import page
from api.service.tokens import Principal
from policy.store.changes import APPROVAL_DECIDED

STATUSES: tuple[str, ...] = get_args(ApprovalStatus)


# An agent's page reads at most this many approvals for each item it may hold (`limit`),
# so that a policy which hides most of them costs a page a bounded number of decisions.
SCANNED_PER_ITEM = 4


def _status(command: c.ListApprovals) -> str | None:
    status = command.status
    if status is not None and status not in STATUSES:
        raise ServiceError("invalid-status", f"status must be one of {', '.join(STATUSES)}")
    return status


def check_list(service: Service, actor: Principal, command: c.ListApprovals) -> None:
    """Before an agent's `approvals.list` is decided: every refusal of the operation (a
    status, cursor or limit it does not take), so the allowed list runs after the
    decision is committed (api.service.manage.READ_AFTER) and cannot refuse then."""
    pages.decode(Approval.KIND, command.cursor, _status(command))
    pages.limit_of(command.limit)


def approvals_list(service: Service, actor: Principal, command: c.ListApprovals) -> Result:
    status = _status(command)
    if actor.agent is None:
        return page(service, Approval.KIND, command, tag=status, listed=status)
    return _readable_page(service, actor.agent, command, status)


def _readable_page(
    service: Service, agent: str, command: c.ListApprovals, status: str | None
) -> Result:
    """An agent's page: the approvals its `approvals.get` would be allowed for, in the
    list's order. It reads at most SCANNED_PER_ITEM * `limit` rows, so it may hold fewer
    than `limit` items (none, even) and still have a `next_cursor`: the cursor is past the
    last row whose fate this page settled (shown, or hidden), never past one it did not,
    so no approval is skipped or shown twice. Only the end of the list has none."""
    after = pages.decode(Approval.KIND, command.cursor, status)
    limit = pages.limit_of(command.limit)
    left = SCANNED_PER_ITEM * limit
    items: list[Approval] = []
    position, more = after, True
    while more and left > 0 and len(items) < limit:
        want = min(limit, left)
        rows = service.store.page(Approval.KIND, position, want + 1, status)
        more = len(rows) > want
        rows = rows[:want]
        left -= len(rows)
        approvals = [Approval.read(row.body) for row in rows]
        shown_ones = readable(service, agent, approvals)
        for row, approval, shown in zip(rows, approvals, shown_ones, strict=True):
            if shown:
                if len(items) == limit:  # the next page's first item: not settled here
                    more = True
                    break
                items.append(approval)
            position = row.pos
    cursor = pages.encode(Approval.KIND, position, listed=status) if more else None
    return Result(Outcome.DONE, {"items": items, "next_cursor": cursor})


def readable(service: Service, agent: str, approvals: list[Approval]) -> list[bool]:
    """Whether the agent's `approvals.get` of each approval would be allowed, as it is
    decided (its roles, denies and hooks, with the approval as `context.approval`), but not
    logged: the list request itself was. A pause hides the approval as a deny does, and so
    does a rewrite that would have the `approvals.get` show another approval."""
    calls = [
        Call(agent, "approvals.get", {"id": approval.id}, context=facts(approval))
        for approval in approvals
    ]
    return [
        found.decision is not None
        and found.decision.effect == "allow"
        and (found.decision.args or {}).get("id") == found.call.args["id"]
        for found in prepare(service, calls, {})
    ]


def approvals_get(service: Service, actor: Principal, command: c.GetApproval) -> Result:
    return Result(Outcome.DONE, service.record(Approval, "approval", command.id))


def _root(service: Service, agent_id: str) -> tuple[str, str | None]:
    """(the root of the agent's tree, its identity): parents are followed up to an agent
    without one; a parent that was deleted is still the root its children share."""
    agent = service.find_agent(agent_id)
    identity = None if agent is None else agent.identity
    seen = {agent_id}
    while agent is not None and agent.parent and agent.parent not in seen:
        agent_id = agent.parent
        seen.add(agent_id)
        agent = service.find_agent(agent_id)
    return agent_id, identity


# An agent's paused `approvals.approve` or `.reject` decides, once approved, the approval
# it names (it runs as that agent): whoever decides it decides that one too.
DECIDING = ("approvals.approve", "approvals.reject")


def _decided(service: Service, approval: Approval) -> Iterator[Approval]:
    """`approval`, then, while the last is an agent's paused `approvals.approve`/`.reject`,
    the approval it names (its `args` as shown: these tools have no secret argument)."""
    seen: set[str] = set()
    found: Approval | None = approval
    while found is not None and found.id not in seen:
        seen.add(found.id)
        yield found
        named = (found.args or {}).get("id")
        if not (found.management and found.tool in DECIDING and isinstance(named, str)):
            return
        doc = service.store.get(Approval.KIND, named)
        found = None if doc is None else Approval.read(doc)


def _independent(service: Service, actor: Principal, approval: Approval) -> None:
    """A pause asks a human (docs/design.md section 1). An agent's token may decide only an
    approval raised outside its own tree (itself, its ancestors, its descendants, any
    agent under the same root: a parent controls all its children) and its identity, and
    one that decides only such approvals: else it would approve its own pause through
    another agent's paused `approvals.approve` of it."""
    if actor.agent is None:
        return
    mine = _root(service, actor.agent)
    for decided in _decided(service, approval):
        theirs = _root(service, decided.agent)
        if mine[0] == theirs[0] or (mine[1] is not None and mine[1] == theirs[1]):
            what = "it was" if decided is approval else f"it decides approval `{decided.id}`,"
            raise ServiceError(
                "self-approval",
                f"agent `{actor.agent}` cannot decide approval `{approval.id}`: {what} raised "
                f"by agent `{decided.agent}` of its own tree or identity; a human decides it",
            )  # fmt: skip


def _pending(approval: Approval) -> None:
    if approval.status != "pending":
        raise ServiceError(
            "approval-not-pending", f"approval `{approval.id}` is already {approval.status}"
        )


def _decidable(service: Service, actor: Principal, approval_id: str) -> Approval:
    """The approval, which `actor` may decide (`_independent`) and which is pending."""
    approval = service.record(Approval, "approval", approval_id)
    _independent(service, actor, approval)
    _pending(approval)
    return approval


def facts(approval: Approval) -> dict[str, Any]:
    """The `context` an agent's request about `approval` is decided with."""
    return {
        "approval": {
            "agent": approval.agent, "tool": approval.tool, "management": approval.management,
        }
    }  # fmt: skip


def context_of(service: Service, command: c.ById) -> dict[str, Any]:
    """What an agent's `approvals.get`, `.approve` or `.reject` is decided with as
    `context`: the approval it reads or decides (`context.approval.agent`, `.tool`,
    `.management`), so that a policy can let an agent reach some approvals only (`allow
    approvals.approve where context.approval.tool == "billing.refund"`); the request's
    `id` alone said nothing. `approvals.list` shows an agent the approvals whose
    `approvals.get` would be allowed (`readable`)."""
    return facts(service.record(Approval, "approval", command.id))


def check_reject(service: Service, actor: Principal, command: c.RejectApproval) -> None:
    """Before an agent's `approvals.reject` is decided: a request that can only be refused
    (`_decidable`) is refused at once, so it is neither logged nor paused."""
    _decidable(service, actor, command.id)


def check_approve(
    service: Service, actor: Principal, command: c.ApproveApproval, managed: ManagedCalls
) -> None:
    """Before an approval's transaction, and before an agent's `approvals.approve` is
    decided (whose transaction then runs the approval): `_decidable`'s refusals, then an
    agent's paused management call runs its checks, as when it was asked. Fit checks and
    compiling a policy may take seconds, which inside the transaction would hold every
    writer off; the operation inside finds them done (a look-up)."""
    approval = _decidable(service, actor, command.id)
    precheck = managed.precheck(approval.tool) if approval.management else None
    if precheck is None and approval.if_match is None:
        return
    agent_actor = Principal(f"approval:{approval.id}", "agent", approval.agent)
    # (the command of the call as the agent sent it: its sealed arguments are the `args()`
    # of the command its request built)
    called = command_of(approval.tool, unseal_call(service, approval).args)
    # (first: a stale one needs no fit check)
    _unchanged(service, agent_actor, approval, called, managed)
    if precheck is not None:
        precheck(service, agent_actor, called)


def keep_if_match(service: Service, approval_id: str, if_match: str) -> None:
    """In the transaction that opened approval `approval_id` (an agent's paused management
    request): the `If-Match` the request was sent with, which approving it checks again
    (`approvals_approve`). Not one of the call's arguments: the policy never saw it."""
    approval = service.record(Approval, "approval", approval_id).changed(if_match=if_match)
    service.store.update(Approval.KIND, approval.id, approval.stored(), tag=approval.status)


def _unchanged(
    service: Service, actor: Principal, approval: Approval, called: c.Command,
    managed: ManagedCalls,
) -> None:  # fmt: skip
    """`resource-moved` when an approval's management call was sent with an `If-Match` that its
    document no longer has (`actor`: the agent, whose reach it is read with)."""
    if approval.management and approval.if_match is not None:
        managed.unchanged(service, actor, called, approval.if_match)


def _close(service: Service, actor: Principal, approval_id: str) -> Approval:
    return _decidable(service, actor, approval_id).changed(
        decided_at=now_ms(), decided_by=actor.agent or f"token:{actor.token_id}"
    )


def approvals_approve(
    service: Service, actor: Principal, command: c.ApproveApproval, managed: ManagedCalls
) -> Result:
    check_approve(service, actor, command, managed)
    with service.store.atomic():
        approval = _close(service, actor, command.id)
        # (answered first: the call decided again below is its thread's next event)
        threadevents.answered(service.store, approval.changed(status="approved"))
        call = unseal_call(service, approval)
        # (a pause by a hook this approval was not asked about opens one of its own: for
        # an agent's management call, one that runs the call once approved, as this one)
        responses, raw = decide_detailed(
            service, [call], management=approval.management, approval=Approved.of(approval)
        )
        final = responses[0]
        if final["effect"] == "pause" and approval.if_match is not None:
            # The approval the re-check opened runs the same call once approved: only while
            # its document is still the one named, as this one would have.
            keep_if_match(service, final["approval_id"], approval.if_match)
        approval = approval.changed(status="approved", final=final)
        service.store.update(Approval.KIND, approval.id, approval.stored(), tag=approval.status)
        service.read.note_approval(APPROVAL_DECIDED, approval)
        body: dict[str, Any] = {"approval": approval, "decision": final}
        if approval.management and final["effect"] == "allow":
            # The agent's own call runs now, as the agent (so the fit check applies).
            agent_actor = Principal(f"approval:{approval.id}", "agent", approval.agent)
            # (the arguments it was decided with now, a rewrite hook's among them, read
            # into its command as `manage` reads them: `invalid-rewrite`, nothing written)
            called = command_of(approval.tool, raw[0] or call.args)
            # (its `If-Match` compared inside this transaction, which the call's write
            # joins: as `manage` does)
            run = managed.guarded(approval.tool, approval.if_match)
            result = run(service, agent_actor, called)
            body["result"] = result.body
    return Result(Outcome.DONE, body)


def approvals_reject(service: Service, actor: Principal, command: c.RejectApproval) -> Result:
    with service.store.atomic():
        approval = _close(service, actor, command.id).changed(
            status="rejected", reason=command.reason
        )
        service.store.update(Approval.KIND, approval.id, approval.stored(), tag=approval.status)
        service.read.note_approval(APPROVAL_DECIDED, approval)
        threadevents.answered(service.store, approval)
    return Result(Outcome.DONE, {"approval": approval})


def operations(managed: ManagedCalls) -> dict[str, Operation]:
    """The approvals' operations by tool; approving runs an agent's paused management call
    with `managed`."""
    return {
        "approvals.list": approvals_list,
        "approvals.get": approvals_get,
        "approvals.approve": partial(approvals_approve, managed=managed),
        "approvals.reject": approvals_reject,
    }
