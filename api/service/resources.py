"""Agents: list, get, create, update, delete; admitting a turn. (Identities are in
api.service.accounts, threads in api.service.threads.)"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api import commands as c
from api.records import Agent, Thread, Turn
from api.service import agentowned, fitcheck, threadevents, tokens
from api.service.accounts import check_identity, require_own_identity
from api.service.approved import reject_orphans
from api.service.budget import MAX_CHAIN, ancestors, parse_usd
from api.service.core import Service, new_id, now_ms, parent_tag
from api.service.decide import owned
from api.service.errors import ServiceError
from api.service.etags import etag
from api.service.ops import Operation, Outcome, Result
from api.service.pages import page
from api.service.tokens import Principal
from engine.compile import Snapshot
from policy.metadata import MERGE_HELP, over_cap
from policy.store import Doc


# ---- agents -------------------------------------------------------------------------------
def parse_budget(budget: c.Budget) -> dict[str, str]:
    """A budget as an agent keeps it: its amount as the text of a USD amount."""
    amount = parse_usd(budget.amount, "invalid-budget", "budget amount")
    return {"amount": amount, "period": budget.period}


def _check_profile(service: Service, profile: str) -> str:
    if profile not in service.current().served.profiles:
        raise ServiceError("unknown-profile", f"profile `{profile}` is not in the policy")
    return profile


def agents_list(service: Service, actor: Principal, command: c.ListAgents) -> Result:
    return page(service, "agents", command)


def agents_get(service: Service, actor: Principal, command: c.GetAgent) -> Result:
    agent = service.agent(command.id)
    return Result(Outcome.DONE, agent, etag(agent.stored()))


def _check_metadata(metadata: Mapping[str, Any]) -> None:
    """An agent's metadata within policy.metadata's caps, else `metadata-too-large`: it had none, and
    every decision holds it (conditions read `agent.metadata.*`)."""
    message = over_cap(metadata, "the agent's metadata")
    if message is not None:
        raise ServiceError("metadata-too-large", message, help=MERGE_HELP)


def create_agent(
    service: Service,
    actor: Principal,
    command: c.CreateAgent,
    agent_id: str | None = None,
    definition: Mapping[str, Any] | None = None,
) -> Agent:
    """The agent `command` makes, under the id `agent_id` (None: a new one; the command
    line's demo agent has its own), with its Seed `definition` when it is made from one
    (api.service.definitions)."""
    name = command.name
    if not name.strip():
        raise ServiceError("invalid-name", "Name is required")
    profile = _check_profile(service, command.profile)
    budget = None if command.budget is None else parse_budget(command.budget)
    parent = None
    agent_id = agent_id or new_id()
    metadata = dict(command.metadata)
    _check_metadata(metadata)
    now = now_ms()

    def made(identity: Any) -> Agent:
        return Agent.model_validate(
            {"id": agent_id, "name": name.strip(), "identity": identity, "profile": profile,
             "budget": budget, "metadata": metadata, "parent": parent, "status": "idle",
             "created_at": now, "updated_at": now, "context_at": now,
             **({} if definition is None else {"definition": dict(definition)})}
        )  # fmt: skip

    if actor.agent is not None:
        caller = service.agent(actor.agent)
        _check_tree_depth(service, caller)
        parent = caller.id
        identity = _inherited_identity(service, actor, command)
        fitcheck.require_agent_fits(service, caller, made(identity))
    else:
        if not command.identity:
            raise ServiceError("identity-required", "an agent needs a signing identity")
        identity = command.identity
    agent = made(check_identity(service, identity))
    with service.store.atomic():
        if _has_children(service, agent_id):
            # A deleted agent's children still name it as their parent: an agent made
            # under its id would manage them, and their spending would reach its caps.
            raise ServiceError(
                "agent-exists",
                f"agent `{agent_id}` was deleted, but its child agents still name it as "
                "their parent",
                help="choose another id",
            )  # fmt: skip
        if service.store.page("threads", 0, 1, tag=agent_id):
            # A deleted agent's threads are left to an admin, found by their agent's id: an
            # agent made under it would take them over (their prompts, their `max_cost`
            # to spend under), as an old turn decided for it until turns went with their
            # agent, though it is another agent.
            raise ServiceError(
                "agent-exists",
                f"agent `{agent_id}` was deleted, but its threads still name it",
                help="choose another id, or delete those threads first",
            )  # fmt: skip
        if not service.store.insert(Agent.KIND, agent.id, agent.stored(), tag=parent_tag(agent)):
            raise ServiceError("agent-exists", f"agent `{agent.id}` already exists")
    return agent


def _check_tree_depth(service: Service, caller: Agent) -> None:
    """An agent's child must be within MAX_CHAIN agents of its root, so that every walk up
    its chain (the budget caps it is charged against, who may manage it) reaches the root."""
    if sum(1 for _ in ancestors(caller, service.find_agent)) >= MAX_CHAIN:
        raise ServiceError(
            "agent-too-deep",
            f"agent `{caller.id}` is {MAX_CHAIN} agents deep, counting its root: its "
            "tree can grow no deeper below it",
        )  # fmt: skip


def _inherited_identity(service: Service, actor: Principal, command: c.CreateAgent) -> Any:
    """A child agent's identity: its creator's (`identity-not-inherited` for another)."""
    return require_own_identity(
        service, actor, command.identity or None,  # (an empty one is the creator's too)
        lambda own: ServiceError(
            "identity-not-inherited", "a child agent inherits its creator's identity"
        ),
        none_is_own=True,
    )  # fmt: skip


def check_child(service: Service, actor: Principal, command: c.CreateAgent) -> None:
    """Before an agent's `agents.create` is decided: the child's identity is the caller's
    (`_inherited_identity`) and the tree has room for it (`_check_tree_depth`)."""
    if actor.agent is not None:
        caller = service.agent(actor.agent)
        _inherited_identity(service, actor, command)
        _check_tree_depth(service, caller)


def agents_create(service: Service, actor: Principal, command: c.CreateAgent) -> Result:
    agent = create_agent(service, actor, command)
    return Result(Outcome.CREATED, agent, etag(agent.stored()))


def require_managed(
    service: Service,
    actor: Principal,
    target: Agent | str,
    subject: str | None = None,
    **extra: Any,
) -> Agent | None:
    """With an agent's token, `target` (an agent's doc, or an id, found or not) must be the
    agent itself or one of its descendants (docs/design.md section 3: agents can only narrow; a
    parent manages its children), else `not-managed-agent`, whose message starts with
    `subject` (default "agent `<id>` is") and carries `extra` (a `help`); returns the
    calling agent (None for an admin)."""
    if actor.agent is None:
        return None
    caller = service.agent(actor.agent)
    agent = service.find_agent(target) if isinstance(target, str) else target
    if manages(service, caller, agent):
        return caller
    if subject is None:
        subject = f"agent `{target if isinstance(target, str) else target.id}` is"
    raise ServiceError(
        "not-managed-agent",
        f"{subject} neither agent `{caller.id}` nor one of its descendants",
        **extra,
    )  # fmt: skip


def manages(service: Service, caller: Agent, target: Agent | None) -> bool:
    """Whether `target` is `caller` or one of its descendants; an agent that is gone (a
    thread's deleted agent) has no place in the tree left, so is neither."""
    return target is not None and any(
        node.id == caller.id for node in ancestors(target, service.find_agent)
    )


def check_managed(service: Service, actor: Principal, command: c.ById) -> None:
    """Before an agent's `agents.update`/`agents.delete` is decided: a target it may not
    manage is refused at once (nothing logged, no pause a human could only see fail)."""
    require_managed(service, actor, service.agent(command.id))


def agent_stored(service: Service, actor: Principal, command: c.ById) -> Doc:
    """The agent `command.id` as committed, if the caller manages it: what a `PATCH` or
    `DELETE` acts on, and its `If-Match` names (api.service.manage). `sync` first: in the
    write's transaction, the cached agent may be older than another process's change."""
    service.sync()
    agent = service.agent(command.id)
    require_managed(service, actor, agent)
    return agent.stored()


def _has_children(service: Service, agent_id: str) -> bool:
    return bool(service.store.page("agents", 0, 1, tag=agent_id))


# What an agent's fields change of what it may do: its profile, and the attributes
# conditions read (`agent.name`, `agent.metadata.*`).
ACCESS_FIELDS = frozenset({"profile", "name", "metadata"})
# What conditions read of an agent besides its id (api.service.decide.agent_context).
CONTEXT_FIELDS = ("name", "identity", "metadata")


def agents_update(service: Service, actor: Principal, command: c.UpdateAgent) -> Result:
    agent = update_agent(service, actor, command)
    return Result(Outcome.DONE, agent, etag(agent.stored()))


def update_agent(
    service: Service,
    actor: Principal,
    command: c.UpdateAgent,
    definition: Mapping[str, Any] | None = None,
) -> Agent:
    """The agent `command` changes, as committed; with `definition`, its Seed definition
    too (api.service.definitions). A rename renames its definition as well: the two names
    are one."""
    with service.store.atomic():
        # The agent as committed: another process may have changed or deleted it since
        # this request's look at the store, and the cached one written back undid that.
        service.sync()
        old = service.agent(command.id)
        caller = require_managed(service, actor, old)
        changes: dict[str, Any] = {"updated_at": now_ms()}
        # (a field given as null is not given: it changes nothing)
        if command.name is not None:
            if not command.name.strip():
                raise ServiceError("invalid-name", "Name is required")
            changes["name"] = command.name.strip()
        if command.profile is not None:
            changes["profile"] = _check_profile(service, command.profile)
        if command.budget is not None:
            changes["budget"] = parse_budget(command.budget)
        if command.metadata is not None:
            changes["metadata"] = {**old.metadata, **command.metadata}
            _check_metadata(changes["metadata"])  # (the merge: each PATCH may be small)
        if command.status is not None:  # (an AgentStatus: the command's type)
            changes["status"] = command.status
        if definition is not None:
            changes["definition"] = dict(definition)
        elif old.definition is not None and "name" in changes:
            changes["definition"] = {**old.definition, "name": changes["name"]}
        if any(key in changes and changes[key] != getattr(old, key) for key in CONTEXT_FIELDS):
            changes["context_at"] = changes["updated_at"]
        agent = old.changed(**changes)
        if caller is not None and command.given(*ACCESS_FIELDS, "budget"):
            # it may end up doing nothing its caller cannot (itself: nothing it could not
            # already), and its budget is no looser than any cap above it or its old own
            itself = caller.id == old.id  # (then `caller` is it before the change)
            above = old if itself else service.find_agent(old.parent) if old.parent else None
            fitcheck.require_agent_fits(
                service, caller, agent, fitcheck.chain_caps(service, above),
                access=command.given(*ACCESS_FIELDS),
            )  # fmt: skip
        service.store.update(Agent.KIND, agent.id, agent.stored(), tag=parent_tag(agent))
        # In the same transaction: committed apart, another process could look at the
        # store between the two and keep its cached agent (for good, had the note's
        # write failed after the change was committed).
        service.read.forget_agent(agent.id)
    return agent


def agents_delete(service: Service, actor: Principal, command: c.DeleteAgent) -> Result:
    with service.store.atomic():
        service.sync()  # (see agents_update: one deleted elsewhere is not found)
        target = service.agent(command.id)
        by_agent = require_managed(service, actor, target) is not None
        if by_agent and _has_children(service, target.id):
            # its children's spending would no longer reach the caps above it
            raise ServiceError(
                "agent-has-children",
                f"agent `{target.id}` has child agents: delete them first",
            )  # fmt: skip
        service.store.delete(Agent.KIND, target.id)
        # Its tokens go with it: an agent made later under the same id is another agent,
        # which the old tokens must not act as.
        tokens.revoke(service, tokens.agent_tokens(service.store, target.id))
        _delete_turns(service, target.id)
        agentowned.delete_all(service, target.id)
        reject_orphans(service, "agent", target.id, f"agent `{target.id}` was deleted")
        service.read.forget_agent(target.id)  # (in the transaction: see agents_update)
    return Result(Outcome.REMOVED, None)


def _delete_turns(service: Service, agent_id: str) -> None:
    """Inside the transaction that deletes agent `agent_id`: its turns (found through the
    tag index: a turn's tag is its agent's id). Each pinned the agent's profile, and an
    agent made later under the same id is another agent, as for its tokens: a call naming
    an old turn was decided for the new agent on the old one's profile (its roles, hooks
    and budget) until the turn ended; now it is `turn-not-found`."""
    for turn_id in [row.id for row in service.store.scan("turns", tag=agent_id)]:
        service.store.delete("turns", turn_id)


def admit_turn(
    service: Service, agent_id: str, thread_id: str | None, snapshot: Snapshot, compile: bool = True
) -> Turn:
    """Pin a turn to the latest revision (`snapshot`, unless a newer one was committed
    since it was read) and the agent's profile, as committed: it keeps deciding there
    whatever is uploaded. An agent whose profile that revision does not declare is not found,
    as its decisions would all be denied. With `compile` False, NotCompiled for a newer
    revision this process has not compiled yet (nothing written: the caller compiles it
    off the event loop and asks again).

    Read inside the turn's transaction, as `threads_create` reads its agent: an agent
    another process moved to a narrower profile (or deleted) after this process last
    looked, or a policy it uploaded meanwhile, was pinned as it had been, and the turn's
    calls were decided on the old profile or revision for the turn's whole lifetime."""
    with service.store.atomic():
        service.sync()
        latest = service.snapshots.latest
        if latest != snapshot.revision:
            snapshot = service.snapshots.get(latest, compile)
        agent = service.agent(agent_id)
        if thread_id is not None:
            owned(service, Thread, thread_id, agent)  # (not found, or another agent's)
        service.agent_profile(agent, snapshot)
        now = now_ms()
        turn = Turn(
            id=new_id(), agent=agent.id, thread=thread_id, revision=snapshot.revision,
            profile=agent.profile, created_at=now,
            ends_at=now + service.turn_lifetime_ms,  # (then decide._check_running: `turn-ended`)
        )  # fmt: skip
        service.store.insert(Turn.KIND, turn.id, turn.stored(), tag=turn.agent)
        if thread_id is not None:
            threadevents.record(
                service.store, thread_id, "turn", now, turn=turn.id, revision=turn.revision,
                profile=turn.profile, ends_at=turn.ends_at,
            )  # fmt: skip
    return turn


OPERATIONS: dict[str, Operation] = {
    "agents.list": agents_list,
    "agents.get": agents_get,
    "agents.create": agents_create,
    "agents.update": agents_update,
    "agents.delete": agents_delete,
}
