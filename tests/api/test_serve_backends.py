"""`charter serve --db URL` and `--key-file`, as processes of their own on loopback: an
`sqlite:///` URL served end to end, the key file made 0600 on a first start and taken
again, another key refused; and `make serve`'s command, run as the Makefile gives it."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import httpx

from tests.api.conftest import free_port, wait_ready
from tests.api.start_runs import CALL, environment, workspace

ROOT = Path(__file__).resolve().parents[2]
CHARTER = [sys.executable, "-m", "api.cli"]


class Server:
    """`charter serve` with `args`, run in `cwd`, until it says where it serves."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.process = subprocess.Popen(
            [*CHARTER, "serve", "--port", "0", *args], cwd=cwd, env=environment(),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self.out: list[str] = []
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.out.append(line)
            found = re.match(r"serving (.*) on (http://\S+) ", line)
            if found:
                self.served, self.url = found.group(1), found.group(2)
                break
        else:
            self.process.wait(30)
            raise AssertionError(f"not served: {''.join(self.out)}")
        wait_ready(self.url, self.process, 60)

    def decide(self, token: str) -> httpx.Response:
        auth = {"Authorization": f"Bearer {token}"}
        return httpx.post(f"{self.url}/v1/decisions", json=CALL, headers=auth, timeout=30)

    def stop(self) -> None:
        self.process.terminate()
        self.process.communicate(timeout=30)


def charter(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A `charter` command that ends (a refusal, a token, a check): its outcome."""
    return subprocess.run(
        [*CHARTER, *args], cwd=cwd, env=environment(), capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip


def test_an_sqlite_url_is_served_end_to_end(tmp_path: Path) -> None:
    """`--db sqlite:///tmp/x.db` is the file `tmp/x.db` under the working directory (three
    slashes: a relative path), with its files beside it as for `--db tmp/x.db`;
    `charter token` and `charter db check` take the URL, and its four-slash form."""
    (tmp_path / "tmp").mkdir()
    policy = str(workspace(tmp_path))
    server = Server(tmp_path, "--db", "sqlite:///tmp/x.db", "--workspace", policy)
    try:
        assert server.served == "tmp/x.db"
        db = tmp_path / "tmp" / "x.db"
        token = Path(f"{db}.admin-token").read_text().strip()
        first = server.decide(token)
        assert first.status_code == 200, first.text
        assert (first.json()["effect"], first.json()["seq"]) == ("allow", 1)
        assert stat.S_IMODE(os.stat(f"{db}.key").st_mode) == 0o600
        issued = charter(tmp_path, "token", "--db", f"sqlite:///{db}", "--scope", "decide")
        assert issued.returncode == 0, issued.stderr
        assert server.decide(issued.stdout.strip()).json()["seq"] == 2
    finally:
        server.stop()
    beside = {p.name for p in (tmp_path / "tmp").iterdir()}
    assert {"x.db", "x.db.admin-token", "x.db.key", "x.db.mark"} <= beside
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp", "ws"]  # (nothing `sqlite:`)
    checked = charter(tmp_path, "db", "check", "--db", "sqlite:///tmp/x.db")
    assert (checked.returncode, checked.stdout) == (0, "tmp/x.db: no damage found\n")


def test_a_postgresql_url_is_refused_where_it_cannot_be_served(tmp_path: Path) -> None:
    """`charter db check` checks SQLite files only, and says so; `charter serve` on a
    PostgreSQL URL without `--key-file` is D0203; another scheme is D0201. Each exits 2
    and makes nothing."""
    url = "postgresql://app:pw@127.0.0.1:1/charter"
    checked = charter(tmp_path, "db", "check", "--db", url)
    assert checked.returncode == 2
    assert checked.stderr.startswith(
        "charter: `charter db check` checks an SQLite database file; "
        "`postgresql://app:***@127.0.0.1:1/charter` is a PostgreSQL database\nhelp: give "
        "a file path or a `sqlite:///` URL"
    )
    served = charter(tmp_path, "serve", "--db", url, "--port", "0")
    assert served.returncode == 2 and "error[D0203]" in served.stderr
    assert "--key-file PATH" in served.stderr and "pw" not in served.stderr
    other = charter(tmp_path, "serve", "--db", "mysql://db/charter", "--port", "0")
    assert other.returncode == 2 and other.stderr.startswith("charter: error[D0201]:")
    assert list(tmp_path.iterdir()) == []


def test_the_key_file_is_made_0600_taken_again_and_another_key_refused(tmp_path: Path) -> None:
    """A first start with `--key-file keys/k.key` makes that file (0600), and none beside
    the database; a restart with it serves the same secrets (the demo agent's identity is
    sealed with it). A restart with a key file not there is refused, and the key it would
    have made is not left behind; one with another key is refused too."""
    (tmp_path / "keys").mkdir()
    policy = str(workspace(tmp_path))
    db = tmp_path / "x.db"
    server = Server(tmp_path, "--db", str(db), "--key-file", "keys/k.key", "--workspace", policy)
    try:
        key = tmp_path / "keys" / "k.key"
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        made = key.read_bytes()
        assert len(bytes.fromhex(made.decode())) == 32
        assert not Path(f"{db}.key").exists()  # (the key is where it was told to be)
        token = Path(f"{db}.admin-token").read_text().strip()
        assert server.decide(token).status_code == 200
    finally:
        server.stop()

    again = Server(tmp_path, "--db", f"sqlite:///{db}", "--key-file", "keys/k.key")
    try:
        assert again.decide(token).json()["seq"] == 2
        assert key.read_bytes() == made
    finally:
        again.stop()

    missing = charter(tmp_path, "serve", "--db", str(db), "--key-file", "keys/new.key",
                      "--port", "0")  # fmt: skip
    assert missing.returncode == 2, missing.stdout
    assert missing.stderr.startswith(
        "charter: no key file at `keys/new.key`, and the database holds secrets sealed "
        "with a key: a new key would open none of them\nhelp: give the key they were "
        "sealed with: `--key-file PATH`"
    )
    assert sorted(p.name for p in (tmp_path / "keys").iterdir()) == ["k.key"]

    other = tmp_path / "keys" / "other.key"
    other.write_text(os.urandom(32).hex())
    other.chmod(0o600)
    wrong = charter(tmp_path, "serve", "--db", str(db), "--key-file", str(other), "--port", "0")
    assert wrong.returncode == 2
    assert "the secret key does not open this database's secrets" in wrong.stderr
    nowhere = charter(tmp_path, "serve", "--db", "y.db", "--key-file", "nodir/k.key")
    assert nowhere.returncode == 2 and "no directory `nodir`" in nowhere.stderr
    assert not (tmp_path / "y.db").exists()


def test_make_serve_runs_as_the_makefile_gives_it(tmp_path: Path) -> None:
    """`make serve`'s command line (`make -n`: printed, not run), run from a copy of the
    repository's `fixtures/workspace` on a free port: the README's first start, a path
    `--db` with the key and the token beside it, and its request answered."""
    printed = subprocess.run(
        ["make", "-s", "-n", "serve"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    line = next(line for line in printed.splitlines() if " serve " in line)
    args = line.split()
    assert args[:2] == [".venv/bin/charter", "serve"]
    assert args[2:] == ["--db", "charter.db", "--workspace", "fixtures/workspace",
                        "--host", "127.0.0.1", "--port", "8080"]  # fmt: skip
    shutil.copytree(ROOT / "fixtures" / "workspace", tmp_path / "fixtures" / "workspace")
    port = free_port()
    process = subprocess.Popen(
        [*CHARTER, *args[1:-1], str(port)], cwd=tmp_path, env=environment(),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, process, 60)
        token = (tmp_path / "charter.db.admin-token").read_text().strip()
        assert stat.S_IMODE((tmp_path / "charter.db.key").stat().st_mode) == 0o600
        call = {"agent": "demo-support", "tool": "mail.send",
                "args": {"to": "bob@example.com", "subject": "hi", "body": "hello"}}  # fmt: skip
        answer = httpx.post(f"{url}/v1/decisions", json=call,
                            headers={"Authorization": f"Bearer {token}"})  # fmt: skip
        assert answer.json()["effect"] == "allow", answer.text
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=30)
    assert f"serving charter.db on http://127.0.0.1:{port} (1 worker(s))" in output
