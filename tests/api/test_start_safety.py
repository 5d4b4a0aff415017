"""Start-up that never loses or re-creates data, over real `charter serve` processes: a
database that lost its `-wal` is refused (no seq given twice), an empty or missing one
beside its files is refused (not made anew), a first start on a full disk (a real tmpfs)
makes everything or nothing and a restart finishes it, and /readyz says when the store
cannot write."""

from __future__ import annotations

import io
import sqlite3
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.cli import main
from tests.api.start_runs import (
    Served,
    files,
    fill,
    refusal,
    resize,
    small_disk,
    workspace,
)


def test_a_database_that_lost_its_wal_is_refused_and_no_seq_is_given_twice(
    tmp_path: Path,
) -> None:
    """Decisions whose commits are only in the `-wal` (a reader holds the checkpoint back),
    the server killed: with its `-wal` the database starts and numbers on; without it
    (the file as the checkpoints left it) the start is refused, changing nothing, where
    it served and gave seqs 1 to 4 to new decisions."""
    db = tmp_path / "x.db"
    served = Served(db, "--workspace", str(workspace(tmp_path)))
    reader = sqlite3.connect(db, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM decisions").fetchone()  # (a snapshot: held)
    try:
        assert [served.decide().json()["seq"] for _ in range(3)] == [1, 2, 3]
        served.kill()
        older = db.read_bytes()  # the file without the commits of seqs 1 to 3
    finally:
        reader.close()
    again = Served(db)  # (whole: killed, not damaged)
    try:
        assert again.decide().json()["seq"] == 4
    finally:
        again.stop()
    db.write_bytes(older)
    for name in ("x.db-wal", "x.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    before = files(tmp_path)
    assert refusal(db) == (
        f"charter: error[D0101]: `{db}` lacks commits that were made: its log ends "
        "at seq 0, its mark records seq 4 (its `-wal` file was lost, or this is an older "
        "copy)\n"
        f"help: put back the `{db}-wal` file that was beside it, or the newer copy; served "
        "as it is, it would give out those seqs and revisions again\n"
    )
    assert files(tmp_path) == before
    err = io.StringIO()
    with redirect_stderr(err):  # (`charter token` opens it the same way)
        assert main(["token", "--db", str(db), "--scope", "admin"]) == 2
    assert err.getvalue().startswith("charter: error[D0101]: ")
    assert files(tmp_path) == before


def test_an_empty_or_missing_database_beside_its_files_is_refused(tmp_path: Path) -> None:
    """A database emptied (0 bytes) or removed beside its `-wal`, mark and admin token was
    made anew: the `-wal` overwritten, a new token issued, an empty log served. Both are
    refused, every file left as it was; the database put back serves its log."""
    db = tmp_path / "x.db"
    served = Served(db, "--workspace", str(workspace(tmp_path)))
    assert [served.decide().json()["seq"] for _ in range(2)] == [1, 2]
    served.kill()
    whole = db.read_bytes()
    db.write_bytes(b"")
    before = files(tmp_path)
    assert before["x.db-wal"]  # (not empty: commits a checkpoint has not copied, or had)
    names = "`x.db.mark`, `x.db-wal`, `x.db.admin-token`"
    assert refusal(db).replace(str(tmp_path) + "/", "") == (
        "charter: error[D0102]: `x.db` is an empty database, but a database was "
        f"there and is lost (beside it: {names})\n"
        f"help: put that database back at `x.db`; to make a new one there, move {names} "
        "away first\n"
    )
    assert files(tmp_path) == before
    db.unlink()
    assert "`x.db` is no database, but a database" in refusal(db).replace(str(tmp_path) + "/", "")
    assert files(tmp_path) == {k: v for k, v in before.items() if k != "x.db"}
    with sqlite3.connect(db) as partial:  # an SQLite file without a table: a partial one
        partial.execute("PRAGMA user_version = 1")  # (SQLite empties the -wal beside it)
    partial.close()
    made = files(tmp_path)
    assert "`x.db` is an empty database, but a database" in refusal(db).replace(
        str(tmp_path) + "/", ""
    )
    assert files(tmp_path) == made
    for name, data in before.items():  # put back as it was, with the database
        (tmp_path / name).write_bytes(whole if name == "x.db" else data)
    again = Served(db)
    try:
        log = httpx.get(f"{again.url}/v1/decisions", headers=again.headers).json()
        assert [row["seq"] for row in log["decisions"]] == [1, 2]
        assert again.decide().json()["seq"] == 3
    finally:
        again.stop()


class Killed(BaseException):
    """A first start killed where this is raised."""


def _first_start(db: Path, folder: Path) -> int:
    """`charter serve` in this process, up to where it would serve (exit code 0 then)."""
    return main(["serve", "--db", str(db), "--workspace", str(folder), "--port", "0"])


@pytest.fixture
def never_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    def serve(app: Any, *args: object, **kwargs: object) -> None:
        app.charter.service.store.close()

    monkeypatch.setattr("api.cli_serve.run_uvicorn", serve)
    monkeypatch.delenv("CHARTER_SECRET_KEY", raising=False)


def test_a_first_start_on_a_full_disk_makes_everything_or_nothing(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    never_serves: None,
) -> None:
    """On a real tmpfs too small for it, at every size from a few blocks to just short of
    enough, a first start says the disk is full (exit 2) and leaves nothing: no database,
    key, mark or token, no partial file. A key made by hand stays as it was. Killed once
    the database is in place, before its admin token, a restart finishes it: the token
    is issued, the demo seeded once, and the server decides."""
    folder = workspace(tmp_path)
    with small_disk(tmp_path, 2048) as disk:
        db = disk / "x.db"
        full = (
            f"charter: error[D0104]: the disk is full: no database was made at `{db}`\n"
            f"help: free space on the file system that holds `{db}`, then start again\n"
        )
        for kib in (8, 16, 24, 48, 96, 160, 184):  # (192 KiB is enough, here)
            resize(disk, kib)
            assert _first_start(db, folder) == 2, kib
            assert capsys.readouterr() == ("", full), kib
            assert files(disk) == {}, kib
        key = disk / "x.db.key"
        key.write_text("42" * 32 + "\n")
        key.chmod(0o600)
        assert _first_start(db, folder) == 2
        assert capsys.readouterr() == ("", full)
        assert files(disk) == {"x.db.key": b"42" * 32 + b"\n"}
        key.unlink()

        resize(disk, 2048)

        def killed(service: Any, db: str, say: Any) -> None:
            service.store.close()
            raise Killed

        monkeypatch.setattr("api.cli_serve.issue_admin_token", killed)
        with pytest.raises(Killed):
            _first_start(db, folder)
        monkeypatch.undo()
        out = capsys.readouterr().out
        assert "demo agent: demo-support" in out and "admin token" not in out
        assert {"x.db", "x.db.key", "x.db.mark"} <= set(files(disk))
        assert "x.db.admin-token" not in files(disk)

        served = Served(db, "--workspace", str(folder))
        try:
            said = "".join(served.out)
            assert "admin token (shown once; also in" in said and "demo agent" not in said
            decision = served.decide().json()
            assert (decision["effect"], decision["seq"]) == ("allow", 1)
            agents = httpx.get(f"{served.url}/v1/agents", headers=served.headers).json()
            assert [agent["id"] for agent in agents["items"]] == ["demo-support"]
        finally:
            served.stop()


def test_readyz_says_the_store_cannot_write_while_the_disk_is_full(tmp_path: Path) -> None:
    """A server whose disk fills up: its decisions are 503s, and /readyz (200 before) is
    503 `store-cannot-write` with the reason until the disk has room again, when it is
    200 without any other request's write, and decisions are logged again."""
    with small_disk(tmp_path, 4096) as disk:
        db = disk / "x.db"
        served = Served(db, "--workspace", str(workspace(tmp_path)))
        try:
            assert httpx.get(f"{served.url}/readyz").status_code == 200
            filler = fill(disk)
            answers = []
            for _ in range(2000):
                answer = served.decide()
                answers.append(answer.status_code)
                if answer.status_code != 200:
                    break
            assert answer.status_code == 503, answers
            assert answer.json()["code"] == "store-unavailable"
            last = answers.count(200)
            ready = httpx.get(f"{served.url}/readyz")
            assert (ready.status_code, ready.json()) == (
                503,
                {
                    "status": "unavailable",
                    "code": "store-cannot-write",
                    "reason": "the last write failed: the disk is full (SQLITE_FULL)",
                },
            )
            assert httpx.get(f"{served.url}/readyz").status_code == 503  # (its write fails)
            filler.unlink()
            assert httpx.get(f"{served.url}/readyz").json() == {"status": "ready", "revision": 1}
            assert served.decide().json()["seq"] == last + 1
        finally:
            served.stop()


def test_enospc_anywhere_in_a_first_start_leaves_nothing(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    never_serves: None,
) -> None:
    """Where no tmpfs can be mounted (not root), ENOSPC injected at the file layer: the
    key file's write, the database's flush before its rename, the rename itself. Each is
    `D0104`, exit 2, and the directory is as it was."""
    import errno
    import os as real_os

    import api.first_start
    import policy.secrets

    folder = workspace(tmp_path)
    disk = tmp_path / "disk"
    disk.mkdir()
    db = disk / "x.db"

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, real_os.strerror(errno.ENOSPC))

    for module, name in ((policy.secrets, "_write"), (api.first_start, "_flush"),
                         (api.first_start, "_place")):  # fmt: skip
        with monkeypatch.context() as patched:
            patched.setattr(module, name, full)
            assert _first_start(db, folder) == 2, name
        out, err = capsys.readouterr()
        assert (out, err.splitlines()[0]) == (
            "",
            f"charter: error[D0104]: the disk is full: no database was made at `{db}`",
        ), name
        assert files(disk) == {}, name
    assert _first_start(db, folder) == 0  # (and with room, it is made)
    assert {"x.db", "x.db.key", "x.db.mark", "x.db.admin-token"} <= set(files(disk))
