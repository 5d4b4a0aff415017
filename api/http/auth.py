"""Bearer tokens: `admin` can do everything; `decide` can decide, list tools and fit-check;
an agent's token decides, lists and fit-checks for itself only, and its management
requests are decided as tool calls under its own profile (api.service.manage)."""

from __future__ import annotations

from collections.abc import Iterable

from starlette.requests import Request

from api.http.body import header
from api.http.parts import parts_of
from api.service.errors import ServiceError
from api.service.tokens import Principal


def bearer(request: Request) -> str:
    scheme, _, token = (header(request, b"authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ServiceError(401, "unauthorized", "send `Authorization: Bearer <token>`")
    return token.strip()


def principal(request: Request, token: str | None = None, *, synced: bool = False) -> Principal:
    """Who sent the request. The token cache is brought up to date first (another
    process may have revoked the token), except for decision requests (`synced`), whose
    group commit checks their tokens again inside its transaction if anything moved."""
    if token is None:
        token = bearer(request)
    charter = parts_of(request)
    if not synced:
        charter.service.sync()
    found = charter.tokens.lookup(token)
    if found is None:
        raise ServiceError(401, "unauthorized", "the token is not valid")
    return found


def require_admin(request: Request) -> Principal:
    actor = principal(request)
    if not actor.admin:
        raise ServiceError(403, "insufficient-scope", "this needs an `admin` token")
    return actor


def require_decide(request: Request, agent: str | None = None) -> Principal:
    """admin or decide, or the agent's own token (for that agent only)."""
    return require_decide_all(request, () if agent is None else (agent,))


def require_decide_all(request: Request, agents: Iterable[str]) -> Principal:
    """require_decide for every agent of a batch (the token is looked up once)."""
    return _may_decide(principal(request), agents)


def authorize_decisions(request: Request, agents: Iterable[str]) -> str:
    """require_decide_all for a decision request, on the token cache as it is: the bearer
    token, for the group commit to check again if anything moved (GroupCommit.decide)."""
    token = bearer(request)
    _may_decide(principal(request, token, synced=True), agents)
    return token


def _may_decide(actor: Principal, agents: Iterable[str]) -> Principal:
    if actor.scope == "agent" and any(agent != actor.agent for agent in agents):
        raise ServiceError(403, "insufficient-scope", "an agent token acts for its own agent only")
    return actor


def require_manager(request: Request) -> Principal:
    """admin, or an agent (whose request is then decided as a tool call)."""
    actor = principal(request)
    if actor.scope == "decide":
        raise ServiceError(403, "insufficient-scope", "a `decide` token cannot manage resources")
    return actor
