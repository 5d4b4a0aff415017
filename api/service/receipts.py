"""Signed decision receipts: what a decision answer carries when its request asks for one
(`POST /v1/decisions?receipt=true`), and their check, here and offline.

A receipt is a COSE_Sign1 (policy/cose.py) signed with the server's key
(policy/serverkeys.py), sent as base64url without padding; its payload is the CBOR map

    {"v": 1, "seq": 17, "id": "<the decision's id>", "at": <ms>, "agent": "a1",
     "tool": "mail.send", "args": h'<SHA-256>', "final": h'<SHA-256>' or null,
     "effect": "allow", "revision": 3, "policy": h'<SHA-256>'}

- `seq`, `id`: the decision's place in the log and its id (what `GET /v1/decisions`
  shows), so a receipt and its log row can be set side by side;
- `at`: when the receipt was signed, once the decision was committed (ms since the epoch);
- `args`: the digest of the call's arguments as the log records them (the call's own,
  with its tool's secret arguments replaced by the redaction mark, as everywhere the
  service shows a call): no secret is digested into a receipt;
- `final`: the digest of the arguments the decision answers (`args` of the answer: with
  the rewrites and defaults; null when it answers none);
- `policy`: the digest of the revision's files (`revision_digest`).

A digest is SHA-256 over the value's deterministic CBOR (RFC 8949 section 4.2.1, cbor2's
`canonical=True`), the value as the service reads the request's JSON (an integer stays an
integer, a number with a fraction is the float it exactly is, else its Decimal). `verify`
checks the signature with a published key valid at `at`, and, given the call, that the
receipt is about that call.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import cbor2
import nacl.signing

from api.service.calls import Call
from api.service.redaction import every_secret, redact, secret_names
from engine.compile import Snapshot
from policy.cose import CoseError, sign1, verify1
from policy.serverkeys import PublicKey

VERSION = 1
# The fields a receipt binds, in the order a check reports them.
FIELDS = ("seq", "id", "at", "agent", "tool", "args", "final", "effect", "revision", "policy")


def digest(value: Any) -> bytes:
    """SHA-256 of `value`'s deterministic CBOR."""
    return hashlib.sha256(cbor2.dumps(value, canonical=True)).digest()


def revision_digest(files: Iterable[tuple[str, str]]) -> bytes:
    """The digest of a revision's files (`(path, text)` pairs): of the sorted `[path,
    SHA-256 of its UTF-8 text]` pairs (the texts as the store keeps them,
    policy/store/texts.py)."""
    pairs = sorted(
        [path, hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()]
        for path, text in files
    )
    return digest(pairs)


def encode(receipt: bytes) -> str:
    return base64.urlsafe_b64encode(receipt).rstrip(b"=").decode("ascii")


def decode(text: str) -> bytes:
    """A receipt's bytes from its base64url text (padded or not)."""
    try:
        return base64.urlsafe_b64decode(text.strip() + "=" * (-len(text.strip()) % 4))
    except (binascii.Error, ValueError):
        raise CoseError("malformed", "it is not base64url") from None


def logged_args(snapshot: Snapshot, call: Call, answer: Mapping[str, Any]) -> Any:
    """The call's arguments as its log row has them (api.service.decisionlog.draft): its
    tool's secret arguments redacted, or every tool's for a call denied for its shape
    (no arguments answered, the first reason `shape`)."""
    reasons = answer.get("reasons") or []
    shape = answer.get("args") is None and bool(reasons) and reasons[0].get("kind") == "shape"
    hidden = every_secret(snapshot) if shape else secret_names(snapshot, call.tool)
    return redact(hidden, call.args)


class Signer:
    """Signs receipts with one key; each revision's digest is made once."""

    def __init__(self) -> None:
        self._policies: dict[int, bytes] = {}
        self._lock = threading.Lock()

    def policy(self, snapshot: Snapshot) -> bytes:
        found = self._policies.get(snapshot.revision)
        if found is None:
            # (what a serving process loaded: every file's whole text, engine/served.py)
            found = revision_digest((f.path, f.text) for f in snapshot.served.files)
            with self._lock:
                if len(self._policies) > 1024:
                    self._policies.clear()
                self._policies[snapshot.revision] = found
        return found

    def add(
        self,
        key: tuple[str, nacl.signing.SigningKey],
        calls: Sequence[Call],
        answers: Sequence[dict[str, Any]],
        snapshots: Mapping[int, Snapshot],
        at: int,
    ) -> None:
        """A `receipt` in each answer, for the call at its place (`snapshots`: each
        answer's revision)."""
        kid, signing = key
        for call, answer in zip(calls, answers, strict=True):
            snapshot = snapshots[answer["revision"]]
            final = answer.get("args")
            claims = {
                "v": VERSION, "seq": answer["seq"], "id": answer["id"], "at": at,
                "agent": call.agent, "tool": call.tool,
                "args": digest(logged_args(snapshot, call, answer)),
                "final": None if final is None else digest(final),
                "effect": answer["effect"], "revision": answer["revision"],
                "policy": self.policy(snapshot),
            }  # fmt: skip
            payload = cbor2.dumps(claims, canonical=True)
            answer["receipt"] = encode(sign1(signing, kid, payload))


class ReceiptError(Exception):
    """A receipt that does not verify, or is not about the call given: `why` is a stable
    word (policy/cose.py's, `not-a-receipt`, `key-not-valid`, `other-call`)."""

    def __init__(self, why: str, message: str) -> None:
        super().__init__(message)
        self.why = why
        self.message = message


def verify(receipt: bytes, keys: Mapping[str, PublicKey]) -> tuple[str, dict[str, Any]]:
    """(the key id, the claims) of a receipt signed by one of `keys` while it was valid."""
    try:
        kid, claims = verify1(receipt, {k: key.verify_key for k, key in keys.items()})
    except CoseError as exc:
        raise ReceiptError(exc.why, exc.message) from None
    if not isinstance(claims, dict) or claims.get("v") != VERSION or set(claims) != {"v", *FIELDS}:
        raise ReceiptError("not-a-receipt", "its payload is not a decision receipt")
    at = claims["at"]
    if type(at) is not int or not keys[kid].valid_at(at):
        raise ReceiptError("key-not-valid", f"key `{kid}` was not valid at its time ({at})")
    return kid, dict(claims)


def differences(claims: Mapping[str, Any], call: Call) -> list[str]:
    """The bound fields the receipt gives otherwise than `call` (its arguments compared
    as the log records them: give the call with its secret arguments redacted)."""
    found = []
    if claims.get("agent") != call.agent:
        found.append("agent")
    if claims.get("tool") != call.tool:
        found.append("tool")
    if claims.get("args") != digest(call.args):
        found.append("args")
    return found
