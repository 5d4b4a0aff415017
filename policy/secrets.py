"""Encryption at rest for signing seeds and credentials (PyNaCl SecretBox).

The 32-byte key comes from the environment variable `CHARTER_SECRET_KEY` (64 hex digits)
when set, else from a key file: `charter serve --key-file PATH`, by default the one next
to an SQLite database (`<db>.key`), created on first start with 0600 permissions. A store
kept by a server has no file to put a key beside, so its key file is always named, the
same one on every node. Losing the key makes every stored secret unreadable, by design.
"""

from __future__ import annotations

import os
from pathlib import Path

import nacl.exceptions
import nacl.secret
import nacl.utils

KEY_ENV = "CHARTER_SECRET_KEY"
KEY_BYTES = nacl.secret.SecretBox.KEY_SIZE


class SecretKeyError(Exception):
    """The key is missing, malformed or does not open a stored secret."""


class Sealer:
    """Seals and opens byte strings with one symmetric key (XSalsa20-Poly1305)."""

    __slots__ = ("_box",)

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise SecretKeyError(f"the secret key must be {KEY_BYTES} bytes")
        self._box = nacl.secret.SecretBox(key)

    def seal(self, plain: bytes) -> bytes:
        return bytes(self._box.encrypt(plain))

    def open(self, sealed: bytes) -> bytes:
        try:
            return bytes(self._box.decrypt(sealed))
        except nacl.exceptions.CryptoError:
            raise SecretKeyError("a stored secret does not open with this key") from None


def key_path_for(db_path: str | Path) -> Path:
    return Path(f"{db_path}.key")


def load_key(db_path: str | Path | None, environ: dict[str, str] | None = None) -> bytes:
    """The environment's key, else the key file next to the DB (created 0600 if absent)."""
    if db_path is None or str(db_path) == ":memory:":
        return load_key_file(None, environ)
    return load_key_file(key_path_for(db_path), environ)


def load_key_file(path: Path | None, environ: dict[str, str] | None = None) -> bytes:
    """The environment's key, else the one in `path` (created 0600 if absent; None: a
    random key, for a store that lives and dies with its process)."""
    env = os.environ if environ is None else environ
    text = env.get(KEY_ENV)
    if text:
        try:
            key = bytes.fromhex(text.strip())
        except ValueError:
            raise SecretKeyError(f"`{KEY_ENV}` must be {KEY_BYTES * 2} hex digits") from None
        if len(key) != KEY_BYTES:
            raise SecretKeyError(f"`{KEY_ENV}` must be {KEY_BYTES * 2} hex digits")
        return key
    if path is None:
        return nacl.utils.random(KEY_BYTES)  # an in-memory store lives and dies with its key
    if not path.exists():
        made = _new_key_file(path)
        if made is not None:
            return made
    raw = path.read_text(encoding="ascii").strip()
    try:
        key = bytes.fromhex(raw)
    except ValueError:
        raise SecretKeyError(f"the key file `{path}` is malformed") from None
    if len(key) != KEY_BYTES:
        raise SecretKeyError(f"the key file `{path}` is malformed")
    return key


def _write(path: Path, key: bytes) -> None:
    # O_EXCL: two workers starting at once must not both write a key. Flushed to the disk
    # before it is linked into place: a key file is never there without its key.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(key.hex().encode())
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _new_key_file(path: Path) -> bytes | None:
    """A new key, written to `path`; None when another process made it first. Written
    beside it, then linked in place, so the key file appears with its key in it: made, then
    written, another worker starting at once read it empty and refused it as malformed."""
    key = nacl.utils.random(KEY_BYTES)
    spare = path.with_name(f"{path.name}.{nacl.utils.random(8).hex()}.new")
    try:
        _write(spare, key)  # (a full disk fails here, before anything is at `path`)
        try:
            os.link(spare, path)  # (never replaces: FileExistsError when there is one)
        except FileExistsError:
            return None
        except OSError:  # a file system without hard links: made, then written
            try:
                _write(path, key)
            except FileExistsError:
                return None
    finally:
        spare.unlink(missing_ok=True)
    return key
