"""Bearer tokens, stored hashed (SHA-256; the tokens are 256 random bits, so no salt or
slow hash is needed). A token is `admin`, `decide`, or an agent's own token."""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from dataclasses import dataclass

from api.service.core import now_ms
from policy.store import Doc, Store

SCOPES = ("admin", "decide")
PREFIX = "chr_"
CACHE_SECONDS = 2.0  # a revoked token stops working within this long in other processes


@dataclass(frozen=True, slots=True)
class Principal:
    token_id: str
    scope: str  # "admin", "decide" or "agent"
    agent: str | None = None

    @property
    def admin(self) -> bool:
        return self.scope == "admin"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def issue(store: Store, scope: str, agent: str | None = None, name: str = "") -> tuple[str, Doc]:
    """A new token: the plain text is returned once and never stored."""
    token = PREFIX + secrets.token_urlsafe(32)
    hashed = digest(token)
    doc: Doc = {
        "id": hashed[:16],
        "hash": hashed,
        "scope": "agent" if agent else scope,
        "agent": agent,
        "name": name,
        "created_at": now_ms(),
    }
    store.insert("tokens", doc["id"], doc)
    return token, doc


def view(doc: Doc) -> Doc:
    return {k: doc[k] for k in ("id", "scope", "agent", "name", "created_at")}


class TokenCache:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._cache: dict[str, tuple[float, Principal | None]] = {}
        self._lock = threading.Lock()

    def lookup(self, token: str) -> Principal | None:
        hashed = digest(token)
        now = time.monotonic()
        hit = self._cache.get(hashed)
        if hit is not None and hit[0] > now:
            return hit[1]
        doc = self.store.get("tokens", hashed[:16])
        principal = None
        if doc is not None and secrets.compare_digest(doc["hash"], hashed):
            principal = Principal(doc["id"], doc["scope"], doc.get("agent"))
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[hashed] = (now + CACHE_SECONDS, principal)
        return principal

    def forget(self) -> None:
        with self._lock:
            self._cache.clear()
