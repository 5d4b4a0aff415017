"""The files `charter serve` keeps secrets in: the admin token's (`<db>.admin-token`) is
a new file of mode 0600 whatever was at its path, the database and its `-wal` and `-shm`
are made 0600 under a loose umask too, and a key file others may read is refused."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.cli import main


class Served(BaseException):
    """`charter serve` came to serving (a BaseException: `main` turns an Exception into
    its internal error)."""


@pytest.fixture(autouse=True)
def never_serves(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`charter serve` runs its first start, then stops where it would serve."""

    def serve(app: Any, *args: object, **kwargs: object) -> None:
        app.charter.service.store.close()  # (stops its checkpoint thread)
        raise Served

    monkeypatch.setattr("api.cli_serve.run_uvicorn", serve)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CHARTER_SECRET_KEY", raising=False)


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """A umask that takes nothing away: a file is made with the mode its maker asks for."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def first_start(capsys: pytest.CaptureFixture[str]) -> str:
    """`charter serve --db x.db` up to where it would serve: the token it printed."""
    with pytest.raises(Served):
        main(["serve", "--db", "x.db", "--port", "0"])
    out, err = capsys.readouterr()
    assert err == "", err
    lines = out.splitlines()
    token = next(line.strip() for line in lines if line.strip().startswith("chr_"))
    assert sum(token in line for line in lines) == 1  # (printed once)
    return token


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_the_admin_token_goes_into_a_new_file_not_one_already_there(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, loose_umask: None
) -> None:
    """A file already at `<db>.admin-token` (a world-readable one, which someone holds
    open) was opened in place and the token written into it before its mode was made
    0600: whoever held it open read the token. A symlink there was followed, and the
    token written where it pointed. Now the token goes into a file of its own, 0600,
    which then takes the path's place: the old file, and the link's target, are left as
    they were."""
    there = tmp_path / "x.db.admin-token"
    there.write_text("")
    there.chmod(0o644)
    with there.open() as held:
        token = first_start(capsys)
        assert held.read() == ""  # the file someone had open never held the token
    assert there.read_text() == token + "\n" and mode(there) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir() if "admin-token" in p.name) == [there.name]

    target = tmp_path / "elsewhere"
    target.write_text("")
    target.chmod(0o644)
    for leftover in tmp_path.glob("x.db*"):
        leftover.unlink()
    there.symlink_to(target)
    token = first_start(capsys)
    assert target.read_text() == "" and mode(target) == 0o644
    assert not there.is_symlink() and mode(there) == 0o600
    assert there.read_text() == token + "\n"


def test_an_admin_token_file_that_cannot_be_written_is_said_and_the_token_printed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A first start whose token file cannot be written (a directory at its path) was an
    internal error after the token was issued, never shown: it is printed, with why the
    file was not written, and nothing is written in the directory there."""
    (tmp_path / "x.db.admin-token").mkdir()
    with pytest.raises(Served):
        main(["serve", "--db", "x.db", "--port", "0"])
    out, err = capsys.readouterr()
    assert err == ""
    assert "admin token (shown once; not written to x.db.admin-token: is a directory):" in out
    assert "chr_" in out
    assert list((tmp_path / "x.db.admin-token").iterdir()) == []
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".new")]


def test_a_new_database_and_its_files_are_made_0600(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, loose_umask: None
) -> None:
    """The database holds what only an admin token reads over HTTP (the decision log, the
    approvals, the agents, the policy), and its `-wal` and `-shm` files hold the same: made
    as the umask left them (0644, 0666 here) where any local user could read them. Now
    made 0600 whatever the umask, as the key file and the admin token's are. A file that
    is there keeps the mode its owner gave it."""
    from api.http.app import open_service
    from policy import identities

    service = open_service(tmp_path / "x.db")
    try:
        identities.create(service.store, service.sealer, "me")  # (something in the WAL)
        made = sorted(p.name for p in tmp_path.iterdir())
        assert made == ["x.db", "x.db-shm", "x.db-wal", "x.db.key", "x.db.mark"]
        assert {name: mode(tmp_path / name) for name in made} == dict.fromkeys(made, 0o600)
    finally:
        service.store.close()
    token = first_start(capsys)  # (the database is there: only the token's file is new)
    assert (tmp_path / "x.db.admin-token").read_text() == token + "\n"
    assert mode(tmp_path / "x.db") == mode(tmp_path / "x.db.admin-token") == 0o600

    kept = tmp_path / "kept.db"
    kept.touch(0o640)
    open_service(kept).store.close()
    assert mode(kept) == 0o640


def test_a_database_made_through_a_symlink_is_made_0600(tmp_path: Path, loose_umask: None) -> None:
    """A `--db` that is a symlink to where the database is to be (`charter.db ->
    /data/charter.db`, made before the first start): the 0600 file was not made (an
    exclusive create does not follow a symlink), and SQLite made the database the link
    points at as the umask left it, readable by any local user."""
    from api.http.app import open_service

    (tmp_path / "data").mkdir()
    (tmp_path / "x.db").symlink_to(tmp_path / "data" / "x.db")
    open_service(tmp_path / "x.db").store.close()
    assert (tmp_path / "data" / "x.db").is_file() and (tmp_path / "x.db").is_symlink()
    assert mode(tmp_path / "data" / "x.db") == 0o600


def test_a_key_file_others_may_read_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A key file made by hand (`openssl rand -hex 32 > x.db.key`: 0644 under the usual
    umask) was served from as it was, every secret it seals open to any local user who
    can read the database. Refused, exit 2 and nothing made, until only its owner may
    read it (as ssh does a private key); `CHARTER_SECRET_KEY` is not a file."""
    key = tmp_path / "x.db.key"
    key.write_text("42" * 32 + "\n")
    for loose in (0o644, 0o640, 0o604, 0o620):
        key.chmod(loose)
        assert main(["serve", "--db", "x.db", "--port", "0"]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err == (
            f"charter: other users may read or write the key file `x.db.key` (mode {loose:o})\n"
            "help: `chmod 600 x.db.key`, or give the key in `CHARTER_SECRET_KEY`\n"
        )
        assert sorted(p.name for p in tmp_path.iterdir()) == ["x.db.key"]
    key.chmod(0o400)
    token = first_start(capsys)
    assert (tmp_path / "x.db.admin-token").read_text() == token + "\n"
