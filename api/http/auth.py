"""Bearer tokens: `admin` can do everything; `decide` can decide, list tools and fit-check;
an agent's token decides, lists and fit-checks for itself only, and its management
requests are decided as tool calls under its own profile (api.service.manage)."""

from __future__ import annotations

from collections.abc import Iterable

from starlette.requests import Request
from starlette.types import Scope

from api.http.body import single_header
from api.http.parts import parts_of
from api.service.errors import ServiceError, invalid_token
from api.service.tokens import Principal, TokenCache, act_for, token_expired


def bearer(scope: Scope) -> str:
    """The token of `Authorization: Bearer <token>` (the scheme in any case), given once
    (else 400 `repeated-header`). Only HTTP's own white space (spaces, tabs) is taken off
    around the token, not `str.strip()`'s every Unicode space: a header is read as
    Latin-1, and `Bearer \\xa0<token>` or `<token>\\x85` (a no-break space, a next-line)
    must not be that token here while it is another token to a proxy or a log reading
    the header."""
    scheme, _, token = (single_header(scope, b"authorization") or "").partition(" ")
    token = token.strip(" \t")
    if scheme.lower() != "bearer" or not token:
        raise ServiceError("unauthorized", "send `Authorization: Bearer <token>`")
    return token


def principal(request: Request) -> Principal:
    """Who sent the request, on a token cache brought up to date first (another process
    may have revoked the token). Every write the request then makes reads the token again
    inside its own transaction (`tokens.check_writes`): another worker may revoke it while
    the body is read or a policy compiled, and the request must then write nothing."""
    charter = parts_of(request)
    charter.service.sync()
    actor = known(charter.tokens, bearer(request.scope))
    act_for(actor)
    return actor


def known(tokens: TokenCache, token: str) -> Principal:
    found = tokens.lookup(token)
    if found is None:
        raise invalid_token()
    if found.expired():
        raise token_expired()
    return found


def require_admin(request: Request) -> Principal:
    actor = principal(request)
    if not actor.admin:
        raise ServiceError("insufficient-scope", "this needs an `admin` token")
    return actor


def require_decide(request: Request, agent: str | None = None) -> Principal:
    """admin or decide, or the agent's own token (for that agent only). Without `agent`:
    the caller is known and may decide for some agent; a request that names its agent in
    its body checks it with `may_decide` once the body is read (so a caller without a
    valid token is refused before anything of the body is read or checked)."""
    return may_decide(principal(request), () if agent is None else (agent,))


def authenticate_decisions(scope: Scope, tokens: TokenCache) -> tuple[str, Principal]:
    """The bearer token of a decision request and who it is, on the token cache as it is
    (no sync here: the group commit looks for other processes' changes inside its write
    transaction and then checks the token again). Before the body is read: a caller
    without a valid token is refused without reading or checking anything of it."""
    token = bearer(scope)
    return token, known(tokens, token)


def may_decide(actor: Principal, agents: Iterable[str]) -> Principal:
    """The 403 for an agent's token that names another agent."""
    if actor.scope == "agent" and any(agent != actor.agent for agent in agents):
        raise ServiceError("insufficient-scope", "an agent token acts for its own agent only")
    return actor


def require_manager(request: Request) -> Principal:
    """admin, or an agent (whose request is then decided as a tool call)."""
    actor = principal(request)
    if actor.scope == "decide":
        raise ServiceError("insufficient-scope", "a `decide` token cannot manage resources")
    return actor
