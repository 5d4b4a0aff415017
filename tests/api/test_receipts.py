"""Signed decision receipts and the log's verification through the API and the command
line, on both stores: a decision asked for with `?receipt=true` carries a COSE_Sign1 that
`charter receipt verify` checks offline with the keys `GET /v1/keys` published (after a
rotation too), and that fails when any field it binds is changed; `GET /v1/log/verify` and
`charter log verify` name the first row tampered with."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cbor2
import httpx
import nacl.signing
import pytest
from starlette.testclient import TestClient

from api.cli import main
from api.http.app import create_app
from api.service import receipts
from policy import logseal
from policy.cose import EDDSA, SIGN1_TAG
from policy.serverkeys import from_jwks, unb64url
from tests.api.conftest import BOTH, Harness, LiveServer, expect, make_harness, store_kinds

STORES = BOTH
MAIL: dict[str, Any] = {"agent": "a1", "tool": "mail.send",
        "args": {"to": "b@example.com", "subject": "s", "body": "b"}}  # fmt: skip
SEED = "ab" * 32


@pytest.fixture(scope="module", params=store_kinds(BOTH))
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Harness, httpx.Client]]:
    """One harness and its live server for the tests that read receipts (each decides
    what it checks; none rotates the key)."""
    db = request.getfixturevalue("pg_server").database() if request.param == "postgres" else None
    made = make_harness(tmp_path_factory.mktemp("receipts"), db)
    with (
        LiveServer(create_app(made.service)) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        yield made, client
    made.service.store.close()


def _decide(live: httpx.Client, harness: Harness, body: Any = MAIL, query: str = "receipt=true",
            path: str = "/v1/decisions") -> Any:  # fmt: skip
    answer = live.post(f"{path}?{query}", json=body, headers=harness.auth(harness.decide))
    assert answer.status_code == 200, answer.text
    return answer.json()


def _keys_file(live: httpx.Client, tmp_path: Path, name: str = "keys.json") -> Path:
    answer = live.get("/v1/keys")  # (no token: public keys)
    assert answer.status_code == 200
    path = tmp_path / name
    path.write_text(answer.text)
    return path


def _verify(receipt: str, keys: Path | str, *more: str) -> int:
    return main(["receipt", "verify", receipt, "--keys", str(keys), *more])


def test_a_receipt_verifies_offline_and_binds_the_logged_decision(
    world: tuple[Harness, httpx.Client], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    harness, live = world
    answer = _decide(live, harness)
    keys = _keys_file(live, tmp_path)
    call = tmp_path / "call.json"
    call.write_text(json.dumps(MAIL))
    capsys.readouterr()
    assert _verify(answer["receipt"], keys, "--call", str(call), "--format", "json") == 0
    shown = json.loads(capsys.readouterr().out)
    claims = shown["claims"]
    assert shown["valid"] and shown["kid"] == json.loads(keys.read_text())["current"]
    assert (claims["seq"], claims["id"], claims["effect"], claims["revision"]) == (
        answer["seq"], answer["id"], "allow", answer["revision"],
    )  # fmt: skip
    assert (claims["agent"], claims["tool"]) == ("a1", "mail.send")
    # The digests are the log row's arguments' and the answer's, and the revision's files'.
    (row,) = live.get(
        f"/v1/decisions?after_seq={answer['seq'] - 1}&limit=1", headers=harness.auth()
    ).json()["decisions"]
    assert unb64url(claims["args"]) == receipts.digest(row["args"])
    assert unb64url(claims["final"]) == receipts.digest(answer["args"])
    stored = harness.service.store.get_revision(answer["revision"])
    assert stored is not None
    files = [(str(path), str(text)) for path, text in stored["files"]]
    assert unb64url(claims["policy"]) == receipts.revision_digest(files)
    # The keys asked of the server itself, by its URL.
    assert _verify(answer["receipt"], str(live.base_url)) == 0
    # Without `?receipt=true`, none.
    assert "receipt" not in _decide(live, harness, query="receipt=false")
    assert "receipt" not in _decide(live, harness, query="")


def test_the_receipt_is_a_cose_sign1_as_rfc_9052_lays_it_out(
    world: tuple[Harness, httpx.Client],
) -> None:
    harness, live = world
    raw = receipts.decode(_decide(live, harness)["receipt"])
    message = cbor2.loads(raw)
    assert message.tag == SIGN1_TAG
    protected, unprotected, payload, signature = message.value
    header = cbor2.loads(protected)
    keys = from_jwks(live.get("/v1/keys").json())
    assert header[1] == EDDSA and header[4].decode() in keys and not unprotected
    # Checked here as any COSE library does: Ed25519 over the Sig_structure.
    to_be_signed = cbor2.dumps(["Signature1", protected, b"", payload])
    key = nacl.signing.VerifyKey(keys[header[4].decode()].public)
    key.verify(to_be_signed, signature)
    assert cbor2.loads(payload)["v"] == 1


def _with(raw: bytes, name: str, value: Any) -> str:
    """The receipt with claim `name` set to `value`, its signature kept."""
    message = cbor2.loads(raw)
    protected, unprotected, payload, signature = message.value
    claims = dict(cbor2.loads(payload))
    claims[name] = value
    changed = cbor2.CBORTag(
        SIGN1_TAG, [protected, dict(unprotected), cbor2.dumps(claims), signature]
    )
    return receipts.encode(cbor2.dumps(changed))


OTHER: dict[str, Any] = {
    "seq": 10**6, "id": "0" * 24, "at": 1, "agent": "a2", "tool": "billing.refund",
    "args": bytes(32), "final": bytes(32), "effect": "deny", "revision": 99,
    "policy": bytes(32),
}  # fmt: skip


def test_a_receipt_with_any_bound_field_changed_does_not_verify(
    world: tuple[Harness, httpx.Client], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    harness, live = world
    raw = receipts.decode(_decide(live, harness)["receipt"])
    keys = _keys_file(live, tmp_path)
    trusted = from_jwks(json.loads(keys.read_text()))
    assert receipts.verify(raw, trusted)[1]["seq"] > 0
    for field in receipts.FIELDS:
        with pytest.raises(receipts.ReceiptError) as refused:
            receipts.verify(receipts.decode(_with(raw, field, OTHER[field])), trusted)
        assert refused.value.why == "bad-signature", field
    # And on the command line, offline: exit 1, V0101.
    assert _verify(receipts.encode(raw), keys) == 0
    capsys.readouterr()
    assert _verify(_with(raw, "effect", "allow" if b"deny" in raw else "deny"), keys) == 1
    assert "error[V0101]" in capsys.readouterr().err


def test_a_receipt_for_another_call_or_an_unknown_key_is_refused(
    world: tuple[Harness, httpx.Client], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    harness, live = world
    receipt = _decide(live, harness)["receipt"]
    keys = _keys_file(live, tmp_path)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**MAIL, "args": {**MAIL["args"], "to": "eve@example.com"}}))
    capsys.readouterr()
    assert _verify(receipt, keys, "--call", str(other)) == 1
    err = capsys.readouterr().err
    assert "error[V0102]" in err and "`args` differ" in err
    # A key set without the key that signed it (another server's).
    stranger = tmp_path / "stranger.json"
    stranger.write_text(json.dumps({"keys": [], "current": None}))
    assert _verify(receipt, stranger) == 1
    assert "not published" in capsys.readouterr().err
    # And what is not a key set, or not a receipt.
    (tmp_path / "bad.json").write_text('{"keys": [{"kty": "RSA"}]}')
    assert _verify(receipt, tmp_path / "bad.json") == 2
    assert "error[V0103]" in capsys.readouterr().err
    assert _verify("not-a-receipt", keys) == 1


def test_a_bad_receipt_parameter_is_refused_and_decides_nothing(
    world: tuple[Harness, httpx.Client],
) -> None:
    harness, live = world
    before = harness.service.store.last_seq()
    for query in ("receipt=yes", "receipt=True", "receipt=true&receipt=true"):
        answer = live.post(f"/v1/decisions?{query}", json=MAIL,
                           headers=harness.auth(harness.decide))  # fmt: skip
        expect(answer, 400, "repeated-parameter" if "&" in query else "bad-receipt")
    assert harness.service.store.last_seq() == before


def test_every_decision_of_a_batch_carries_its_receipt(
    world: tuple[Harness, httpx.Client], tmp_path: Path
) -> None:
    harness, live = world
    calls = [MAIL, {**MAIL, "args": {**MAIL["args"], "to": "x@elsewhere.org"}}] * 10
    answers = _decide(live, harness, {"calls": calls}, path="/v1/decisions/batch")["decisions"]
    keys = from_jwks(live.get("/v1/keys").json())
    for call, answer in zip(calls, answers, strict=True):
        _, claims = receipts.verify(receipts.decode(answer["receipt"]), keys)
        assert (claims["seq"], claims["effect"]) == (answer["seq"], answer["effect"])
        assert claims["args"] == receipts.digest(call["args"])
    assert {a["effect"] for a in answers} == {"allow", "deny"}


def test_a_secret_argument_is_digested_redacted_as_the_log_has_it(
    world: tuple[Harness, httpx.Client],
) -> None:
    harness, live = world
    call = {"agent": "a1", "tool": "identities.import", "args": {"seed": SEED}}
    answer = _decide(live, harness, call)
    raw = receipts.decode(answer["receipt"])
    assert SEED.encode() not in raw
    _, claims = receipts.verify(raw, from_jwks(live.get("/v1/keys").json()))
    (row,) = live.get(
        f"/v1/decisions?after_seq={answer['seq'] - 1}&limit=1", headers=harness.auth()
    ).json()["decisions"]
    assert row["args"]["seed"] != SEED and claims["args"] == receipts.digest(row["args"])


def test_after_a_rotation_old_receipts_verify_and_new_ones_use_the_new_key(
    live: httpx.Client, harness: Harness, tmp_path: Path
) -> None:
    old = _decide(live, harness)["receipt"]
    first = live.get("/v1/keys").json()
    assert live.post("/v1/keys/rotate").status_code == 401  # (an admin's)
    rotated = live.post("/v1/keys/rotate", headers=harness.auth())
    assert rotated.status_code == 200
    keys = rotated.json()
    assert [k["kid"] for k in keys["keys"]] == [first["current"], keys["current"]]
    assert keys["keys"][0]["not_after"] is not None and keys["keys"][1]["not_after"] is None
    new = _decide(live, harness)["receipt"]
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(keys))
    trusted = from_jwks(keys)
    assert receipts.verify(receipts.decode(old), trusted)[0] == first["current"]
    assert receipts.verify(receipts.decode(new), trusted)[0] == keys["current"]
    assert _verify(old, path) == 0 and _verify(new, path) == 0


def test_the_log_verifies_through_the_api_and_the_checkpoint_at_shutdown(
    harness: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = create_app(harness.service)
    with TestClient(app) as client:  # (its lifespan: the checkpoint at shutdown)
        for _ in range(3):
            client.post("/v1/decisions", json=MAIL, headers=harness.auth(harness.decide))
        head = harness.service.store.last_seq()
    report = client.get("/v1/log/verify", headers=harness.auth()).json()
    assert report["sound"] and report["head"] == head == report["covered_through"]
    assert report["last_checkpoint"]["seq"] == head and report["first_bad"] is None
    assert client.get("/v1/log/verify", headers=harness.auth(harness.decide)).status_code == 403
    # The command line, from the database and its key file, or from a saved key set.
    db = [str(harness.db)] + (
        [] if harness.key_file is None else ["--key-file", str(harness.key_file)]
    )
    capsys.readouterr()
    assert main(["log", "verify", "--db", *db]) == 0
    assert f"decisions 1 to {head} verify" in capsys.readouterr().out
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(harness.service.keys.jwks()))
    assert main(["log", "verify", "--db", str(harness.db), "--keys", str(keys)]) == 0


def test_a_tampered_row_is_named_by_the_api_and_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # (tampering with SQL on an SQLite file; tests/store/test_logseal.py has PostgreSQL's)
    harness = make_harness(tmp_path)
    file = harness.file
    client = TestClient(create_app(harness.service))
    for _ in range(4):
        client.post("/v1/decisions", json=MAIL, headers=harness.auth(harness.decide))
    assert isinstance(harness.service.checkpointer.checkpoint(), logseal.Checkpoint)
    with sqlite3.connect(file) as db:
        db.execute("UPDATE decisions SET body = CAST('{}' AS BLOB) WHERE seq = 2")
    db.close()
    report = client.get("/v1/log/verify", headers=harness.auth()).json()
    assert not report["sound"]
    assert (report["first_bad"]["seq"], report["first_bad"]["why"]) == (2, "checksum-mismatch")
    capsys.readouterr()
    assert main(["log", "verify", "--db", str(file)]) == 1
    out = capsys.readouterr().out
    assert "decision 2: checksum-mismatch" in out and "error[V0001]" in out
    harness.service.store.close()
