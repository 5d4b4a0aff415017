"""A real PostgreSQL server for the tests, started from its binaries in a temporary dir.

The server binaries are found with `pg_config --bindir` or under /usr/lib/postgresql
(the newest version there). `initdb` refuses to run as root, so as root the data
directory belongs to the `postgres` user and the server runs as it (`runuser`); as
anyone else it runs as that user. It listens on a unix socket in its own directory only
(no TCP port to collide with another test run), with fsync off: a test's data need not
outlive a crash. Each test gets a database of its own (`PgServer.database`).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg

SUPERUSER = "postgres"
SERVER_USER = "postgres"  # who runs the server when the tests run as root


def bindir() -> Path | None:
    """Where `initdb`, `pg_ctl` and `postgres` are, or None when they are not installed."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            found = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, check=True
            )
            candidates.append(Path(found.stdout.strip()))
    versions = glob.glob("/usr/lib/postgresql/*/bin")
    versions.sort(key=lambda path: int(Path(path).parent.name.split(".")[0]), reverse=True)
    candidates += [Path(path) for path in versions]
    for candidate in candidates:
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    return None


class PgServer:
    """A server of its own in `root`, reached through the socket in `root/socket`."""

    def __init__(self, root: Path) -> None:
        found = bindir()
        if found is None:
            raise RuntimeError("no postgresql server binaries (run `make install`)")
        self.bin = found
        self.root = root
        self.data = root / "data"
        self.socket = root / "socket"
        # False: fsync and synchronous commits off (a test's data need not outlive a
        # crash); True: PostgreSQL's defaults, as a deployment runs it (the benchmark).
        self.durable = False
        self._as: list[str] = []
        if os.geteuid() == 0:
            self._as = ["runuser", "-u", SERVER_USER, "--"]

    def _run(self, *command: str) -> None:
        subprocess.run([*self._as, *command], check=True, capture_output=True, cwd=self.root)

    def start(self) -> None:
        self.socket.mkdir()
        if self._as:
            user = pwd.getpwnam(SERVER_USER)
            for path in (self.root, self.socket):
                os.chown(path, user.pw_uid, user.pw_gid)
        self._run(
            str(self.bin / "initdb"), "-D", str(self.data), "-U", SUPERUSER, "--auth=trust",
            "-E", "UTF8", "--no-sync", "--no-instructions",
        )  # fmt: skip
        self.start_again()

    def start_again(self) -> None:
        """Start the server of a data directory made by `start` (after `stop`)."""
        settings = (
            f"-c listen_addresses='' -c unix_socket_directories='{self.socket}' "
            "-c max_connections=200 -c shared_buffers=32MB"
        )
        if not self.durable:
            settings += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"),
            "-o", settings, "-w", "-t", "60", "start",
        )  # fmt: skip

    def stop(self, mode: str = "immediate") -> None:
        """Stop the server: `immediate` (its data is thrown away after), or `fast` (what
        was committed is there when it starts again: with synchronous_commit off, an
        immediate stop loses the last commits)."""
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@/{database}?host={self.socket}"

    def database(self) -> str:
        """A new, empty database; its URL."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.url(), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return self.url(name)

    def sql(
        self, url: str, statement: str, params: tuple[object, ...] = ()
    ) -> list[tuple[object, ...]]:
        """A statement run behind the store's back, in a connection of its own."""
        with psycopg.connect(url, autocommit=True) as connection:
            cursor = connection.execute(statement, params)
            return cursor.fetchall() if cursor.description is not None else []


@contextlib.contextmanager
def running() -> Iterator[PgServer]:
    root = Path(tempfile.mkdtemp(prefix="charter-pg-"))
    server = PgServer(root)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def in_schema(url: str, schema: str) -> str:
    """`url` with its tables in `schema` (made here) rather than `public`: a fresh store
    in a database that has one already, cheaper than a database of its own."""
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'CREATE SCHEMA "{schema}"')
    return f"{url}&options=-csearch_path%3D{schema}"
