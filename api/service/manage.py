"""Management operations, each named by its built-in tool (`agents.create`, ...) and run
on that tool's command (api.commands), which every front end builds.

An admin's request runs the operation. An agent's request is first decided as that tool
call under the agent's profile (and logged): deny is refused (`denied-by-policy`) with the reasons,
pause answers with the approval id (approving it later re-checks and then runs the operation), allow
runs it, in the transaction that logs the decision, so a refused operation logs nothing, on
the arguments it was allowed with read into the same command (a rewrite hook's that the
command does not take: `invalid-rewrite`);
anything the agent creates must also pass the fit check (docs/design.md section 3). A read
whose refusals all come before its decision (READ_AFTER) runs once that is committed.
Either way, a request's token is read again as its write transaction begins, as every
request's is (api.service.tokens.check_writes): revoked meanwhile, `unauthorized`, nothing written.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from api import commands as c
from api.commands import Command
from api.service import (
    accounts,
    approvals,
    connections,
    declwrites,
    definitions,
    feeds,
    fitcheck,
    memoryentries,
    resources,
    rolefiles,
    schedulerun,
    schedules,
    spending,
    threads,
    views,
)
from api.service.calls import Call
from api.service.core import Service
from api.service.decide import decide_detailed, prepare
from api.service.errors import ServiceError
from api.service.etags import require
from api.service.managedcalls import ManagedCalls
from api.service.ops import Operation, Outcome, Precheck, Result, command_of
from api.service.tokens import Principal
from policy.store import Doc

# What the `If-Match` of a kind's `.update` and `.delete` names, by kind: (what it is
# called, its stored document as the caller reaches it: refused as the operation refuses
# it). A role's is its own file (api.service.views), named by the path's `name`.
STORED: dict[str, tuple[str, Callable[[Service, Principal, Any], Doc]]] = {
    "identities": ("identity", accounts.identity_stored),
    "agents": ("agent", resources.agent_stored),
    "threads": ("thread", threads.stored),
    "connections": ("connection", connections.stored),
    "schedules": ("schedule", schedules.stored_for),
    "feeds": ("feed", feeds.stored),
    **{kind: (rolefiles.ONE[kind], declwrites.stored(kind)) for kind in declwrites.KINDS},
}


def unchanged(service: Service, actor: Principal, command: Command, if_match: str) -> None:
    """`resource-moved` when the document `command` acts on differs from the one `if_match`
    names."""
    what, stored = STORED[command.tool.partition(".")[0]]
    assert isinstance(command, c.ById | c.ByName)  # (each kind's `.update` and `.delete`)
    named = command.id if isinstance(command, c.ById) else command.name
    require(stored(service, actor, command), if_match, f"{what} `{named}`")


def guarded(tool: str, if_match: str | None) -> Operation:
    """`tool`'s operation, run only while its document is the one `if_match` names (None:
    unconditionally): compared inside the transaction that writes, so of two writes made
    from the same state one wins and the other is `resource-moved`, in this process or in another.
    A policy file's change compares in its own transaction (declwrites.CONDITIONAL); any other's
    joins one around the comparison."""
    op = OPERATIONS[tool]
    if if_match is None:
        return op
    own = declwrites.CONDITIONAL.get(tool)
    if own is not None:
        return lambda service, actor, command: own(service, actor, command, if_match)

    def run(service: Service, actor: Principal, command: Command) -> Result:
        with service.store.atomic():
            unchanged(service, actor, command, if_match)
            return op(service, actor, command)

    return run


# What approving an agent's paused management call runs of it: its precheck, its
# `If-Match` comparison and its operation, from the tables of this module, which hold the
# approvals' own operations and checks (an agent's paused `approvals.approve` runs one).
MANAGED = ManagedCalls(lambda tool: PRECHECKS.get(tool), unchanged, guarded)

OPERATIONS: dict[str, Operation] = {
    **accounts.OPERATIONS,
    **resources.OPERATIONS,
    **definitions.OPERATIONS,
    **threads.OPERATIONS,
    **views.OPERATIONS,
    **declwrites.OPERATIONS,
    **spending.OPERATIONS,
    **approvals.operations(MANAGED),
    **connections.OPERATIONS,
    **memoryentries.OPERATIONS,
    **schedules.OPERATIONS,
    **schedulerun.OPERATIONS,
    **feeds.OPERATIONS,
}


# Checked before an agent's request is decided, so a request the operation would refuse
# whatever the policy says is refused at once (it writes nothing and pauses nothing), and
# the fit checks' solver runs outside the write transaction; the operations check again,
# for a paused call that a human approves later (a fit found here is then a look-up).
def _profile_fits(service: Service, actor: Principal, profile: str) -> None:
    # Before the transaction, where the solver may take its time without holding the
    # store's lock; the operation asks again inside it and finds the answer remembered.
    # (An unknown profile is left to the operation's own `unknown-profile`.)
    if actor.agent is None:
        return
    if profile in service.current().served.profiles:
        fitcheck.require_profile_fits(service, service.agent(actor.agent), profile)


def _create_fits(service: Service, actor: Principal, command: c.CreateAgent) -> None:
    resources.check_child(service, actor, command)
    _profile_fits(service, actor, command.profile)


def _update_fits(service: Service, actor: Principal, command: c.UpdateAgent) -> None:
    resources.check_managed(service, actor, command)
    if command.given(*resources.ACCESS_FIELDS):
        profile = command.profile
        _profile_fits(
            service, actor, service.agent(command.id).profile if profile is None else profile
        )


def _define_fits(service: Service, actor: Principal, command: c.DefineAgent) -> None:
    # What defining an agent is, `agents.create` or `agents.update`, with their checks
    # (a definition's `tools` only narrow: api.service.seedgrants)
    change, _ = definitions.equivalent(service, actor, command)
    if isinstance(change, c.CreateAgent):
        _create_fits(service, actor, change)
    else:
        _update_fits(service, actor, change)


POLICY_WRITES = declwrites.POLICY_WRITES


def _effect_now(service: Service, actor: Principal, command: Command) -> str | None:
    """The effect the policy gives the agent's request, as it will be decided (not logged
    here), or None when it is decided only inside the transaction. Compiling a policy
    file's change ahead serves only a request that runs at once: for one the policy denies
    it is work for nothing (up to 0.6-1.2 s on the benchmark's 1,000 roles, a change
    compiled whole, for a 40-byte request). (A request that runs after all is compiled
    inside its transaction.)"""
    assert actor.agent is not None
    try:
        found = prepare(service, [Call(actor.agent, command.tool, command.args())], {})[0].decision
    except ServiceError:  # (the request's own path says why)
        return "deny"
    return None if found is None else found.effect


def _policy_write_ahead(service: Service, actor: Principal, command: Command) -> None:
    declwrites.precheck(service, actor, command, lambda: _effect_now(service, actor, command))


PRECHECKS: dict[str, Precheck] = {
    "agents.create": _create_fits,
    **{tool: _policy_write_ahead for tool in POLICY_WRITES},
    "agents.update": _update_fits,
    "agents.delete": resources.check_managed,
    "agents.define": _define_fits,
    "connections.create": connections.check_create,
    "connections.update": connections.check_own,
    "connections.delete": connections.check_own,
    "identities.get": accounts.check_own_identity,
    "identities.update": accounts.check_own_identity,
    "identities.delete": accounts.check_identity_delete,
    "threads.list": threads.check_list,
    "threads.get": threads.check_thread,
    "threads.spending": threads.check_thread,
    "threads.create": threads.check_create,
    "threads.update": threads.check_thread,
    "threads.delete": threads.check_thread,
    "threads.wait": threads.check_thread,
    "threads.events": threads.check_thread,
    "approvals.list": approvals.check_list,
    "approvals.approve": partial(approvals.check_approve, managed=MANAGED),
    "approvals.reject": approvals.check_reject,
    **{tool: memoryentries.check for tool in memoryentries.OPERATIONS},
    "schedules.list": schedules.check_list,
    "schedules.get": schedules.check_one,
    "schedules.create": schedules.check_create,
    "schedules.update": schedules.check_update,
    "schedules.delete": schedules.check_one,
    "schedules.run": schedules.check_one,
    **{tool: feeds.check for tool in feeds.OPERATIONS},
}

# An agent's request whose operation only reads and whose every refusal its precheck made:
# allowed, it runs once the decision is committed, off the write lock every decision waits
# on. An agent's page of approvals decides each approval it reads (up to 800 for a page of
# 200, 7-9 ms), which inside the transaction would hold every writer off.
READ_AFTER = frozenset({"approvals.list"})


# What an agent's request is decided with beyond its arguments, as `context`: the facts a
# policy needs to grant it narrowly, read by the service, never taken from the request.
CONTEXTS: dict[str, Callable[[Service, Any], dict[str, Any]]] = {
    "approvals.get": approvals.context_of,
    "approvals.approve": approvals.context_of,
    "approvals.reject": approvals.context_of,
}


def manage(
    service: Service, actor: Principal, command: Command, if_match: str | None = None
) -> Result:
    """Run `command` (its tool's operation) for `actor`; `if_match`: a `PATCH`'s or
    `DELETE`'s `If-Match` (a kind of STORED's `.update` or `.delete` only), None when not
    sent."""
    tool = command.tool
    op = guarded(tool, if_match)
    if tool in POLICY_WRITES:
        service.require_signed()
    if actor.admin:
        return op(service, actor, command)
    if actor.agent is None:
        raise ServiceError("insufficient-scope", "this token cannot manage resources")
    if if_match is not None:
        # A write that can only be refused is refused before it is decided, as a
        # precheck's refusal: neither logged nor paused; and before the precheck, whose
        # fit check (seconds for a large policy) answered a stale one with its refusal.
        # (Its other refusals, a target out of reach or gone, are the precheck's own.)
        unchanged(service, actor, command, if_match)
    precheck = PRECHECKS.get(tool)
    if precheck is not None:
        precheck(service, actor, command)
    # The decision's row and the operation's effect commit together: a request the
    # operation refuses (a 4xx, or anything else) rolls its row back, so it writes
    # nothing. A deny or a pause is the request's outcome and is committed.
    facts = CONTEXTS.get(tool)
    context = facts(service, command) if facts is not None else None
    call_args = command.args()
    # (Its token is read again as this transaction begins, as every write's is, an
    # admin's too: tokens.check_writes. It was checked before the body was read and
    # before the prechecks, a fit check may take seconds, and another worker may have
    # revoked it meanwhile: then `unauthorized`, and nothing is logged or written.)
    with service.store.atomic():
        call = Call(actor.agent, tool, call_args, context=context)
        responses, raw = decide_detailed(service, [call], management=True)
        decision = responses[0]
        final = command
        if decision["effect"] == "allow":
            if raw[0] is not None and raw[0] != call_args:
                # The arguments it was allowed with (a rewrite hook's, or the tool's
                # defaults added) read into the same command: one the command does not
                # take is refused, `invalid-rewrite`, and rolls the decision back.
                final = command_of(tool, raw[0])
            if tool not in READ_AFTER:
                return op(service, actor, final)
            # Its refusals again, of the arguments a rewrite hook may have changed, before
            # the COMMIT: a refused request still writes nothing.
            PRECHECKS[tool](service, actor, final)
        if decision["effect"] == "pause" and if_match is not None:
            # Kept with its approval, which runs the call only while the document is
            # still the one named: approved after another change, the 202'd write went
            # over that change, the lost update `If-Match` was sent to prevent.
            approvals.keep_if_match(service, decision["approval_id"], if_match)
    if decision["effect"] == "allow":
        return op(service, actor, final)
    if decision["effect"] == "pause":
        return Result(Outcome.PENDING, {"status": "pending", "approval_id": decision["approval_id"],
                            "decision": decision})  # fmt: skip
    raise ServiceError(
        "denied-by-policy",
        f"`{tool}` is not allowed for agent `{actor.agent}`",
        decision=decision,
    )
