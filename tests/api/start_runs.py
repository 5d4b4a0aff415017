"""`charter serve` run as a process of its own on loopback (`--port 0`), and small disks to
run it on: what the start-up tests share."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from unittest.mock import patch

import httpx
import pytest

from api.cli import main
from tests.api.conftest import wait_ready

ROOT = Path(__file__).resolve().parents[2]
CALL = {"agent": "demo-support", "tool": "mail.send",
        "args": {"to": "bob@example.com", "subject": "hi", "body": "hello"}}  # fmt: skip
# A workspace of its own: small (a first start on a disk of a few hundred KiB), with the
# demo's profile and a toolset that requires a connection (a demo connection is seeded).
POLICY = """
toolset mail {
  tool send(to: str, subject: str, body: str)
}
toolset vault {
  connection required
  tool read(key: str)
}
role mailer {
  allow mail.send where args.to endswith "@example.com"
}
profile support {
  roles mailer
  hooks none
}
"""


def workspace(where: Path) -> Path:
    folder = where / "ws"
    folder.mkdir(exist_ok=True)
    (folder / "policy.charter").write_text(POLICY)
    return folder


def command(db: Path, *more: str) -> list[str]:
    return [sys.executable, "-m", "api.cli", "serve", "--db", str(db), "--port", "0", *more]


def environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "CHARTER_SECRET_KEY"}


class Served:
    """A `charter serve` process, ready: its URL and the admin token's header."""

    def __init__(self, db: Path, *more: str) -> None:
        self.errors = db.with_name(f"{db.name}.{os.urandom(4).hex()}.stderr")
        with self.errors.open("w") as errors:
            self.process = subprocess.Popen(
                command(db, *more), cwd=ROOT, env=environment(), stdout=subprocess.PIPE,
                stderr=errors, text=True,
            )  # fmt: skip
        self.out: list[str] = []
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.out.append(line)
            found = re.match(r"serving .* on (http://\S+) ", line)
            if found:
                self.url = found.group(1)
                break
        else:
            self.process.wait()
            self.process.stdout.close()
            raise AssertionError(f"not served: {self.errors.read_text()}")
        wait_ready(self.url, self.process, 60)
        token = Path(f"{db}.admin-token").read_text().strip()
        self.headers = {"Authorization": f"Bearer {token}"}

    def decide(self) -> httpx.Response:
        return httpx.post(f"{self.url}/v1/decisions", json=CALL, headers=self.headers, timeout=30)

    def kill(self) -> None:
        """SIGKILL: nothing of the store is closed, its `-wal` stays as it was."""
        self.process.send_signal(signal.SIGKILL)
        self._ended()

    def stop(self) -> None:
        self.process.terminate()
        self._ended()

    def _ended(self) -> None:
        self.process.wait(30)
        if self.process.stdout is not None:
            self.process.stdout.close()


def refusal(db: Path, *more: str) -> str:
    """`charter serve` on `db` refused (exit 2, nothing on stdout), run in this process
    (a refusal comes before anything is served): its stderr."""
    out, err = io.StringIO(), io.StringIO()

    def serve(app: object, *args: object, **kwargs: object) -> None:
        raise AssertionError("served")

    with redirect_stdout(out), redirect_stderr(err), patch("api.cli_serve.run_uvicorn", serve):
        code = main(command(db, *more)[3:])
    assert (code, out.getvalue()) == (2, ""), out.getvalue() + err.getvalue()
    return err.getvalue()


def files(folder: Path) -> dict[str, bytes]:
    """What is in `folder` (not the tests' own stderr files): each file's bytes."""
    return {
        p.name: p.read_bytes()
        for p in sorted(folder.iterdir())
        if p.is_file() and not p.name.endswith(".stderr")
    }


@contextmanager
def small_disk(where: Path, kib: int) -> Iterator[Path]:
    """A tmpfs of `kib` KiB mounted at `where/disk` (root only: skipped otherwise), a
    file system that really fills up; `resize(disk, kib)` changes its size."""
    disk = where / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={kib}k,mode=0700", "tmpfs", str(disk)],
        capture_output=True, text=True,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root): {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def resize(disk: Path, kib: int) -> None:
    subprocess.run(["mount", "-o", f"remount,size={kib}k", str(disk)], check=True)


def fill(disk: Path) -> Path:
    """A file that takes every block left on `disk`."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as handle:
        try:
            while handle.write(b"\0" * 4096):
                pass
        except OSError:
            pass
    return filler
