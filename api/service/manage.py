"""Management operations, each named by its built-in tool (`agents.create`, ...).

An admin's request runs the operation. An agent's request is first decided as that tool
call under the agent's profile (and logged): deny is a 403 with the reasons, pause a 202
with the approval id (approving it later re-checks and then runs the operation), allow
runs it, in the transaction that logs the decision, so a refused operation logs nothing;
anything the agent creates must also pass the fit check (DESIGN.md section 3).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from api.service import approvals, connections, resources, views
from api.service.core import Service
from api.service.decide import Call, decide_detailed
from api.service.errors import ServiceError
from api.service.ops import Operation, Result
from api.service.tokens import Principal

OPERATIONS: dict[str, Operation] = {
    **resources.OPERATIONS,
    **views.OPERATIONS,
    **approvals.OPERATIONS,
    **connections.OPERATIONS,
}

# Checked before an agent's request is decided, so a request the operation would refuse
# whatever the policy says is refused at once (it writes nothing and pauses nothing); the
# operations check again, for a paused call that a human approves later.
PRECHECKS: dict[str, Callable[[Service, Principal, dict[str, Any]], None]] = {
    "agents.update": resources.check_managed,
    "agents.delete": resources.check_managed,
    "connections.update": connections.check_own,
    "connections.delete": connections.check_own,
    "approvals.approve": approvals.check_independent,
    "approvals.reject": approvals.check_independent,
}


def manage(service: Service, actor: Principal, tool: str, args: Mapping[str, Any]) -> Result:
    op = OPERATIONS[tool]
    call_args = {k: v for k, v in args.items() if v is not None}
    if actor.admin:
        return op(service, actor, call_args)
    if actor.agent is None:
        raise ServiceError(403, "insufficient-scope", "this token cannot manage resources")
    precheck = PRECHECKS.get(tool)
    if precheck is not None:
        precheck(service, actor, call_args)
    # The decision's row and the operation's effect commit together: a request the
    # operation refuses (a 4xx, or anything else) rolls its row back, so it writes
    # nothing. A deny or a pause is the request's outcome and is committed.
    with service.store.atomic():
        responses, raw = decide_detailed(
            service, [Call(actor.agent, tool, call_args)], management=True
        )
        decision = responses[0]
        if decision["effect"] == "allow":
            return op(service, actor, dict(raw[0] or call_args))
    if decision["effect"] == "pause":
        return Result(202, {"status": "pending", "approval_id": decision["approval_id"],
                            "decision": decision})  # fmt: skip
    raise ServiceError(
        403,
        "denied-by-policy",
        f"`{tool}` is not allowed for agent `{actor.agent}`",
        decision=decision,
    )
