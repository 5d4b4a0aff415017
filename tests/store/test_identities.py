"""Signing identities per docs/design.md section 7, and sealing at rest."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path
from typing import Any

import nacl.signing
import pytest

from policy import identities
from policy.identities import IdentityError
from policy.secrets import KEY_ENV, Sealer, SecretKeyError, key_path_for, load_key
from policy.store.sqlite import SqliteStore


def _setup(tmp_path: Path) -> tuple[SqliteStore, Sealer]:
    db = tmp_path / "s.db"
    return SqliteStore(db), Sealer(load_key(db, environ={}))


def test_key_file_is_created_0600_and_reused(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    key = load_key(db, environ={})
    mode = stat.S_IMODE(os.stat(key_path_for(db)).st_mode)
    assert mode == 0o600
    assert load_key(db, environ={}) == key
    assert load_key(db, environ={KEY_ENV: "ab" * 32}) == bytes.fromhex("ab" * 32)
    with pytest.raises(SecretKeyError):
        load_key(db, environ={KEY_ENV: "short"})
    sealed = Sealer(key).seal(b"seed")
    assert b"seed" not in sealed and Sealer(key).open(sealed) == b"seed"
    with pytest.raises(SecretKeyError):
        Sealer(b"\0" * 32).open(sealed)


def test_create_names_and_idempotency(tmp_path: Path) -> None:
    store, sealer = _setup(tmp_path)
    view, created = identities.create(store, sealer, request_id="r1")
    assert created and view["id"].startswith("z6Mk")
    assert view["secret_name"] == f"hm-account-{view['id'][:16]}"
    assert view["name"] == f"Agent account {view['id'][:10]}"
    again, created_again = identities.create(store, sealer, request_id="r1")
    assert again["id"] == view["id"] and not created_again
    raw = store.get("secrets", view["secret_name"])
    assert raw is not None and raw["metadata"]["kind"] == "hm-account-key"
    key = identities.signing_key(store, sealer, view["id"])
    assert identities.account_id(bytes(key.verify_key)) == view["id"]
    assert "sealed_seed" not in view and bytes(key) not in raw["sealed_seed"]


def test_each_agents_request_ids_are_its_own(tmp_path: Path) -> None:
    """A request id replays only its own requester's create: an agent never gets back the
    admin's identity, nor another agent's (`a:b` + `c` is not `a` + `b:c`)."""
    store, sealer = _setup(tmp_path)
    made = {
        who: identities.create(store, sealer, request_id=rid, requester=who)[0]["id"]
        for who, rid in ((None, "b:c"), ("a:b", "c"), ("a", "b:c"))
    }
    assert len(set(made.values())) == 3
    for who, rid in ((None, "b:c"), ("a:b", "c"), ("a", "b:c")):
        again, created = identities.create(store, sealer, request_id=rid, requester=who)
        assert (again["id"], created) == (made[who], False)
    store.close()


def test_import_update_delete(tmp_path: Path) -> None:
    store, sealer = _setup(tmp_path)
    seed = bytes(range(32))
    expected = identities.account_id(bytes(nacl.signing.SigningKey(seed).verify_key))
    view = identities.import_seed(store, sealer, seed.hex(), label="mine")
    assert view["id"] == expected and view["name"] == "mine"
    with pytest.raises(IdentityError) as exc:
        identities.import_seed(store, sealer, seed.hex())
    assert exc.value.code == "identity-exists"
    assert exc.value.message == f"This account key is already on the server ({expected})"
    with pytest.raises(IdentityError) as short:
        identities.import_seed(store, sealer, "00" * 31)
    assert short.value.code == "invalid-seed"
    updated = identities.update(store, expected, label="renamed", metadata={"team": "a"})
    assert updated["label"] == "renamed" and updated["metadata"] == {"kind": "hm-account-key",
                                                                    "team": "a"}  # fmt: skip
    store.insert("secrets", "other", {"name": "other", "metadata": {"kind": "api-key"}})
    for bad in ("z6Mknothere", "other"):
        with pytest.raises(IdentityError) as missing:
            identities.update(store, bad, label="x")
        assert missing.value.code == "identity-not-found"
        assert missing.value.message == "Signing identity not found"
    identities.delete(store, expected)
    with pytest.raises(IdentityError):
        identities.delete(store, expected)


def test_metadata_never_writes_the_label_or_name(tmp_path: Path) -> None:
    """`label` and `name` are checked fields of their own (a string of at most 256
    characters); as metadata keys they were merged over them, so a PATCH of
    `{metadata: {name: 5}}` made the identity's name a number, past every check."""
    store, sealer = _setup(tmp_path)
    view, _ = identities.create(store, sealer, label="mine")
    updated = identities.update(
        store, view["id"], metadata={"name": 5, "label": {"x": "y" * 1000}, "team": "a"}
    )
    assert (updated["name"], updated["label"]) == ("mine", "mine")
    assert updated["metadata"] == {"kind": "hm-account-key", "team": "a"}
    assert identities.get(store, view["id"]) == updated
    store.close()


def test_a_key_file_is_never_seen_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two processes opening a new database at once (workers started by another process
    manager): the second found the first's key file made but not yet written, read it
    empty and refused it as malformed. A key file appears with its key in it."""
    db = tmp_path / "s.db"
    fdopen = os.fdopen
    writing = threading.Event()

    def slow_fdopen(fd: int, *args: Any) -> Any:
        writing.set()  # the first has made its file: the second looks now
        time.sleep(0.2)
        return fdopen(fd, *args)

    monkeypatch.setattr(os, "fdopen", slow_fdopen)
    keys: list[bytes] = []
    first = threading.Thread(target=lambda: keys.append(load_key(db, environ={})))
    first.start()
    assert writing.wait(10)
    second = load_key(db, environ={})
    first.join()
    assert keys == [second] and key_path_for(db).read_text() == second.hex()
