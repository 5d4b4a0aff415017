"""The server's own Ed25519 signing keys: what signs the log's checkpoints and receipts.

The keys are one document of the store (`server-keys/ring`), so every process and every
node on one database signs with the same key. Each key is kept as its public key, its
validity and its 32-byte seed sealed with the store's secret key (policy/secrets.py),
which lives in a key file outside the database: someone who can write the database but
has not that file can neither read a seed nor add a key of their own (a seed sealed
under another key does not open, and a key whose seed does not open, or does not give
its public key, is trusted by no one here).

A key's id is its RFC 7638 JWK thumbprint: the base64url (unpadded) SHA-256 of
`{"crv":"Ed25519","kty":"OKP","x":"<base64url of the public key>"}`, so anyone holding
the public key computes its id. The last key of the ring signs; rotating adds a new one
and closes the one before (`not_after`), which stays published so that what it signed
still verifies. A process reads the ring again at most `RELOAD_SECONDS` after it last did,
so another node's rotation reaches it within that time.
"""

from __future__ import annotations

import base64
import hashlib
import threading
import time
from dataclasses import dataclass
from typing import Any

import nacl.signing

from policy.secrets import Sealer, SecretKeyError
from policy.store import Store

KIND = "server-keys"
RING = "ring"
RELOAD_SECONDS = 10.0
# How far past its `not_after` a key's signature is accepted: a node reads the ring
# again within RELOAD_SECONDS of a rotation elsewhere, and nodes' clocks differ a little.
GRACE_MS = 60_000


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def thumbprint(public: bytes) -> str:
    """The RFC 7638 thumbprint of an Ed25519 public key's JWK (its members in order)."""
    canonical = f'{{"crv":"Ed25519","kty":"OKP","x":"{b64url(public)}"}}'
    return b64url(hashlib.sha256(canonical.encode("ascii")).digest())


@dataclass(frozen=True, slots=True)
class PublicKey:
    """A key of the ring as it is published: its id, public key and validity (ms since
    the epoch; `not_after` None for the key that signs now)."""

    kid: str
    public: bytes
    not_before: int
    not_after: int | None

    def jwk(self) -> dict[str, Any]:
        return {
            "kty": "OKP", "crv": "Ed25519", "x": b64url(self.public), "kid": self.kid,
            "alg": "EdDSA", "use": "sig", "not_before": self.not_before,
            "not_after": self.not_after,
        }  # fmt: skip

    def valid_at(self, at_ms: int) -> bool:
        """Whether this key may have signed at `at_ms` (with GRACE_MS either side)."""
        if at_ms < self.not_before - GRACE_MS:
            return False
        return self.not_after is None or at_ms <= self.not_after + GRACE_MS

    @property
    def verify_key(self) -> nacl.signing.VerifyKey:
        return nacl.signing.VerifyKey(self.public)


class KeysFileError(ValueError):
    """A key set (`GET /v1/keys`'s answer) that is not one: the message says where."""


def from_jwks(doc: Any) -> dict[str, PublicKey]:
    """The keys of a JWK set as `GET /v1/keys` answers it, by id; each key's id must be
    its thumbprint (a key set that names a key by another id is refused)."""
    keys = doc.get("keys") if isinstance(doc, dict) else None
    if not isinstance(keys, list):
        raise KeysFileError("it has no `keys` list")
    found: dict[str, PublicKey] = {}
    for i, jwk in enumerate(keys):
        if not isinstance(jwk, dict) or jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
            raise KeysFileError(f"key {i} is not an Ed25519 key (kty OKP, crv Ed25519)")
        try:
            public = unb64url(str(jwk["x"]))
        except (KeyError, ValueError):
            raise KeysFileError(f"key {i} has no base64url `x`") from None
        if len(public) != 32:
            raise KeysFileError(f"key {i}'s `x` is not 32 bytes")
        kid = thumbprint(public)
        if jwk.get("kid") != kid:
            raise KeysFileError(f"key {i}'s `kid` is not its thumbprint (`{kid}`)")
        before, after = jwk.get("not_before", 0), jwk.get("not_after")
        if type(before) is not int or not (after is None or type(after) is int):
            raise KeysFileError(f"key {i}'s `not_before` or `not_after` is not an integer")
        found[kid] = PublicKey(kid, public, before, after)
    return found


def _now() -> int:
    return int(time.time() * 1000)


def _new_entry(sealer: Sealer, now: int) -> dict[str, Any]:
    key = nacl.signing.SigningKey.generate()
    public = bytes(key.verify_key)
    return {
        "kid": thumbprint(public), "x": public, "sealed": sealer.seal(bytes(key)),
        "not_before": now, "not_after": None,
    }  # fmt: skip


class ServerKeys:
    """The ring of one store, opened with the store's sealer. Thread-safe."""

    def __init__(self, store: Store, sealer: Sealer) -> None:
        self._store = store
        self._sealer = sealer
        self._lock = threading.Lock()
        self._signing: tuple[str, nacl.signing.SigningKey] | None = None
        self._read_at = 0.0

    def _entries(self) -> list[dict[str, Any]]:
        doc = self._store.get(KIND, RING)
        return [] if doc is None else list(doc.get("keys", []))

    def _open(self, entry: dict[str, Any]) -> nacl.signing.SigningKey | None:
        """The entry's signing key when its seed opens and gives its public key and id."""
        try:
            key = nacl.signing.SigningKey(self._sealer.open(bytes(entry["sealed"])))
        except (SecretKeyError, KeyError, TypeError, ValueError):
            return None
        public = bytes(key.verify_key)
        if public != entry.get("x") or thumbprint(public) != entry.get("kid"):
            return None
        return key

    def signing(self) -> tuple[str, nacl.signing.SigningKey]:
        """The key that signs now (the ring's last), made on first use."""
        with self._lock:
            if self._signing is None or time.monotonic() - self._read_at > RELOAD_SECONDS:
                entries = self._entries()
                if not entries:
                    entries = self._ensure()
                key = self._open(entries[-1])
                if key is None:
                    raise SecretKeyError(
                        "the server's signing key does not open with this secret key"
                    )
                self._signing = (str(entries[-1]["kid"]), key)
                self._read_at = time.monotonic()
            return self._signing

    def ensure(self) -> None:
        """Make the ring's first key if there is none (a serving process, as it opens the
        store: a read of the keys never writes)."""
        if not self._entries():
            self._ensure()

    def _ensure(self) -> list[dict[str, Any]]:
        """The ring, made with its first key if there is none yet (by one process of
        several starting at once: the others find it made)."""
        with self._store.atomic():
            doc = self._store.get(KIND, RING)
            if doc is None:
                doc = {"keys": [_new_entry(self._sealer, _now())]}
                self._store.insert(KIND, RING, doc)
        return list(doc["keys"])

    def rotate(self) -> PublicKey:
        """A new signing key; the one before stops signing now and stays published."""
        with self._store.atomic():
            doc = self._store.get(KIND, RING)
            entries = [] if doc is None else list(doc.get("keys", []))
            now = _now()
            if entries:
                entries[-1] = {**entries[-1], "not_after": now}
            entries.append(_new_entry(self._sealer, now))
            if doc is None:
                self._store.insert(KIND, RING, {"keys": entries})
            else:
                self._store.update(KIND, RING, {**doc, "keys": entries})
        with self._lock:
            self._signing = None
        return self.public()[-1]

    def public(self) -> list[PublicKey]:
        """Every key of the ring whose seed opens and matches it, oldest first (a key
        someone added to the database without the secret key is left out: it vouches
        for nothing). Writes nothing: none before the ring is made."""
        entries = self._entries()
        found = []
        for entry in entries:
            if self._open(entry) is not None:
                before, after = int(entry.get("not_before") or 0), entry.get("not_after")
                found.append(
                    PublicKey(
                        str(entry["kid"]),
                        bytes(entry["x"]),
                        before,
                        None if after is None else int(after),
                    )
                )
        return found

    def trusted(self) -> dict[str, PublicKey]:
        """The keys `public` gives, by id."""
        return {key.kid: key for key in self.public()}

    def jwks(self) -> dict[str, Any]:
        """The public keys as a JWK set (RFC 7517), `current` naming the signing key."""
        keys = self.public()
        current = next((k.kid for k in reversed(keys) if k.not_after is None), None)
        return {"keys": [key.jwk() for key in keys], "current": current}
