"""The decision log's signed checkpoints, on both stores: a sound log verifies; a row
edited, removed, moved or put in is named, the first one first; a log rewritten with its
chain made again (what anyone with the database can do: the chain has no key) is caught
by the checkpoint the server signed, and a checkpoint forged without the key file is
refused. The key ring is one for every process of a database, and survives a restart.
Each process walks the log from the newest checkpoint any process signed, never from a
forged one."""

from __future__ import annotations

import json

import pytest

from policy import logseal
from policy.logseal import KIND, Checkpoint, Checkpointer, Finding, checkpoint_id, sign_head, verify
from policy.secrets import Sealer
from policy.serverkeys import ServerKeys, thumbprint
from policy.store import Store
from policy.store.logread import pack
from policy.store.rowsum import GENESIS, log_digest
from tests.store.backends import Backend

SEALER = Sealer(bytes(range(32)))


def _row(i: int) -> bytes:
    return json.dumps({"id": f"d{i}", "effect": "allow", "args": {"n": i}}).encode()


def _logged(store: Store, runs: list[int]) -> None:
    n = 0
    for size in runs:
        with store.atomic():
            store.append_decisions([_row(n + i + 1) for i in range(size)])
        n += size


def _signed(backend: Backend, runs: list[int]) -> tuple[Store, ServerKeys, Checkpoint]:
    """A store with runs of these sizes (seqs 1 to their sum), checkpointed at its head."""
    store = backend.open()
    _logged(store, runs)
    keys = ServerKeys(store, SEALER)
    made = Checkpointer(store, keys).checkpoint()
    assert isinstance(made, Checkpoint) and made.seq == sum(runs)
    return store, keys, made


def _first(store: Store, keys: ServerKeys) -> Finding:
    report = verify(store, keys.trusted())
    assert not report.sound and report.findings
    return report.findings[0]


def _rechain(backend: Backend) -> None:
    """Every run's sum made again from its columns, as anyone with the database can."""
    chained_to = GENESIS
    for seq, count, body in backend.sql("SELECT seq, count, body FROM decisions ORDER BY seq"):
        chained_to = log_digest(chained_to, seq, count, bytes(body))
        backend.sql("UPDATE decisions SET sum = ? WHERE seq = ?", (chained_to, seq))


def test_a_sound_log_verifies_and_its_checkpoint_covers_it(backend: Backend) -> None:
    store, keys, made = _signed(backend, [1, 3, 1, 2])
    report = verify(store, keys.trusted())
    assert report.sound and report.head == 7 and report.covered_through == 7
    assert report.last_checkpoint == made and made.digest == store.log_head()[1]
    # Nothing new: no second checkpoint; more rows: one at the new head, from another
    # process of the same database, with the same key.
    assert Checkpointer(store, keys).checkpoint() is None
    _logged(store, [2])
    again = backend.open()
    later = Checkpointer(again, ServerKeys(again, SEALER)).checkpoint()
    assert isinstance(later, Checkpoint) and later.seq == 9 and later.kid == made.kid
    report = verify(store, keys.trusted())
    assert report.sound and report.checkpoints == 2 and report.covered_through == 9


def test_an_edited_row_is_named(backend: Backend) -> None:
    store, keys, _ = _signed(backend, [1, 1, 1, 1])
    backend.sql("UPDATE decisions SET body = ? WHERE seq = 3", (_row(99),))
    first = _first(store, keys)
    assert (first.seq, first.why) == (3, "checksum-mismatch")


def test_a_removed_row_is_named(backend: Backend) -> None:
    store, keys, _ = _signed(backend, [1, 1, 1, 1])
    backend.sql("DELETE FROM decisions WHERE seq = 2")
    first = _first(store, keys)
    assert (first.seq, first.last_seq, first.why) == (2, 2, "missing")


def test_rows_cut_from_the_end_are_named_by_the_checkpoint(backend: Backend) -> None:
    store, keys, _ = _signed(backend, [1, 1, 1, 1])
    backend.sql("DELETE FROM decisions WHERE seq >= 3")
    first = _first(store, keys)
    assert (first.seq, first.last_seq, first.why) == (3, 4, "missing")


def test_reordered_rows_are_named(backend: Backend) -> None:
    store, keys, _ = _signed(backend, [1, 1, 1, 1])
    backend.sql("UPDATE decisions SET seq = 100 WHERE seq = 2")
    backend.sql("UPDATE decisions SET seq = 2 WHERE seq = 3")
    backend.sql("UPDATE decisions SET seq = 3 WHERE seq = 100")
    first = _first(store, keys)
    assert (first.seq, first.why) == (2, "checksum-mismatch")


def test_an_inserted_row_is_named(backend: Backend) -> None:
    store, keys, _ = _signed(backend, [1, 1])
    _logged(store, [1, 1])  # (rows 3 and 4: after the checkpoint, the chain alone)
    # Rows 3 on moved up one, and a row put in at 3, chained to row 2 as the store would.
    for seq in (4, 3):
        backend.sql("UPDATE decisions SET seq = ? WHERE seq = ?", (seq + 1, seq))
    (before,) = backend.sql("SELECT sum FROM decisions WHERE seq = 2")
    body = _row(42)
    digest = log_digest(bytes(before[0]), 3, 1, body)
    backend.sql(
        "INSERT INTO decisions (seq, count, body, sum) VALUES (?, ?, ?, ?)", (3, 1, body, digest)
    )
    report = verify(store, keys.trusted())
    # The rows moved after it do not match (a run's seq is in its digest); the
    # checkpoint at 2 still vouches for what it signed.
    assert [(f.seq, f.why) for f in report.findings] == [
        (4, "checksum-mismatch"), (5, "checksum-mismatch"),
    ]  # fmt: skip
    assert report.covered_through == 2


def test_an_inserted_row_under_a_checkpoint_is_caught_by_it(backend: Backend) -> None:
    store, keys, _ = _signed(backend, [1, 1, 1])
    backend.sql("UPDATE decisions SET seq = 4 WHERE seq = 3")
    (before,) = backend.sql("SELECT sum FROM decisions WHERE seq = 2")
    body = _row(42)
    digest = log_digest(bytes(before[0]), 3, 1, body)
    backend.sql(
        "INSERT INTO decisions (seq, count, body, sum) VALUES (?, ?, ?, ?)", (3, 1, body, digest)
    )
    report = verify(store, keys.trusted())
    # The checkpoint at 3 signed another row 3: the log through it is not the one signed.
    assert [(f.seq, f.last_seq, f.why) for f in report.findings] == [
        (1, 3, "checkpoint-mismatch"), (4, 4, "checksum-mismatch"),
    ]  # fmt: skip


def test_a_rewritten_log_chained_again_is_caught_by_the_checkpoint(backend: Backend) -> None:
    store, keys, _ = _signed(backend, [1, 1, 1])
    _logged(store, [2])
    made = Checkpointer(store, keys).checkpoint()
    assert isinstance(made, Checkpoint) and made.seq == 5
    backend.sql("UPDATE decisions SET body = ? WHERE seq = 4", (pack([_row(4), _row(99)]),))
    _rechain(backend)
    report = verify(store, keys.trusted())
    # The chain is whole again; the checkpoint at 5 is not, and the one at 3 still is.
    assert [(f.seq, f.last_seq, f.why) for f in report.findings] == [(4, 5, "checkpoint-mismatch")]
    assert report.covered_through == 3
    # And no process signs over it.
    _logged(store, [1])
    refused = Checkpointer(store, keys).checkpoint()
    assert isinstance(refused, Finding) and refused.why == "checkpoint-mismatch"


def test_a_checkpoint_forged_without_the_key_file_is_refused(backend: Backend) -> None:
    store, _, made = _signed(backend, [1, 1])
    backend.sql("UPDATE decisions SET body = ? WHERE seq = 2", (_row(99),))
    _rechain(backend)
    # A ring whose key is sealed under another secret key: its key signs, and no one trusts it.
    other = ServerKeys(store, Sealer(bytes(32)))
    backend.sql("DELETE FROM documents WHERE kind = 'server-keys'")
    forged_kid, forged = sign_head(other, 2, store.log_head()[1], made.at)
    store.update(KIND, checkpoint_id(2), {"seq": 2, "cose": forged})
    assert forged_kid != made.kid
    trusted = ServerKeys(store, SEALER).trusted()
    assert forged_kid not in trusted  # (its seed does not open with the key file's key)
    report = verify(store, trusted)
    assert [f.why for f in report.findings] == ["checkpoint-forged"]
    assert report.covered_through == 0


def test_each_process_walks_from_the_newest_checkpoint_any_signed(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes of one database: the first signs at 5, the second at 7; the first
    then walks from 7, not from its own 5. A checkpoint forged without the key file (a
    ring under another secret) is not where any walk starts."""
    walks: list[tuple[int, int]] = []
    real_walk = logseal.walk

    def walked(store: Store, after: int, through: int) -> object:
        walks.append((after, through))
        return real_walk(store, after, through)

    monkeypatch.setattr(logseal, "walk", walked)
    first_store = backend.open()
    _logged(first_store, [2, 3])
    first_keys = ServerKeys(first_store, SEALER)
    first = Checkpointer(first_store, first_keys)
    assert isinstance(first.checkpoint(), Checkpoint)
    second_store = backend.open()
    _logged(second_store, [2])
    second = Checkpointer(second_store, ServerKeys(second_store, SEALER))
    made = second.checkpoint()
    assert isinstance(made, Checkpoint) and made.seq == 7
    _logged(first_store, [1, 1])
    again = first.checkpoint()
    assert isinstance(again, Checkpoint) and again.seq == 9
    assert walks == [(0, 5), (5, 7), (7, 9)]

    # A checkpoint at 12 whose signature does not verify (one of its bytes changed):
    # no process starts from it.
    _logged(first_store, [3])
    _, signed = sign_head(first_keys, 12, first_store.log_head()[1], again.at)
    forged = signed[:-1] + bytes([signed[-1] ^ 1])
    first_store.insert(KIND, checkpoint_id(12), {"seq": 12, "cose": forged})
    _logged(first_store, [1])
    walks.clear()
    latest = second.checkpoint()
    assert isinstance(latest, Checkpoint) and latest.seq == 13
    assert walks == [(9, 13)]


def test_the_key_ring_is_one_per_database_and_rotates(backend: Backend) -> None:
    first = ServerKeys(backend.open(), SEALER)
    kid, key = first.signing()
    assert kid == thumbprint(bytes(key.verify_key))
    second = ServerKeys(backend.open(), SEALER)  # another process, or after a restart
    assert second.signing()[0] == kid
    made = second.rotate()
    keys = first.public()
    assert [k.kid for k in keys] == [kid, made.kid]
    assert keys[0].not_after is not None and keys[1].not_after is None
    assert second.signing()[0] == made.kid
    assert first.jwks()["current"] == made.kid


def test_the_link_is_the_sum_of_the_run_that_ends_there(backend: Backend) -> None:
    store, _, made = _signed(backend, [3])
    assert store.log_link(3) == made.digest
    assert store.log_link(2) is None and store.log_link(4) is None
