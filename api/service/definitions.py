"""Agents made and changed from a Seed `AgentDefinition` (`agents.define`), and read back
(`agents.get_definition`): docs/design.md section 7.

A definition is normalized by policy.seed with Seed's own limits and messages (a refusal
is 400 `invalid-definition`, its message Seed's, verbatim) and kept, normalized, with the
agent (`Agent.definition`). Defining an agent that does not exist makes it, as
`agents.create` does, under the path's id; defining one that exists changes it, as
`agents.update` does: the same checks (the profile, the tree, the fit of what an agent's
token makes), and the definition's `name` is the agent's. The agent's identity is the
signing identity its first signing key names (a key is a secret name,
`hm-account-<16 chars>`), or with an agent's token its caller's, which is the only one
such a token may name; it is set when the agent is made and never changes. The
definition's `tools` narrow what the profile allows (api.service.seedgrants).
"""

from __future__ import annotations

from typing import Any

from api import commands as c
from api.records import Agent
from api.service import resources
from api.service.core import Service
from api.service.errors import ServiceError
from api.service.etags import etag
from api.service.ops import Operation, Outcome, Result
from api.service.seedgrants import grants_of
from api.service.tokens import Principal
from engine.seed import to_role_source
from policy import identities, seed
from policy.catalogue import PUBLISH


def account_of(service: Service, key: str) -> str | None:
    """The account id of the signing identity whose secret is named `key`; None when no
    stored secret of kind `hm-account-key` has that name."""
    doc = service.store.get(identities.SECRETS, key)
    meta = doc.get("metadata") if doc is not None else None
    if not isinstance(meta, dict) or meta.get("kind") != identities.KIND:
        return None
    account = meta.get("accountId")
    return account if isinstance(account, str) else None


def normalized(service: Service, actor: Principal, raw: Any) -> seed.AgentDefinition:
    """`raw` normalized, with Seed's messages: `invalid-definition`, or `unknown-identity`
    ("Signing key not found") for a key that names no signing identity; with an agent's
    token, a key of another identity than its own is `identity-not-inherited`."""
    try:
        definition = seed.normalize(raw, lambda key: account_of(service, key) is not None)
    except seed.SeedError as exc:
        if exc.message == "Signing key not found":
            raise ServiceError("unknown-identity", exc.message) from None
        raise ServiceError("invalid-definition", exc.message) from None
    if actor.agent is not None:
        own = service.agent(actor.agent).identity
        if any(account_of(service, key) != own for key in definition.signing_keys):
            raise ServiceError(
                "identity-not-inherited",
                "an agent's token may name only its own identity's signing key",
                help=f"name `{identities.secret_name(own)}`, or no signing key",
            )  # fmt: skip
    return definition


def equivalent(
    service: Service, actor: Principal, command: c.DefineAgent
) -> tuple[c.CreateAgent | c.UpdateAgent, seed.AgentDefinition]:
    """What defining `command.id` is: the `agents.create` of an agent not there (its
    `profile` required), else the `agents.update` of the one there; and the definition."""
    definition = normalized(service, actor, command.definition)
    target = service.find_agent(command.id)
    if target is not None:
        if actor.agent == target.id:
            _require_no_wider(service, target, definition)
        change = c.UpdateAgent(id=command.id, name=definition.name, profile=command.profile)
        return change, definition
    if command.profile is None:
        raise ServiceError(
            "profile-required",
            f"agent `{command.id}` is not there: a definition that makes it needs a `profile`",
            help="send `profile`, the policy's profile the agent decides under",
        )  # fmt: skip
    keys = definition.signing_keys
    identity = account_of(service, keys[0]) if keys else None
    made = c.CreateAgent(name=definition.name, profile=command.profile, identity=identity)
    return made, definition


def _require_no_wider(service: Service, agent: Agent, definition: seed.AgentDefinition) -> None:
    """An agent's own token may not widen its own grants: what the new definition grants,
    with its ancestors', must be within what it has now (else `definition-widens`). (Of a
    descendant it may: that one is bounded by the caller's own grants, which its
    intersection holds.)"""
    now = grants_of(agent, service.find_agent)
    if now is None:  # (no definition in its chain: nothing of Seed's narrows it)
        return
    changed = agent.model_copy(update={"definition": definition.to_json()})
    then = grants_of(changed, service.find_agent)
    assert then is not None
    gained = sorted(then.callables - now.callables) + (
        [PUBLISH] if then.publish and not now.publish else []
    )
    if gained:
        raise ServiceError(
            "definition-widens",
            f"agent `{agent.id}` may not grant itself {', '.join(f'`{t}`' for t in gained)}",
            help="its own definition may only narrow; an admin or an ancestor widens it",
            gained=gained,
        )  # fmt: skip


def view(service: Service, agent: Agent) -> dict[str, Any]:
    """An agent's definition as `GET /v1/agents/{id}/definition` answers it."""
    grants = grants_of(agent, service.find_agent)
    assert grants is not None and agent.definition is not None  # (callers check)
    return {
        "id": agent.id,
        "profile": agent.profile,
        "identity": agent.identity,
        "definition": agent.definition,
        "grants": list(grants.tool_names()),
        "role": to_role_source(f"seed-{agent.id}", grants),
        "updated_at": agent.updated_at,
    }


def agents_define(service: Service, actor: Principal, command: c.DefineAgent) -> Result:
    service.sync()  # (one made or deleted by another process since: as it is now)
    change, definition = equivalent(service, actor, command)
    shown = definition.to_json()
    if isinstance(change, c.CreateAgent):
        agent = resources.create_agent(service, actor, change, command.id, shown)
        outcome = Outcome.CREATED
    else:
        agent = resources.update_agent(service, actor, change, shown)
        outcome = Outcome.DONE
    return Result(outcome, view(service, agent), etag(agent.stored()))


def agents_get_definition(
    service: Service, actor: Principal, command: c.GetAgentDefinition
) -> Result:
    agent = service.agent(command.id)
    if agent.definition is None:
        raise ServiceError(
            "definition-not-found",
            f"agent `{agent.id}` has no Seed definition",
            help=f"PUT /v1/agents/{agent.id}/definition gives it one",
        )  # fmt: skip
    return Result(Outcome.DONE, view(service, agent), etag(agent.stored()))


OPERATIONS: dict[str, Operation] = {
    "agents.define": agents_define,
    "agents.get_definition": agents_get_definition,
}
