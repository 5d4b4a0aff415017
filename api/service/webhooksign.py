"""Webhook signatures: how each delivery of an approval's event is signed
(api/service/webhookdelivery.py), and the check a receiver makes.

A delivery carries the headers and the signed content of Standard Webhooks 1.0 with its
asymmetric `v1a` scheme (Ed25519), signed by the server's key (policy/serverkeys.py),
the one that signs receipts and checkpoints:

    webhook-id: approval.opened:1b4e28ba-2fa1-11d2-883f-0016d3cca427
    webhook-timestamp: 1764874800
    webhook-signature: v1a,<base64 of the 64-byte Ed25519 signature>
    charter-key-id: <the signing key's id, its RFC 7638 thumbprint>

The signature is over the bytes `<webhook-id>.<webhook-timestamp>.<body>`: the event's
id, the time of this attempt in seconds since the epoch, and the body exactly as sent.
A receiver checks it with the key `GET /v1/keys` publishes under `charter-key-id`, that
the key was valid at the timestamp, and that the timestamp is within `TOLERANCE` seconds
of its clock (a delivery replayed later fails); it keeps the ids it has handled, as
a delivery is made at least once and a retry carries the same id.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Mapping

import nacl.exceptions
import nacl.signing

from policy.serverkeys import PublicKey

ID = "webhook-id"
TIMESTAMP = "webhook-timestamp"
SIGNATURE = "webhook-signature"
KEY_ID = "charter-key-id"
SCHEME = "v1a"  # Standard Webhooks' Ed25519 signature
TOLERANCE = 300  # seconds a receiver accepts between a delivery's timestamp and its clock


class WebhookSignatureError(Exception):
    """A delivery whose signature does not check: `why` is a stable word (`malformed`,
    `unknown-key`, `key-not-valid`, `too-old`, `bad-signature`)."""

    def __init__(self, why: str, message: str) -> None:
        super().__init__(message)
        self.why = why
        self.message = message


def signed_content(event_id: str, timestamp: int, body: bytes) -> bytes:
    return f"{event_id}.{timestamp}.".encode() + body


def sign(
    key: tuple[str, nacl.signing.SigningKey], event_id: str, body: bytes, timestamp: int
) -> dict[str, str]:
    """The signature headers of one attempt to deliver `body` (event `event_id`), made at
    `timestamp` (seconds since the epoch), with `key` (its id, its signing key)."""
    kid, signing = key
    signature = signing.sign(signed_content(event_id, timestamp, body)).signature
    return {
        ID: event_id,
        TIMESTAMP: str(timestamp),
        SIGNATURE: f"{SCHEME},{base64.b64encode(signature).decode('ascii')}",
        KEY_ID: kid,
    }


def _header(headers: Mapping[str, str], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    raise WebhookSignatureError("malformed", f"the delivery has no `{name}` header")


def verify(
    headers: Mapping[str, str],
    body: bytes,
    keys: Mapping[str, PublicKey],
    *,
    now: float | None = None,
    tolerance: int = TOLERANCE,
) -> tuple[str, str]:
    """(the event's id, the key's id) of a delivery signed by one of `keys` (by id, as
    `policy.serverkeys.from_jwks` reads `GET /v1/keys`) while it was valid, at a
    timestamp within `tolerance` seconds of `now` (default: this clock)."""
    event_id = _header(headers, ID)
    stamp = _header(headers, TIMESTAMP)
    kid = _header(headers, KEY_ID)
    if not (stamp.isascii() and stamp.isdigit()) or len(stamp) > 12:
        raise WebhookSignatureError("malformed", "`webhook-timestamp` is not seconds")
    timestamp = int(stamp)
    clock = time.time() if now is None else now
    if abs(clock - timestamp) > tolerance:
        raise WebhookSignatureError(
            "too-old", f"its timestamp is more than {tolerance} seconds from this clock"
        )
    key = keys.get(kid)
    if key is None:
        raise WebhookSignatureError("unknown-key", f"it is signed by key `{kid}`, not published")
    if not key.valid_at(timestamp * 1000):
        raise WebhookSignatureError("key-not-valid", f"key `{kid}` was not valid at its time")
    content = signed_content(event_id, timestamp, body)
    for entry in _header(headers, SIGNATURE).split():
        scheme, _, encoded = entry.partition(",")
        if scheme != SCHEME:
            continue
        try:
            key.verify_key.verify(content, base64.b64decode(encoded, validate=True))
        except (nacl.exceptions.BadSignatureError, binascii.Error, ValueError):
            continue
        return event_id, kid
    raise WebhookSignatureError("bad-signature", f"no `{SCHEME}` signature by key `{kid}` verifies")
