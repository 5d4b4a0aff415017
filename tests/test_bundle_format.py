"""policy/bundles.py on its own: the signatures document read strictly, the trusted-keys
file, and which signatures a bundle is taken on (real Ed25519 keys)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from policy import bundles
from policy.bundles import BundleError, Document, KeyFileError

FILES = [("b.charter", "role b {}\n"), ("a/x.charter", "role x {}\n")]
ALICE = bundles.new_key("alice")
BOB = bundles.new_key("bob")
EVE = bundles.new_key("eve")


def trusted(*lines: str) -> dict[str, bundles.TrustedKey]:
    return bundles.read_trusted_keys("\n".join(lines))


TRUSTED = trusted(ALICE.public_line(), BOB.public_line())


def signed(*keys: bundles.SigningKey) -> Document:
    document = Document(bundles.manifest_of(FILES, "v1"))
    for key in keys:
        document = bundles.sign(document, key)
    return document


def test_the_manifest_is_sorted_and_round_trips() -> None:
    document = signed(ALICE)
    assert [p for p, _ in document.manifest.files] == ["a/x.charter", "b.charter"]
    assert bundles.read_document(document.to_json()) == document
    assert bundles.verify(FILES, document, TRUSTED).key_id == "alice"


def test_an_unlisted_signer_beside_a_listed_one_is_passed_over() -> None:
    assert bundles.verify(FILES, signed(EVE, BOB), TRUSTED).key_id == "bob"


def test_a_listed_signature_that_fails_refuses_the_bundle_whatever_the_others() -> None:
    """Bob's key id on Eve's signature: refused, though Alice's verifies."""
    forged = bundles.SigningKey("bob", EVE.key)
    with pytest.raises(BundleError) as refused:
        bundles.verify(FILES, signed(ALICE, forged), TRUSTED)
    assert refused.value.code == "bundle-bad-signature"


def test_the_key_id_is_signed() -> None:
    """Alice's signature relabelled as another listed key id's does not verify."""
    document = signed(ALICE)
    relabelled = Document(
        document.manifest, (bundles.Signature("bob", document.signatures[0].signature),)
    )
    with pytest.raises(BundleError) as refused:
        bundles.verify(
            FILES, relabelled, trusted(ALICE.public_line(), "bob" + ALICE.public_line()[5:])
        )
    assert refused.value.code == "bundle-bad-signature"


def test_expiry_is_an_instant() -> None:
    keys = trusted(ALICE.public_line() + " expires=2030-06-01T12:00:00+02:00")
    before = dt.datetime(2030, 6, 1, 9, 59, tzinfo=dt.UTC)
    assert bundles.verify(FILES, signed(ALICE), keys, before).key_id == "alice"
    with pytest.raises(BundleError) as refused:
        bundles.verify(FILES, signed(ALICE), keys, before + dt.timedelta(minutes=1))
    assert refused.value.code == "bundle-key-expired"


def _with(change: Any) -> dict[str, Any]:
    value = signed(ALICE).to_json()
    change(value)
    return value


@pytest.mark.parametrize(
    "value",
    [
        [],
        {"signatures": []},
        _with(lambda v: v["manifest"].update(format="charter-bundle/2")),
        _with(lambda v: v["manifest"]["files"].reverse()),
        _with(lambda v: v["manifest"]["files"].append(v["manifest"]["files"][-1])),
        _with(lambda v: v["manifest"]["files"][0].update(sha256="AB" * 32)),
        _with(lambda v: v["manifest"].update(extra=1)),
        _with(lambda v: v["signatures"][0].update(key_id="")),
        _with(lambda v: v["signatures"][0].pop("key_id")),
        _with(lambda v: v["signatures"][0].update(signature="not base64!")),
        _with(lambda v: v["signatures"][0].update(signature=bundles.b64(b"x" * 63))),
        _with(lambda v: v.update(signatures={})),
    ],
)
def test_a_malformed_document_is_refused(value: Any) -> None:
    with pytest.raises(BundleError) as refused:
        bundles.read_document(value)
    assert refused.value.code == "bundle-malformed"


@pytest.mark.parametrize(
    "text",
    [
        "# only a comment\n",
        "alice ed25519\n",
        "al ice ed25519 " + "A" * 44 + "\n",
        "-alice ed25519 " + bundles.b64(b"k" * 32) + "\n",
        "alice ed25519 " + bundles.b64(b"k" * 32) + " expires=2030-01-01T00:00:00\n",
        "alice ed25519 " + bundles.b64(b"k" * 32) + " until=2030-01-01\n",
        "alice ed25519 " + bundles.b64(b"k" * 32) + "\nalice ed25519 " + bundles.b64(b"j" * 32),
    ],
)
def test_a_malformed_trusted_keys_file_is_refused(text: str) -> None:
    with pytest.raises(KeyFileError):
        bundles.read_trusted_keys(text)


def test_a_private_key_file_round_trips_and_its_errors_hold_no_key() -> None:
    assert bundles.read_signing_key(ALICE.private_line()).key.encode() == ALICE.key.encode()
    seed = ALICE.private_line().split()[2]
    for text in (ALICE.private_line()[:-4], ALICE.public_line(), f"alice ed25519-private {seed} x"):
        with pytest.raises(KeyFileError) as refused:
            bundles.read_signing_key(text)
        assert seed[:8] not in str(refused.value)
