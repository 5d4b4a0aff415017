"""COSE_Sign1 (RFC 9052 section 4.2) with Ed25519: what the server signs, and its check.

A signed message is the CBOR array `[protected, unprotected, payload, signature]` under
tag 18. `protected` is the CBOR of `{1: -8, 4: kid}` (alg EdDSA, the key's id as bytes);
the unprotected header is empty; the signature is Ed25519 over the CBOR of the
Sig_structure `["Signature1", protected, h'', payload]` (no external data). Any COSE
library verifies what is made here (tests/api/test_receipts.py checks the bytes against
the RFC's layout).

Built on cbor2 and PyNaCl, both already dependencies, rather than pycose: the layout is
four lines of CBOR, and pycose would add cryptography and its own key types for them.
Headers are encoded with cbor2's canonical (deterministic) encoding, so the bytes signed
are the bytes sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import cbor2
import nacl.exceptions
import nacl.signing

SIGN1_TAG = 18
ALG = 1  # header label: the algorithm
KID = 4  # header label: the key's id
EDDSA = -8  # the algorithm: EdDSA (Ed25519 here)
CONTEXT = "Signature1"


class CoseError(Exception):
    """Not a COSE_Sign1 this server makes, a key it does not know, or a bad signature:
    `why` is a stable word (`malformed`, `unknown-key`, `bad-signature`)."""

    def __init__(self, why: str, message: str) -> None:
        super().__init__(message)
        self.why = why
        self.message = message


def _to_be_signed(protected: bytes, payload: bytes) -> bytes:
    # (arrays of strings: one encoding only, canonical or not)
    return bytes(cbor2.dumps([CONTEXT, protected, b"", payload]))


@lru_cache(maxsize=64)
def _protected(kid: str) -> bytes:
    return bytes(cbor2.dumps({ALG: EDDSA, KID: kid.encode()}, canonical=True))


def sign1(key: nacl.signing.SigningKey, kid: str, payload: bytes) -> bytes:
    """`payload` signed with `key`, whose id is `kid`, as a tagged COSE_Sign1."""
    protected = _protected(kid)
    signature = key.sign(_to_be_signed(protected, payload)).signature
    message = cbor2.CBORTag(SIGN1_TAG, [protected, {}, payload, bytes(signature)])
    return bytes(cbor2.dumps(message))


def _parts(data: bytes) -> tuple[bytes, str, bytes, bytes]:
    """(protected, kid, payload, signature) of a COSE_Sign1, checked for shape."""
    try:
        message = cbor2.loads(data)
    except Exception:
        raise CoseError("malformed", "it is not CBOR") from None
    if isinstance(message, cbor2.CBORTag):
        if message.tag != SIGN1_TAG:
            raise CoseError("malformed", f"its CBOR tag is {message.tag}, not 18 (COSE_Sign1)")
        message = message.value
    if not (isinstance(message, list | tuple) and len(message) == 4):  # (a tuple in a tag)
        raise CoseError("malformed", "it is not a COSE_Sign1 (an array of four)")
    protected, _unprotected, payload, signature = message
    if not all(isinstance(part, bytes) for part in (protected, payload, signature)):
        raise CoseError("malformed", "its header, payload or signature is not a byte string")
    try:
        header = cbor2.loads(protected) if protected else {}
    except Exception:
        raise CoseError("malformed", "its protected header is not CBOR") from None
    if not isinstance(header, dict) or header.get(ALG) != EDDSA:
        raise CoseError("malformed", "its protected header does not give alg EdDSA (-8)")
    kid = header.get(KID)
    if not isinstance(kid, bytes):
        raise CoseError("malformed", "its protected header gives no key id")
    try:
        shown = kid.decode("ascii")
    except UnicodeDecodeError:
        raise CoseError("malformed", "its key id is not text") from None
    return protected, shown, payload, signature


def verify1(data: bytes, keys: Mapping[str, nacl.signing.VerifyKey]) -> tuple[str, Any]:
    """The key id and the decoded payload of a COSE_Sign1 signed by one of `keys` (by key
    id); CoseError when it is not one, its key is not among them, or its signature fails."""
    protected, kid, payload, signature = _parts(data)
    key = keys.get(kid)
    if key is None:
        raise CoseError("unknown-key", f"it is signed by key `{kid}`, which is not published")
    try:
        key.verify(_to_be_signed(protected, payload), signature)
    except (nacl.exceptions.BadSignatureError, ValueError):
        raise CoseError("bad-signature", f"its signature by key `{kid}` does not verify") from None
    try:
        return kid, cbor2.loads(payload)
    except Exception:
        raise CoseError("malformed", "its payload is not CBOR") from None
