"""Bearer tokens, stored hashed (SHA-256; the tokens are 256 random bits, so no salt or
slow hash is needed). A token is `admin`, `decide`, or an agent's own token."""

from __future__ import annotations

import hashlib
import importlib
import secrets
import threading
import time
from collections.abc import Callable, Collection, Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from api.records import Token
from api.service.core import Service, now_ms, token_tag
from api.service.errors import ServiceError, invalid_token, not_found
from api.service.tokenuse import TokenUses
from policy.store import Store

SCOPES = ("admin", "decide")
PREFIX = "chr_"
MAX_NAME = 256  # characters of a token's name (`POST /v1/tokens`, `charter token --name`)
UNKNOWN_SECONDS = 2.0  # how long a look-up that found no token is remembered


@dataclass(frozen=True, slots=True)
class Principal:
    token_id: str
    scope: str  # "admin", "decide" or "agent"
    agent: str | None = None
    expires_at: int | None = None  # ms since the epoch; None: never

    @property
    def admin(self) -> bool:
        return self.scope == "admin"

    def expired(self, at: int | None = None) -> bool:
        """Whether the token has expired by `at` (ms since the epoch; default: now)."""
        return self.expires_at is not None and (now_ms() if at is None else at) >= self.expires_at


# The longest a token may be issued for: ten years.
MAX_LIFETIME_MS = 10 * 366 * 24 * 3600 * 1000


def token_expired() -> ServiceError:
    return ServiceError("token-expired", "the token has expired; issue a new one")


def expiry(expires_in: int | None, expires_at: int | None, now: int | None = None) -> int | None:
    """When a token being issued expires (ms since the epoch), from the request's
    `expires_in` (seconds from now) or `expires_at` (ms since the epoch), at most one of
    them; None: never. In the past, or over MAX_LIFETIME_MS ahead: `invalid-expiry`."""
    if expires_in is not None and expires_at is not None:
        raise ServiceError("invalid-expiry", "give `expires_in` or `expires_at`, not both")
    at = now_ms() if now is None else now
    if expires_in is not None:
        expires_at = at + expires_in * 1000
    if expires_at is None:
        return None
    if not at < expires_at <= at + MAX_LIFETIME_MS:
        raise ServiceError(
            "invalid-expiry", "a token expires after now and within ten years",
            expires_at=expires_at,
        )  # fmt: skip
    return expires_at


def _builtin_sha256() -> Callable[[bytes], Any]:
    """CPython's own SHA-256 (`_sha256` in 3.11, `_sha2` from 3.12), else hashlib's.
    The same digest; but hashlib's goes through OpenSSL's EVP set-up on every call, and
    a decision request hashes its token each time: one decision at a time over HTTP
    (cold caches), swapping it took 2-3 points off the gap to the framework's ceiling
    (about 7 µs a request), though both cost ~330 ns in a hot loop."""
    for module in ("_sha256", "_sha2"):
        try:
            found: Callable[[bytes], Any] = importlib.import_module(module).sha256
            return found
        except (ImportError, AttributeError):
            continue
    return hashlib.sha256


_sha256 = _builtin_sha256()


def digest(token: str) -> str:
    return str(_sha256(token.encode()).hexdigest())


def issue(
    store: Store, scope: str, agent: str | None = None, name: str = "",
    expires_at: int | None = None,
) -> tuple[str, Token]:  # fmt: skip
    """A new token: the plain text is returned once and never stored.

    The one check of a token's agent, for `POST /v1/tokens`, `charter token` and anything
    else that issues one: an agent token (`scope="agent"`) names an agent that exists when
    its token is written, and no other token names one (not even an empty one). Else a
    ServiceError (`agent-required`, `agent-not-allowed` or `agent-not-found`) and
    nothing is written. A scope that is none of these is a caller's bug (both front ends
    offer only these): a ValueError."""
    if scope not in (*SCOPES, "agent"):
        raise ValueError(f"scope `{scope}` is not a token scope")
    if scope == "agent" and not agent:
        raise ServiceError(
            "agent-required", "a token of scope `agent` needs the id of an existing agent"
        )
    if scope != "agent" and agent is not None:
        raise ServiceError(
            "agent-not-allowed",
            f"only a token of scope `agent` names an agent, not one of scope `{scope}`",
        )  # fmt: skip
    with store.atomic():  # the agent exists when its token is written
        if agent is not None and store.get("agents", agent) is None:
            raise not_found("agent", agent)
        token = PREFIX + secrets.token_urlsafe(32)
        hashed = digest(token)
        record = Token.model_validate(
            {"id": hashed[:16], "hash": hashed, "scope": scope, "agent": agent, "name": name,
             "created_at": now_ms(), "expires_at": expires_at, "last_used_at": None}
        )  # fmt: skip
        doc = record.stored()
        store.insert(Token.KIND, record.id, doc, tag=token_tag(doc))
    return token, record


def revoke(service: Service, ids: Iterable[str]) -> bool:
    """Delete the tokens `ids` (in the caller's transaction, or one of its own) and drop
    them from every process's token cache: here at once, elsewhere at its next sync.
    Whether any was there."""
    with service.store.atomic():
        revoked = [token_id for token_id in ids if service.store.delete("tokens", token_id)]
        if revoked:
            service.read.forget_tokens(revoked)
    return bool(revoked)


def require_current(store: Store, actor: Principal) -> None:
    """Inside the write transaction of a request `actor` was authorized for: its token is
    still stored, else `unauthorized`, as a token that is not valid. The token was checked when
    the request came, on a cache brought up to date then; a request that runs a while
    before it writes (its body read, fit checks, a policy compiled ahead: seconds) would
    otherwise act on a token another process revoked meanwhile. Inside the transaction
    nobody can revoke it before the COMMIT. One read of the store, by its key."""
    if store.get("tokens", actor.token_id) is None:
        raise invalid_token()
    if actor.expired():
        raise token_expired()


# Who the request this context runs for was authorized as (api.http.auth), None outside
# one. A context variable: a request's task, and the threads it hands its work to
# (starlette's `run_in_threadpool` runs them in a copy of its context), see its own.
_ACTING: ContextVar[Principal | None] = ContextVar("charter_acting", default=None)


def act_for(actor: Principal | None) -> None:
    """What follows in this context acts for `actor` (None: for no token): each write
    transaction it begins checks `actor`'s token first (`check_writes`)."""
    _ACTING.set(actor)


def check_writes(store: Store) -> None:
    """Every outermost write transaction on `store` begun for a request (`act_for`) reads
    the request's token first (`require_current`), whatever the token and whatever it
    writes: a management request, an upload, a token's issue or revocation, a turn. A
    revoked token is then `unauthorized`, and the transaction is rolled back: nothing is written.
    The one place every write passes, so no endpoint has a check of its own to forget,
    and a write nested in another is checked once, with it. Reads begin no transaction
    and are not checked; nor is the decision lane, whose group commit checks its own."""

    def check() -> None:
        actor = _ACTING.get()
        if actor is not None:
            require_current(store, actor)

    store.on_begin(check)


def agent_tokens(store: Store, agent: str) -> list[str]:
    """The ids of the agent tokens of `agent` (found through the tag index)."""
    return [row.id for row in store.scan("tokens", tag=agent)]


class TokenCache:
    """Token look-ups by the token's SHA-256. A token found stays cached until `forget()`
    drops it: revoking a token calls it here and notes the revocation in the store's
    change feed, so every other process drops that token at its next `Service.sync()`
    (api.service.readmodel; a decision request's group
    commit syncs inside its write transaction and checks its requests' tokens again if
    anything moved; other requests sync before their look-up). A look-up that found no
    token is remembered for UNKNOWN_SECONDS."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.uses = TokenUses()  # (each token found: its use noted)
        self._found: dict[str, Principal] = {}
        self._unknown: dict[str, float] = {}
        self._lock = threading.Lock()
        self._forgets = 0  # how many times `forget` dropped the cache

    def lookup(self, token: str) -> Principal | None:
        hashed = digest(token)
        found = self._found.get(hashed)
        if found is not None:
            self.uses.note(found.token_id)
            return found
        now = time.monotonic()
        if self._unknown.get(hashed, 0.0) > now:
            return None
        forgets = self._forgets
        doc = self.store.get(Token.KIND, hashed[:16])
        principal = None
        kept = None if doc is None else Token.read(doc)
        if kept is not None and secrets.compare_digest(kept.hash, hashed):
            principal = Principal(kept.id, kept.scope, kept.agent, kept.expires_at)
            self.uses.note(kept.id, kept)
        with self._lock:
            if self._forgets != forgets:
                # Dropped while the token was read (by a revocation, maybe of this one,
                # that another thread saw or made): kept, it would outlive the drop.
                return principal
            if principal is None:
                if len(self._unknown) > 10_000:
                    self._unknown.clear()
                self._unknown[hashed] = now + UNKNOWN_SECONDS
            else:
                if len(self._found) > 10_000:
                    self._found.clear()
                self._found[hashed] = principal
        return principal

    def forget(self, token_ids: Collection[str] | None = None) -> None:
        """Drop the tokens `token_ids` (None: every token, and the unknown ones too)."""
        with self._lock:
            if token_ids is None:
                self._found.clear()
                self._unknown.clear()
            else:
                gone = [key for key, found in self._found.items() if found.token_id in token_ids]
                for key in gone:
                    del self._found[key]
            self._forgets += 1
