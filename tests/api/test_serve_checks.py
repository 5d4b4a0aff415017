"""`charter serve` refuses a command line it cannot serve before it creates anything: a
port out of range or taken, a worker count under 1, a database path that is empty, in
memory, unopenable or another program's. Each is exit 2 with a line that says why, never
an internal error, and the directory is left as it was."""

from __future__ import annotations

import os
import select
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.cli import main
from tests.api.conftest import wait_ready

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def never_serves(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A refusal comes before serving (this stands in for the server, so a test that
    fails does not serve forever); the working directory is a fresh one."""

    def serve(*args: object, **kwargs: object) -> None:
        raise AssertionError("charter serve went on to serve")

    monkeypatch.setattr("api.cli_serve.run_uvicorn", serve)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CHARTER_SECRET_KEY", raising=False)


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """argparse's refusal: exit 2, the usage and the message on stderr."""
    with pytest.raises(SystemExit) as info:
        main(["serve", *argv])
    out, err = capsys.readouterr()
    assert info.value.code == 2 and out == "", (out, err)
    assert err.startswith("usage: charter serve") and "internal error" not in err
    return err.splitlines()[-1]


def refusal(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """charter's own refusal: exit 2 and the lines it printed on stderr."""
    code = main(["serve", *argv])
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (out, err)
    assert "internal error" not in err and "Traceback" not in err
    return err


def listing(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


@pytest.mark.parametrize("port", ["99999", "65536", "-1", "http", "80.0", "\uff18\uff10"])
def test_a_port_out_of_range_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, port: str
) -> None:
    """`--port 99999` said it served on 99999 while listening on 34463 (the port modulo
    2^16); with `--workers 2` it was an OverflowError; `-1` made the database and its
    admin token first."""
    for workers in ("1", "2"):
        line = usage_error(capsys, "--db", "x.db", "--port", port, "--workers", workers)
        assert line == (
            f"charter serve: error: argument --port: `{port}` is not a port: "
            "give a number from 0 to 65535 (0: any free port)"
        )
    assert listing(tmp_path) == []


# A flag, a value it refuses, and what follows "`<value>` is not " in the refusal.
REFUSED_VALUES = [
    *(("--workers", w, "a number of worker processes: give 1 or more")
      for w in ("0", "-3", "two", "")),
    *(("--turn-lifetime", t, "a turn's lifetime: give seconds, from 1 to 31622400 (a year)")
      for t in ("0", "-1", "31622401", "1.5", "an hour")),
    *(("--max-policy-mib", m, "a policy's cap: give MiB, from 1 to 1024")
      for m in ("0", "-1", "1025", "1.5", "16M", "")),
    *((flag, t, "a timeout: give seconds, from 1 to 3600")
      for flag in ("--idle-timeout", "--header-timeout", "--body-timeout")
      for t in ("0", "-1", "3601", "0.5", "5s", "")),
    *(("--max-connections", c, "a number of connections: give 1 to 1000000")
      for c in ("0", "-1", "1000001", "1e3", "")),
    *(("--max-pipeline", d, "a number of waiting requests: give 1 to 1024")
      for d in ("0", "-1", "1025", "8.0", "")),
    *(("--approval-webhook-retry-ms", r, "a delay: give milliseconds, from 1 to 3600000")
      for r in ("0", "-1", "3600001", "1.5", "1s", "")),
]  # fmt: skip


@pytest.mark.parametrize(("flag", "value", "wanted"), REFUSED_VALUES)
def test_a_count_out_of_range_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flag: str, value: str, wanted: str
) -> None:
    line = usage_error(capsys, "--db", "x.db", flag, value)
    assert line == f"charter serve: error: argument {flag}: `{value}` is not {wanted}"
    assert listing(tmp_path) == []


@pytest.mark.parametrize(
    ("host", "wanted"),
    [
        ("", "the host is empty: give the address to listen on, e.g. `127.0.0.1` "
             "(`0.0.0.0` or `::` for every interface)"),
        ("\udcff", "`\\udcff` is not a host: give an IP address or a host name in ASCII, "
                    "e.g. `127.0.0.1`"),
        ("local host", "`local host` is not a host: give an IP address or a host name in "
                       "ASCII, e.g. `127.0.0.1`"),
        ("h\u00f6st", "`h\u00f6st` is not a host: give an IP address or a host name in "
                       "ASCII, e.g. `127.0.0.1`"),
    ],
)  # fmt: skip
def test_a_host_it_cannot_listen_on_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, host: str, wanted: str
) -> None:
    """`--host ""` listened on every interface (an unset `$HOST` exposed the service);
    a byte that is not UTF-8 (Python gives it as U+DC80-U+DCFF) was an internal error."""
    line = usage_error(capsys, "--db", "x.db", "--host", host)
    assert line == f"charter serve: error: argument --host: {wanted}"
    assert listing(tmp_path) == []


def test_an_empty_or_in_memory_database_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`--db ""` served a throwaway database and wrote `.admin-token` and `.key` here;
    `--db :memory:` served one that lived in memory and wrote `:memory:.admin-token`."""
    line = usage_error(capsys, "--db", "")
    assert line == (
        "charter serve: error: argument --db: the path is empty: name the database file, "
        "e.g. `--db charter.db`"
    )
    line = usage_error(capsys, "--db", ":memory:")
    assert line == (
        "charter serve: error: argument --db: `:memory:` is a database in memory, lost "
        "when the process ends: name the database file, e.g. `--db charter.db`"
    )
    assert listing(tmp_path) == []


def test_a_database_that_cannot_be_opened_is_named_with_the_reason(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """These were `internal error (OperationalError)`."""
    (tmp_path / "dir").mkdir()
    err = refusal(capsys, "--db", "nope/a.db")
    assert err == "charter: cannot open database `nope/a.db`: no directory `nope`\n"
    err = refusal(capsys, "--db", "dir")
    assert err == "charter: cannot open database `dir`: is a directory\n"
    err = refusal(capsys, "--db", "/dev/null")
    assert err == "charter: cannot open database `/dev/null`: not a regular file\n"
    assert listing(tmp_path) == ["dir"]


def test_a_file_that_is_not_a_charter_database_is_left_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A text file was `internal error (DatabaseError)`; another program's SQLite
    database got charter's tables added to it."""
    (tmp_path / "notes.txt").write_text("not a database\n" * 20)
    err = refusal(capsys, "--db", "notes.txt")
    assert err == (
        "charter: `notes.txt` is not a charter database: it is not an SQLite file\n"
        "help: name a new file (a first start makes it) or a charter database\n"
    )
    with sqlite3.connect(tmp_path / "other.db") as other:
        other.execute("CREATE TABLE songs (title TEXT)")
    other.close()
    before = (tmp_path / "other.db").read_bytes()
    err = refusal(capsys, "--db", "other.db")
    assert err.startswith(
        "charter: `other.db` is not a charter database: it is another program's SQLite "
        "database (its tables: songs)\n"
    )
    assert (tmp_path / "other.db").read_bytes() == before
    assert listing(tmp_path) == ["notes.txt", "other.db"]


def test_a_port_in_use_is_refused_before_the_database_is_made(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """It made the database and its admin token, then uvicorn failed to bind."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for workers in ("1", "2"):
            err = refusal(capsys, "--db", "x.db", "--port", str(port), "--workers", workers)
            assert err == (
                f"charter: cannot listen on `127.0.0.1` port {port}: address already in use\n"
                "help: another server listens there; `--port 0` takes any free port\n"
            )
    err = refusal(capsys, "--db", "x.db", "--host", "no-such-host.invalid")
    assert err.startswith("charter: cannot listen on `no-such-host.invalid` port 8080: ")
    assert listing(tmp_path) == []


def test_a_malformed_secret_key_is_refused_before_the_database_is_made(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both were `internal error (SecretKeyError)`, after the database was made."""
    monkeypatch.setenv("CHARTER_SECRET_KEY", "zz")
    err = refusal(capsys, "--db", "x.db", "--port", "0")
    hint = "help: the key is 64 hex digits: the one that sealed this database's secrets\n"
    assert err == "charter: `CHARTER_SECRET_KEY` must be 64 hex digits\n" + hint
    monkeypatch.delenv("CHARTER_SECRET_KEY")
    (tmp_path / "x.db.key").write_text("garbage\n")
    err = refusal(capsys, "--db", "x.db", "--port", "0")
    assert err == "charter: the key file `x.db.key` is malformed\n" + hint
    (tmp_path / "x.db.key").write_bytes(b"\xff" * 64)  # (not even ASCII)
    assert (
        refusal(capsys, "--db", "x.db") == "charter: the key file `x.db.key` is malformed\n" + hint
    )
    assert listing(tmp_path) == ["x.db.key"]


def test_a_key_that_does_not_open_the_databases_secrets_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A well-formed key of another database (or a new one, the key file lost): refused at
    start, not found when an approval or a signature first needs it."""
    from api.cli_serve_checks import sealed_refusal
    from api.http.app import open_service
    from policy import identities

    service = open_service(tmp_path / "x.db")
    identities.create(service.store, service.sealer, "me")
    service.store.close()
    monkeypatch.setenv("CHARTER_SECRET_KEY", "00" * 32)
    err = refusal(capsys, "--db", "x.db", "--port", "0")
    assert err.startswith("charter: the secret key does not open this database's secrets\n")
    assert "help: serve it with the key that sealed them" in err
    monkeypatch.delenv("CHARTER_SECRET_KEY")  # the key file beside it opens them
    service = open_service(tmp_path / "x.db")
    assert sealed_refusal(service.store, service.sealer) is None
    service.store.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    db = tmp_path / "charter.db"
    process = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "serve", "--db", str(db), "--port", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        yield process, db
    finally:
        process.terminate()
        process.wait(timeout=20)
        assert process.stdout is not None
        process.stdout.close()


def _line_with(process: subprocess.Popen[bytes], text: bytes, seconds: float) -> str:
    assert process.stdout is not None
    fd = process.stdout.fileno()
    deadline = time.monotonic() + seconds
    seen = b""
    while text not in seen or not seen.endswith(b"\n"):
        left = deadline - time.monotonic()
        assert left > 0 and process.poll() is None, seen
        if select.select([fd], [], [], left)[0]:
            seen += os.read(fd, 4096)
    return next(line for line in seen.decode().splitlines() if text.decode() in line)


def test_port_0_serves_on_a_free_port_and_says_which(
    served: tuple[subprocess.Popen[bytes], Path],
) -> None:
    """It said `on http://127.0.0.1:0`, and nobody could learn the port."""
    process, db = served
    line = _line_with(process, b"serving ", 30)
    url = line.split(" on ")[1].split()[0]
    port = int(url.rsplit(":", 1)[1])
    assert line == f"serving {db} on http://127.0.0.1:{port} (1 worker(s))" and port > 0
    wait_ready(url, process, 30, path="/healthz")
