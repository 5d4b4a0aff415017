"""Damaged storage over a real server: never served as data, never a 500.

Real files damaged as a disk or a hand would damage them (cut in half, 64 KB garbled in
the middle, a byte flipped inside a row where SQLite's own check does not look, a log
row deleted, a file a newer charter wrote), served by `charter serve` in a subprocess on
loopback or by the in-process server fixtures, and checked by `charter db check`."""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.cli import main
from policy.store import schema
from policy.store.filecheck import quick_check
from tests.api.conftest import Harness, code_of, make_harness, wait_ready
from tests.api.test_serve_checks import ROOT, _line_with

MAIL = {"to": "bob@example.com", "subject": "hi"}


def _charter(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *argv], cwd=ROOT, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


@contextmanager
def _served(db: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "serve", "--db", str(db), "--port", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        line = _line_with(process, b"serving ", 60)
        url = line.split(" on ")[1].split()[0]
        wait_ready(url, process, 60)
        yield url, process
    finally:
        process.terminate()
        process.wait(timeout=20)
        assert process.stdout is not None
        process.stdout.close()


def _logged(harness: Harness, calls: list[dict[str, Any]]) -> None:
    from starlette.testclient import TestClient

    from api.http.app import create_app

    with TestClient(create_app(harness.service)) as client:
        for call in calls:  # (one at a time: a run of the log each)
            response = client.post("/v1/decisions", json=call, headers=harness.auth())
            assert response.status_code == 200, response.text[:300]


def _stopped_database(tmp_path: Path, decisions: int) -> Harness:
    """A database with the harness's agents and policy and `decisions` logged decisions
    (each with the marker `m<seq>-QQQQQQQQ` in its body), its store closed: the WAL
    copied back into the file."""
    harness = make_harness(tmp_path)
    calls = [
        {"agent": "a1", "tool": "mail.send", "args": {**MAIL, "body": f"m{i}-QQQQQQQQ"}}
        for i in range(1, decisions + 1)
    ]
    _logged(harness, calls)
    harness.service.store.close()
    assert not Path(f"{harness.file}-wal").exists()
    return harness


def _log(url: str, harness: Harness, after: int = 0, limit: int = 1000) -> dict[str, Any]:
    response = httpx.get(f"{url}/v1/decisions?after_seq={after}&limit={limit}",
                         headers=harness.auth())  # fmt: skip
    assert response.status_code == 200, response.text[:300]
    page: dict[str, Any] = response.json()
    return page


def test_a_byte_flipped_in_a_logged_row_is_marked_and_the_rest_served(
    tmp_path: Path, capsys: Any
) -> None:
    """One byte of decision 3's body flipped in the file, inside the row where SQLite's
    check does not look: the server starts (the file is sound), serves decisions 1, 2, 4
    and 5 as logged, and in 3's place says it is damaged; `charter db check` names it."""
    harness = _stopped_database(tmp_path, 5)
    data = bytearray(harness.file.read_bytes())
    at = data.find(b"m3-QQQQQQQQ")
    assert at > 0 and data.find(b"m3-QQQQQQQQ", at + 1) == -1
    data[at + 5] = ord("R")  # (the body still decodes: `m3-QQRQQQQQ`)
    harness.file.write_bytes(bytes(data))
    assert quick_check(harness.file, full=True) == []  # SQLite's own check misses it
    with _served(harness.file) as (url, _):
        page = _log(url, harness)
        assert [d["seq"] for d in page["decisions"]] == [1, 2, 3, 4, 5]
        damaged = page["decisions"][2]
        assert damaged == {"seq": 3, "last_seq": 3, "damaged": "checksum-mismatch",
                           "detail": "it does not match its checksum"}  # fmt: skip
        bodies = [d["args"]["body"] for d in page["decisions"] if "damaged" not in d]
        assert bodies == ["m1-QQQQQQQQ", "m2-QQQQQQQQ", "m4-QQQQQQQQ", "m5-QQQQQQQQ"]
        assert b"QQRQQ" not in httpx.get(f"{url}/v1/decisions", headers=harness.auth()).content
        # Paged one at a time: the damaged row is a page of its own, and paging moves on.
        assert _log(url, harness, 2, 1) == {"decisions": [damaged], "next_after_seq": 3}
        assert _log(url, harness, 3, 1)["decisions"][0]["args"]["body"] == "m4-QQQQQQQQ"
        # New decisions are logged and read after it.
        logged = httpx.post(f"{url}/v1/decisions", headers=harness.auth(),
                            json={"agent": "a1", "tool": "mail.send", "args": {**MAIL, "body": "x"}})  # fmt: skip
        assert logged.json()["seq"] == 6
        assert _log(url, harness, 5)["decisions"][0]["seq"] == 6
    assert _checked(harness.file, capsys) == (1, (
        f"{harness.file}: decisions 3: checksum-mismatch: it does not match its checksum\n"
        f"{harness.file}: 1 damaged\n"
    ))  # fmt: skip


def test_a_deleted_and_an_undecodable_log_row_over_http(
    live: httpx.Client, harness: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    for i in range(4):
        call = {"agent": "a1", "tool": "mail.send", "args": {**MAIL, "body": str(i)}}
        assert live.post("/v1/decisions", json=call, headers=harness.auth()).status_code == 200
    harness.service.store.append_decisions([b"\xff\xfe not a row"])  # seq 5, checksummed
    with sqlite3.connect(harness.file) as other:
        other.execute("DELETE FROM decisions WHERE seq = 2")
    other.close()
    page = live.get("/v1/decisions", headers=harness.auth()).json()
    assert [(d["seq"], d.get("damaged")) for d in page["decisions"]] == [
        (1, None), (2, "missing"), (3, "chain-broken"), (4, None), (5, "undecodable"),
    ]  # fmt: skip
    assert page["next_after_seq"] == 5
    harness.service.store.close()  # (stopped: its WAL copied back)
    assert _checked(harness.file, capsys) == (1, "".join(
        f"{harness.file}: {line}\n" for line in (
            "decisions 2: missing: decision 2 is not in the log (removed)",
            "decisions 3: chain-broken: rows before it are missing or do not read, so its link cannot be checked",
            "decisions 5: undecodable: it does not decode (CBORDecodeError)",
            "3 damaged",
        )
    ))  # fmt: skip


def test_damaged_documents_and_revisions_are_503_store_damaged(
    live: httpx.Client, harness: Harness
) -> None:
    """An agent, a revision, a token changed behind the server's back: each read that
    needs it refuses with `store-damaged` naming it; other reads go on; never a 500."""
    with sqlite3.connect(harness.file) as other:
        (body,) = other.execute(
            "SELECT body FROM documents WHERE kind = 'agents' AND id = 'a1'"
        ).fetchone()
        other.execute("UPDATE documents SET body = ? WHERE kind = 'agents' AND id = 'a1'",
                      (body.replace(b"support", b"suppors"),))  # fmt: skip
        other.execute("UPDATE revisions SET body = body || x'00' WHERE n = 1")
    other.close()
    agent = live.get("/v1/agents/a1", headers=harness.auth())
    assert code_of(agent) == (503, "store-damaged"), agent.text
    problem = agent.json()
    assert problem["damaged"] == "document agents/a1"
    assert problem["detail"] == (
        "document agents/a1 is damaged: it does not match its checksum; nothing was changed"
    )
    assert "Retry-After" not in agent.headers
    decided = live.post("/v1/decisions", headers=harness.auth(),
                        json={"agent": "a1", "tool": "mail.send", "args": {**MAIL, "body": "x"}})  # fmt: skip
    assert code_of(decided) == (503, "store-damaged")
    revision = live.get("/v1/policy?revision=1", headers=harness.auth())
    assert (
        code_of(revision) == (503, "store-damaged") and revision.json()["damaged"] == "revision 1"
    )
    assert live.get("/v1/identities", headers=harness.auth()).status_code == 200
    with sqlite3.connect(harness.file) as other:  # (what every process reads on a commit)
        other.execute("INSERT INTO changes (seq, kind, key, sum) VALUES (1, 'agent', 'a2', x'00')")
    other.close()
    # A damaged change cannot say what changed: the process drops all it caches, and
    # serves on from what the store holds.
    assert live.get("/readyz").status_code == 200
    assert live.get("/v1/identities", headers=harness.auth()).status_code == 200
    assert code_of(live.get("/v1/agents/a1", headers=harness.auth())) == (503, "store-damaged")
    assert harness.service.metrics.rejected[(503, "store-damaged")] >= 3


def _big(tmp_path: Path) -> Path:
    """A stopped database of about 2 MB: the harness's, and 3,000 log rows."""
    (tmp_path / "made").mkdir()
    harness = make_harness(tmp_path / "made")
    row = json.dumps({"id": "d", "effect": "allow", "args": {"body": "x" * 500}}).encode()
    for _ in range(30):
        harness.service.store.append_decisions([row] * 100)
    harness.service.store.close()
    return harness.file


def _refused(db: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """`charter serve` exits 2 with one message line and a help line, serving nothing (the
    refusal comes before the server: `run_uvicorn` stands in for it here)."""
    assert main(["serve", "--db", str(db), "--port", "0"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    message, help_line = err.splitlines()
    assert help_line.startswith("help: ")
    return message


def _checked(db: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["db", "check", "--db", str(db)])
    return code, capsys.readouterr().out


def test_cut_garbled_and_newer_files_are_refused_at_start(
    tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    def serve(*args: object, **kwargs: object) -> None:
        raise AssertionError("charter serve went on to serve")

    monkeypatch.setattr("api.cli_serve.run_uvicorn", serve)
    good = _big(tmp_path)
    size = good.stat().st_size
    assert size > 1_500_000
    cut = tmp_path / "cut.db"
    shutil.copy(good, cut)
    with open(cut, "r+b") as file:
        file.truncate(size // 2)
    # A real `charter serve` process on the cut file: exit 2 before it listens.
    done = _charter("serve", "--db", str(cut), "--port", "0")
    assert done.returncode == 2 and "serving" not in done.stdout, done
    assert done.stderr.startswith(f"charter: error[D0001]: `{cut}` is damaged: it is ")
    assert _refused(cut, capsys).startswith(f"charter: error[D0001]: `{cut}` is damaged: it is ")
    garbled = tmp_path / "garbled.db"
    shutil.copy(good, garbled)
    with open(garbled, "r+b") as file:
        file.seek(size // 2)
        file.write(random.Random(20).randbytes(64 * 1024))
    assert _refused(garbled, capsys).startswith(f"charter: error[D0002]: `{garbled}` is damaged: ")
    header = tmp_path / "header.db"
    shutil.copy(good, header)
    with open(header, "r+b") as file:
        file.write(b"\x00" * 16)
    assert "not an SQLite file" in _refused(header, capsys)
    newer = tmp_path / "newer.db"
    shutil.copy(good, newer)
    with sqlite3.connect(newer) as made:
        made.execute(f"PRAGMA user_version = {schema.VERSION + 1}")
    made.close()
    before = newer.read_bytes()
    assert _refused(newer, capsys) == (
        f"charter: error[D0003]: `{newer}` was written by a newer charter: its schema version "
        f"is {schema.VERSION + 1}, this charter knows up to {schema.VERSION}"
    )
    assert newer.read_bytes() == before
    for damaged in (cut, garbled, header):
        assert not Path(f"{damaged}-wal").exists()  # (the look wrote nothing beside it)
        code, out = _checked(damaged, capsys)
        assert code == 1 and out.endswith(" damaged\n"), out
    assert _checked(newer, capsys)[0] == 2
    assert _checked(good, capsys) == (0, f"{good}: no damage found\n")


def test_db_check_usage(tmp_path: Path, capsys: Any) -> None:
    assert main(["db", "check", "--db", str(tmp_path / "none.db")]) == 2
    assert "no database file at" in capsys.readouterr().err


def test_a_newer_charter_migrating_the_file_stops_the_server_answering(
    live: httpx.Client, harness: Harness
) -> None:
    """The file's schema version moved past this charter's while it served (a newer
    charter opened it): requests are 503 `store-too-new`, `/readyz` says why."""
    assert live.get("/v1/agents/a1", headers=harness.auth()).status_code == 200
    with sqlite3.connect(harness.file) as newer:
        newer.execute(f"PRAGMA user_version = {schema.VERSION + 1}")
    newer.close()
    refused = live.get("/v1/agents/a1", headers=harness.auth())
    assert code_of(refused) == (503, "store-too-new"), refused.text
    decided = live.post("/v1/decisions", headers=harness.auth(),
                        json={"agent": "a1", "tool": "mail.send", "args": {**MAIL, "body": "x"}})  # fmt: skip
    assert code_of(decided) == (503, "store-too-new")
    ready = live.get("/readyz")
    assert ready.status_code == 503 and "newer than this charter" in ready.json()["reason"]
    assert harness.service.store.last_seq() == 0  # (nothing was logged)


WRITER = """
import sys
from policy.store.sqlite import SqliteStore
store = SqliteStore(sys.argv[1])
for i in range(2000):
    store.append_decisions([b'{"id": "x", "effect": "allow"}'] * 10)
print("written", flush=True)
sys.stdin.read()
"""


def test_a_database_left_by_kill_9_is_not_taken_for_damaged(tmp_path: Path) -> None:
    """A writer killed with its commits still in the `-wal` (not copied back): the look
    at start finds nothing wrong, changes neither the file nor its `-wal`, and the store
    reads every commit."""
    from api.cli_db import start_refusal
    from policy.store.sqlite import SqliteStore

    db = tmp_path / "k.db"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db)], cwd=ROOT, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )  # fmt: skip
    assert writer.stdout is not None and writer.stdout.readline() == b"written\n"
    writer.kill()
    writer.wait(timeout=20)
    writer.stdout.close()
    assert writer.stdin is not None
    writer.stdin.close()
    wal = Path(f"{db}-wal")
    assert wal.stat().st_size > 0

    def files() -> dict[str, bytes]:  # (not the `-shm`: SQLite's index of the WAL, rebuilt)
        return {
            path.name: path.read_bytes() for path in tmp_path.iterdir() if "shm" not in path.name
        }

    before = files()
    assert start_refusal(str(db)) is None
    assert files() == before and set(before) == {"k.db", "k.db-wal", "k.db.mark"}
    store = SqliteStore(db)
    assert store.last_seq() == 20_000 and len(store.read_decisions(19_990, 100)) == 10
    store.close()
