"""Signed policy bundles: a policy's files, a manifest of their SHA-256 digests, and
Ed25519 signatures over the manifest (docs/operations.md, "Signed policy bundles").

A manifest names every policy file by its path and the SHA-256 of its text as UTF-8 (the
bytes of the file: charter reads a file as strict UTF-8 and changes nothing), sorted by
path, with a revision label its author chose. A signature is Ed25519 over
`DOMAIN || canonical CBOR {"key_id": ..., "manifest": ...}` (RFC 8949's core
deterministic encoding, cbor2's `canonical=True`): the key id is signed too, and the
domain keeps a bundle's signature from meaning anything to another of charter's signed
things, or theirs to it.

`verify` takes what was read (the files, the signatures document) and the trusted keys,
and either gives the `Verified` bundle or raises `BundleError` with a stable code. What is
verified depends only on the trusted keys the caller gives, never on what the bundle
says of itself: a bundle without signatures, or whose signatures name no listed key, is
refused (OPA accepted a bundle stripped of its `.signatures.json` when its configuration
named no key id: GHSA-g2pf-6v5v-qcc8).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import cbor2
import nacl.exceptions
import nacl.signing

FORMAT = "charter-bundle/1"
# The signatures document in a signed workspace directory, beside its `*.charter` files.
SIGNATURES_FILE = ".charter-bundle.json"
DOMAIN = b"charter-bundle/1 signature\x00"
KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_LABEL = 200
_HEX64 = re.compile(r"[0-9a-f]{64}")
PRIVATE_KIND = "ed25519-private"
PUBLIC_KIND = "ed25519"

BundleCode = Literal[
    "bundle-unsigned", "bundle-malformed", "bundle-unknown-key", "bundle-key-expired",
    "bundle-bad-signature", "bundle-file-unlisted", "bundle-file-missing",
    "bundle-digest-mismatch",
]  # fmt: skip
RESIGN = "sign the bundle again (`charter bundle build`, then `charter bundle sign`)"


class BundleError(Exception):
    """A bundle refused: `code` is stable (docs/errors.md), `help` says what to do."""

    def __init__(self, code: BundleCode, message: str, help: str) -> None:
        super().__init__(message)
        self.code: BundleCode = code
        self.message = message
        self.help = help


class KeyFileError(Exception):
    """A key file or trusted-keys file that cannot be read as one."""


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str, size: int | None = None) -> bytes:
    """Standard base64 (padded), strictly; ValueError for anything else or another size."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ValueError("is not base64") from None
    if size is not None and len(raw) != size:
        raise ValueError(f"is {len(raw)} bytes, not {size}")
    return raw


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class Manifest:
    revision: str
    files: tuple[tuple[str, str], ...]  # (path, sha256 hex), sorted by path

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "revision": self.revision,
            "files": [{"path": path, "sha256": sha} for path, sha in self.files],
        }


@dataclass(frozen=True, slots=True)
class Signature:
    key_id: str
    signature: bytes

    def to_json(self) -> dict[str, str]:
        return {"key_id": self.key_id, "signature": b64(self.signature)}


@dataclass(frozen=True, slots=True)
class Document:
    """What a bundle says of its files: the manifest and the signatures over it."""

    manifest: Manifest
    signatures: tuple[Signature, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "manifest": self.manifest.to_json(),
            "signatures": [s.to_json() for s in self.signatures],
        }


def manifest_of(files: Sequence[tuple[str, str]], revision: str) -> Manifest:
    """The manifest of `files` (path, text): one entry a file, sorted by path."""
    return Manifest(revision, tuple(sorted((path, digest(text)) for path, text in files)))


def signed_bytes(manifest: Manifest, key_id: str) -> bytes:
    payload = {"key_id": key_id, "manifest": manifest.to_json()}
    return DOMAIN + cbor2.dumps(payload, canonical=True)


# ---- keys ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SigningKey:
    key_id: str
    key: nacl.signing.SigningKey

    def public_line(self) -> str:
        """Its line for a trusted-keys file."""
        return f"{self.key_id} {PUBLIC_KIND} {b64(bytes(self.key.verify_key))}"

    def private_line(self) -> str:
        return f"{self.key_id} {PRIVATE_KIND} {b64(bytes(self.key))}"


@dataclass(frozen=True, slots=True)
class TrustedKey:
    key_id: str
    key: nacl.signing.VerifyKey
    expires: dt.datetime | None = None  # from this instant on it admits nothing

    def expired(self, now: dt.datetime) -> bool:
        return self.expires is not None and now >= self.expires


def new_key(key_id: str) -> SigningKey:
    if not KEY_ID.fullmatch(key_id):
        raise KeyFileError(f"`{key_id[:80]}` is not a key id: {KEY_ID_RULE}")
    return SigningKey(key_id, nacl.signing.SigningKey.generate())


KEY_ID_RULE = "1 to 64 letters, digits, `.`, `_` or `-`, starting with a letter or digit"


def read_signing_key(text: str) -> SigningKey:
    """A private key file's text: one line `KEY_ID ed25519-private BASE64-SEED`. The
    message of a KeyFileError never holds the key's text."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    parts = lines[0].split() if len(lines) == 1 else []
    if len(parts) != 3 or parts[1] != PRIVATE_KIND or not KEY_ID.fullmatch(parts[0]):
        raise KeyFileError(f"it is not one line `KEY_ID {PRIVATE_KIND} SEED`")
    try:
        seed = unb64(parts[2], 32)
    except ValueError:
        raise KeyFileError("its seed is not 32 bytes of base64") from None
    return SigningKey(parts[0], nacl.signing.SigningKey(seed))


def _expiry(value: str) -> dt.datetime:
    try:
        if len(value) == 10:  # a date: expired from its first instant, UTC
            return dt.datetime.combine(dt.date.fromisoformat(value), dt.time(), dt.UTC)
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"`expires={value[:40]}` is not a date or a time") from None
    if when.tzinfo is None:
        raise ValueError(f"`expires={value[:40]}` has no time zone (end it with `Z`)")
    return when.astimezone(dt.UTC)


def read_trusted_keys(text: str) -> dict[str, TrustedKey]:
    """A trusted-keys file: a line a key, `KEY_ID ed25519 BASE64-PUBLIC-KEY
    [expires=DATE|TIME]`; `#` starts a comment line; blank lines are skipped. A malformed
    line, a key id listed twice or a file with no key is a KeyFileError naming the line."""
    keys: dict[str, TrustedKey] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        try:
            if len(parts) not in (3, 4) or parts[1] != PUBLIC_KIND:
                raise ValueError(f"is not `KEY_ID {PUBLIC_KIND} PUBLIC_KEY [expires=DATE]`")
            key_id = parts[0]
            if not KEY_ID.fullmatch(key_id):
                raise ValueError(f"`{key_id[:80]}` is not a key id: {KEY_ID_RULE}")
            if key_id in keys:
                raise ValueError(f"lists key `{key_id}` a second time")
            try:
                public = unb64(parts[2], 32)
            except ValueError:
                raise ValueError("its public key is not 32 bytes of base64") from None
            expires = None
            if len(parts) == 4:
                if not parts[3].startswith("expires="):
                    raise ValueError(f"`{parts[3][:40]}` is not `expires=DATE`")
                expires = _expiry(parts[3].removeprefix("expires="))
        except ValueError as exc:
            raise KeyFileError(f"line {number} {exc}") from None
        keys[key_id] = TrustedKey(key_id, nacl.signing.VerifyKey(public), expires)
    if not keys:
        raise KeyFileError("it lists no key: every bundle would be refused")
    return keys


# ---- reading a bundle's document -----------------------------------------------------------
def _malformed(why: str) -> BundleError:
    return BundleError(
        "bundle-malformed", f"the bundle's signatures document {why}",
        f"make it with `charter bundle build`, then `charter bundle sign`; {RESIGN}",
    )  # fmt: skip


def _fields(
    value: Any, what: str, required: set[str], optional: frozenset[str] = frozenset()
) -> None:
    if not isinstance(value, Mapping):
        raise _malformed(f"has {what} that is not an object")
    keys = set(value)
    if not required <= keys or not keys <= required | optional:
        shown = ", ".join(f"`{k}`" for k in sorted(required))
        raise _malformed(f"has {what} whose fields are not {shown}")


def read_document(value: Any) -> Document:
    """The signatures document (`.charter-bundle.json`, or a bundle file's `manifest` and
    `signatures`), strictly: BundleError `bundle-malformed` for anything else."""
    _fields(value, "a top level", {"manifest"}, frozenset({"signatures", "files"}))
    raw = value["manifest"]
    _fields(raw, "a `manifest`", {"format", "revision", "files"})
    if raw["format"] != FORMAT:
        raise _malformed(f"has a manifest of format `{str(raw['format'])[:40]}`, not `{FORMAT}`")
    revision = raw["revision"]
    if not isinstance(revision, str) or len(revision) > MAX_LABEL:
        raise _malformed(f"has a `revision` that is not a string of at most {MAX_LABEL}")
    if not isinstance(raw["files"], list):
        raise _malformed("has manifest `files` that are not a list")
    files: list[tuple[str, str]] = []
    for entry in raw["files"]:
        _fields(entry, "a manifest entry", {"path", "sha256"})
        path, sha = entry["path"], entry["sha256"]
        if not isinstance(path, str) or not isinstance(sha, str) or not _HEX64.fullmatch(sha):
            raise _malformed("has a manifest entry whose `sha256` is not 64 lowercase hex digits")
        files.append((path, sha))
    if files != sorted(files) or len({p for p, _ in files}) != len(files):
        raise _malformed("has manifest files that are not sorted by path, each once")
    signatures = value.get("signatures", [])
    if not isinstance(signatures, list):
        raise _malformed("has `signatures` that are not a list")
    found: list[Signature] = []
    for entry in signatures:
        _fields(entry, "a signature", {"key_id", "signature"})
        key_id, text = entry["key_id"], entry["signature"]
        if not isinstance(key_id, str) or not KEY_ID.fullmatch(key_id):
            raise _malformed(f"has a signature whose `key_id` is not {KEY_ID_RULE}")
        try:
            raw_signature = unb64(text, 64) if isinstance(text, str) else b""
        except ValueError:
            raw_signature = b""
        if not raw_signature:
            raise _malformed(f"has a signature by `{key_id}` that is not 64 bytes of base64")
        found.append(Signature(key_id, raw_signature))
    return Document(Manifest(revision, tuple(files)), tuple(found))


def sign(document: Document, key: SigningKey) -> Document:
    """`document` with `key`'s signature over its manifest, in place of one by the same
    key id."""
    signature = key.key.sign(signed_bytes(document.manifest, key.key_id)).signature
    kept = tuple(s for s in document.signatures if s.key_id != key.key_id)
    return Document(document.manifest, (*kept, Signature(key.key_id, signature)))


# ---- verifying ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Verified:
    """A bundle whose files match its manifest, signed by `key_id` (None: checked for its
    files alone, where no key is trusted)."""

    files: tuple[tuple[str, str], ...]
    document: Document
    key_id: str | None

    def note(self) -> str:
        """The revision's note: the label, and who signed it."""
        label = self.document.manifest.revision
        signer = f", signed by `{self.key_id}`" if self.key_id else ""
        return f"bundle `{label}`{signer}" if label else f"bundle{signer}"


def check_files(files: Sequence[tuple[str, str]], manifest: Manifest) -> None:
    """BundleError unless `files` are the manifest's: every file listed, every listed
    file there, each with its digest."""
    listed = dict(manifest.files)
    given = {path: text for path, text in files}
    for path in sorted(given):
        if path not in listed:
            raise BundleError(
                "bundle-file-unlisted",
                f"file `{path}` is not in the signed manifest: it was added after signing",
                f"remove it, or {RESIGN}",
            )
        if digest(given[path]) != listed[path]:
            raise BundleError(
                "bundle-digest-mismatch",
                f"file `{path}` does not match its digest in the signed manifest: it was "
                "changed after signing",
                f"restore the signed file, or {RESIGN}",
            )
    for path in sorted(listed):
        if path not in given:
            raise BundleError(
                "bundle-file-missing",
                f"file `{path}` is in the signed manifest but not in the bundle",
                f"restore it, or {RESIGN}",
            )


def verify(
    files: Sequence[tuple[str, str]],
    document: Document | None,
    trusted: Mapping[str, TrustedKey],
    now: dt.datetime | None = None,
) -> Verified:
    """`files` as a bundle signed by one of `trusted` (not expired at `now`), or the
    BundleError that says why not. A signature by a listed key that does not verify is
    refused, whatever the others; one by an unlisted key is passed over."""
    if not trusted:
        raise ValueError("verify needs at least one trusted key")
    if document is None or not document.signatures:
        raise BundleError(
            "bundle-unsigned", "the bundle is not signed",
            "sign it with a key the trusted-keys file lists: `charter bundle build`, then "
            "`charter bundle sign --key KEYFILE`",
        )  # fmt: skip
    when = now or dt.datetime.now(dt.UTC)
    good: str | None = None
    expired: list[str] = []
    for signature in document.signatures:
        key = trusted.get(signature.key_id)
        if key is None:
            continue
        if key.expired(when):
            expired.append(signature.key_id)
            continue
        try:
            key.key.verify(signed_bytes(document.manifest, key.key_id), signature.signature)
        except nacl.exceptions.BadSignatureError:
            raise BundleError(
                "bundle-bad-signature",
                f"the signature by key `{key.key_id}` does not match the manifest: the "
                "manifest was changed after signing, or the signature is over other files",
                RESIGN,
            ) from None
        good = good or key.key_id
    if good is None:
        if expired:
            raise BundleError(
                "bundle-key-expired",
                f"the bundle is signed by key `{expired[0]}`, which expired on "
                f"{_shown_time(trusted[expired[0]].expires)}",
                "sign it with a key the trusted-keys file lists unexpired",
            )
        named = ", ".join(f"`{s.key_id}`" for s in document.signatures[:4])
        raise BundleError(
            "bundle-unknown-key",
            f"the bundle is signed by {named}, and the trusted-keys file lists none of them",
            "sign it with a listed key, or add its public key to the trusted-keys file",
        )
    check_files(files, document.manifest)
    return Verified(tuple(files), document, good)


def check_unsigned(files: Sequence[tuple[str, str]], document: Document) -> Verified:
    """`files` against the manifest alone, where no key is trusted (a bundle uploaded to
    a server without `--trusted-keys`): their integrity, not who made them."""
    check_files(files, document.manifest)
    return Verified(tuple(files), document, None)


def _shown_time(when: dt.datetime | None) -> str:
    return "" if when is None else when.strftime("%Y-%m-%dT%H:%M:%SZ")
