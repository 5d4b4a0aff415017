"""Webhook signatures: what `sign` makes, `verify` takes with the key that made it, and
refuses once any signed byte (the id, the timestamp, the body) or the key differs, or
the timestamp is outside the tolerance, with a stable `why` for each."""

from __future__ import annotations

import base64

import nacl.signing
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.service.webhooksign import (
    ID,
    KEY_ID,
    SIGNATURE,
    TIMESTAMP,
    WebhookSignatureError,
    sign,
    signed_content,
    verify,
)
from policy.serverkeys import PublicKey, thumbprint

SEED = bytes(range(32))
KEY = nacl.signing.SigningKey(SEED)
KID = thumbprint(bytes(KEY.verify_key))
KEYS = {KID: PublicKey(KID, bytes(KEY.verify_key), 0, None)}
NOW = 1_764_874_800
BODY = b'{"id":"approval.opened:a","type":"approval.opened"}'


def _why(headers: dict[str, str], body: bytes = BODY, **more: object) -> str:
    with pytest.raises(WebhookSignatureError) as info:
        verify(headers, body, KEYS, now=NOW, **more)  # type: ignore[arg-type]
    return info.value.why


def test_a_signature_is_ed25519_over_the_id_the_timestamp_and_the_body() -> None:
    headers = sign((KID, KEY), "approval.opened:a", BODY, NOW)
    assert headers[ID] == "approval.opened:a" and headers[TIMESTAMP] == str(NOW)
    assert headers[KEY_ID] == KID
    scheme, encoded = headers[SIGNATURE].split(",")
    assert scheme == "v1a"
    content = f"approval.opened:a.{NOW}.".encode() + BODY
    assert content == signed_content("approval.opened:a", NOW, BODY)
    KEY.verify_key.verify(content, base64.b64decode(encoded))  # (raises if it is not)
    assert verify(headers, BODY, KEYS, now=NOW) == ("approval.opened:a", KID)
    upper = {name.upper(): value for name, value in headers.items()}  # (any case)
    assert verify(upper, BODY, KEYS, now=NOW + 299) == ("approval.opened:a", KID)


# What is signed, and what is changed in it: the body, the id or the timestamp.
changes = st.sampled_from(["body", "id", "timestamp"])


@settings(max_examples=200, deadline=None)
@given(
    event_id=st.text(min_size=1, max_size=40).filter(lambda t: "\x00" not in t),
    body=st.binary(max_size=300),
    skew=st.integers(-300, 300),
    change=changes,
    flip=st.integers(0, 10_000),
)
def test_any_signed_byte_changed_fails_the_check(
    event_id: str, body: bytes, skew: int, change: str, flip: int
) -> None:
    headers = sign((KID, KEY), event_id, body, NOW + skew)
    assert verify(headers, body, KEYS, now=NOW) == (event_id, KID)
    if change == "body":
        if body:
            i = flip % len(body)
            body = body[:i] + bytes([body[i] ^ 1]) + body[i + 1 :]
        else:
            body = b"x"
    elif change == "id":
        headers[ID] = event_id + "x"
    else:  # (a timestamp moved by a second: within the tolerance, still not signed)
        headers[TIMESTAMP] = str(NOW + skew + (1 if skew < 0 else -1))
    assert _why(headers, body) == "bad-signature"


def test_what_does_not_verify_says_why() -> None:
    headers = sign((KID, KEY), "e", BODY, NOW)
    assert _why({k: v for k, v in headers.items() if k != SIGNATURE}) == "malformed"
    assert _why({**headers, TIMESTAMP: "17e8"}) == "malformed"
    assert _why(sign((KID, KEY), "e", BODY, NOW - 301)) == "too-old"  # (a replay)
    assert _why(sign((KID, KEY), "e", BODY, NOW + 301)) == "too-old"
    assert _why({**headers, KEY_ID: "another"}) == "unknown-key"
    other = nacl.signing.SigningKey(bytes(32))
    assert _why(sign((KID, other), "e", BODY, NOW)) == "bad-signature"  # (another key)
    assert _why({**headers, SIGNATURE: "v1," + headers[SIGNATURE][4:]}) == "bad-signature"
    assert _why({**headers, SIGNATURE: "v1a,%%%"}) == "bad-signature"
    closed = {KID: PublicKey(KID, bytes(KEY.verify_key), 0, (NOW - 3600) * 1000)}
    with pytest.raises(WebhookSignatureError) as info:  # (a key rotated away before it)
        verify(headers, BODY, closed, now=NOW)
    assert info.value.why == "key-not-valid"


def test_one_of_several_signatures_is_enough() -> None:
    headers = sign((KID, KEY), "e", BODY, NOW)
    headers[SIGNATURE] = f"v1,abc v1a,{base64.b64encode(bytes(64)).decode()} {headers[SIGNATURE]}"
    assert verify(headers, BODY, KEYS, now=NOW) == ("e", KID)
