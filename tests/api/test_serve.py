"""`charter serve` as a subprocess on a fresh database: the README's request works as printed."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.service import metricsshare
from tests.api.conftest import free_port, wait_ready

ROOT = Path(__file__).resolve().parents[2]


def test_serve_first_start_and_the_readme_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    db = tmp_path / "charter.db"
    process = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "serve", "--db", str(db), "--workspace",
         str(ROOT / "fixtures" / "workspace"), "--port", str(port), "--access-log"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, process, 30)
        token_file = Path(f"{db}.admin-token")
        assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
        token = token_file.read_text().strip()
        path, headers, body = _readme_request()
        assert headers["Authorization"] == "Bearer $(cat charter.db.admin-token)"
        headers["Authorization"] = f"Bearer {token}"
        response = httpx.post(f"{url}{path}", headers=headers, content=body)
        assert response.status_code == 200, response.text
        assert response.json()["effect"] == "allow"  # the README promises this
        eve = body.replace(b"bob@example.com", b"eve@elsewhere.net")  # and a deny for this
        assert httpx.post(f"{url}{path}", headers=headers, content=eve).json()["effect"] == "deny"
        # Reasons name files relative to the workspace, never where the server keeps them.
        locations = [r["location"] for r in response.json()["reasons"] if "location" in r]
        assert locations and all(not loc.startswith(("/", str(ROOT))) for loc in locations)
        assert all(loc.split(":")[0].endswith(".charter") for loc in locations)
        metrics = httpx.get(f"{url}/metrics").text
        assert "charter_decisions_total" in metrics and "charter_policy_revision 1" in metrics
        assert httpx.get(f"{url}/openapi.json").json()["paths"]["/v1/decisions"]["post"]
        _issue_tokens_beside_the_server(tmp_path, db, url, capsys)
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=10)
    assert output.count(token) == 1  # shown once: the access log names no header
    assert '"POST /v1/decisions HTTP/1.1" 200' in output
    assert '"GET /v1/decisions HTTP/1.1" 403' in output  # the decide token's refusal


def _readme_request() -> tuple[str, dict[str, str], bytes]:
    """The README's curl request as printed: its path, its headers and its body."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    curl = re.search(r"curl -s http://127\.0\.0\.1:8080(\S+) \\\n(.*?)'\n", readme, re.S)
    assert curl, "the README's curl request has moved"
    headers = dict(tuple(h.split(": ", 1)) for h in re.findall(r"-H [\"'](.*?)[\"'] \\", curl[2]))
    body = re.search(r"-d '(.*)", curl[2])
    assert body
    return curl[1], headers, body[1].encode()


def _issue_tokens_beside_the_server(
    tmp_path: Path, db: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`charter token` on the database a server is serving: the token works at once, with
    its scope's rights only; a missing agent or database is exit 2 and creates nothing."""
    from api.cli import main

    capsys.readouterr()
    assert main(["token", "--db", str(db), "--scope", "decide", "--name", "ci"]) == 0
    token = capsys.readouterr().out.strip()
    auth = {"Authorization": f"Bearer {token}"}
    call = {"agent": "demo-support", "tool": "mail.send",
            "args": {"to": "bob@example.com", "subject": "hi", "body": "hello"}}  # fmt: skip
    assert httpx.post(f"{url}/v1/decisions", headers=auth, json=call).status_code == 200
    assert httpx.get(f"{url}/v1/decisions", headers=auth).status_code == 403  # admin only
    assert main(["token", "--db", str(db), "--scope", "agent", "--agent", "nobody"]) == 2
    assert main(["token", "--db", str(db), "--scope", "decide", "--expires-in", "0"]) == 2
    assert main(["token", "--db", str(db), "--scope", "decide", "--expires-in", "60"]) == 0
    expiring = {"Authorization": f"Bearer {capsys.readouterr().out.strip()}"}
    listed = httpx.get(f"{url}/v1/tokens", headers=auth)  # (a decide token may not list)
    assert listed.status_code == 403
    assert httpx.post(f"{url}/v1/decisions", headers=expiring, json=call).status_code == 200
    missing = tmp_path / "typo.db"
    assert main(["token", "--db", str(missing), "--scope", "admin"]) == 2
    assert "no database at" in capsys.readouterr().err and not missing.exists()


def test_each_worker_gets_a_socket_of_its_own_on_the_same_port() -> None:
    """The socket handed to `--workers N` is rebuilt in each worker (it is pickled into
    the spawned process) as a new SO_REUSEPORT socket on the parent's address, so the
    kernel spreads connections over the workers; the parent's keeps the port and never
    listens, so it takes no connection."""
    import pickle
    import socket

    from api.cli_serve import listening_socket

    parent = listening_socket("127.0.0.1", 0)
    first, second = pickle.loads(pickle.dumps(parent)), pickle.loads(pickle.dumps(parent))
    try:
        address = parent.getsockname()
        assert first.getsockname() == second.getsockname() == address
        assert len({parent.fileno(), first.fileno(), second.fileno()}) == 3
        assert first.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) == 1
        assert first.proto == socket.IPPROTO_TCP  # (TCP_NODELAY on what it accepts)
        first.listen()
        second.listen()
        clients = [socket.create_connection(address, timeout=5) for _ in range(16)]
        accepted = 0
        for listener in (first, second):
            listener.setblocking(False)
            while True:
                try:
                    listener.accept()[0].close()
                except BlockingIOError:
                    break
                accepted += 1
        assert accepted == 16  # every connection went to a worker's socket
        for client in clients:
            client.close()
        with socket.socket() as stranger, pytest.raises(OSError):
            stranger.bind(address)  # the port stays the server's
        with pytest.raises(OSError):  # and a second server on it fails, as without reuse
            listening_socket("127.0.0.1", address[1]).close()
    finally:
        for sock in (parent, first, second):
            sock.close()


def test_two_workers_share_the_file_and_log_every_decision_once(tmp_path: Path) -> None:
    """`charter serve --workers 2`: two processes on one database (they take turns on the
    writer lock, policy/store/writerlock.py). 8 concurrent clients on fresh connections
    (so both workers serve) and two policy uploads meanwhile: every decision answered,
    logged once, gap-free, and never on an older revision than one logged before it."""
    import asyncio

    port = free_port()
    db = tmp_path / "charter.db"
    process = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "serve", "--db", str(db), "--workspace",
         str(ROOT / "fixtures" / "workspace"), "--port", str(port), "--workers", "2",
         "--turn-lifetime", "7"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process, 60, in_a_row=4)  # a few answers in a row: both workers up
        token = Path(f"{db}.admin-token").read_text().strip()
        headers = {"Authorization": f"Bearer {token}"}
        for _ in range(12):  # (fresh connections, spread over both workers by the kernel)
            turn = httpx.post(f"{url}/v1/turns", json={"agent": "demo-support"},
                              headers=headers).json()  # fmt: skip
            assert turn["ends_at"] - turn["created_at"] == 7_000
        call = {"agent": "demo-support", "tool": "mail.send",
                "args": {"to": "bob@example.com", "subject": "hi", "body": "hello"}}  # fmt: skip

        workspace = sorted((ROOT / "fixtures" / "workspace").glob("*.charter"))
        uploaded = asyncio.Event()

        async def client() -> list[int]:
            """Rounds of 10 decisions, each round on a new connection (the kernel spreads
            them over the workers): at least 5, and until the uploads are done and one
            round more."""
            seqs: list[int] = []
            last = False
            for round_no in range(200):
                last = uploaded.is_set() and round_no >= 4
                async with httpx.AsyncClient(base_url=url, headers=headers) as http:
                    for _ in range(10):
                        response = await http.post("/v1/decisions", json=call)
                        assert response.status_code == 200, response.text
                        seqs.append(response.json()["seq"])
                if last:
                    break
            return seqs

        async def uploads() -> None:
            """Two new revisions while the clients decide, through whichever worker."""
            async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
                for n in range(2):
                    await asyncio.sleep(0.05)
                    files = [{"path": f.name, "text": f.read_text() + f"\n# upload {n}\n"}
                             for f in workspace]  # fmt: skip
                    response = await http.put("/v1/policy", json={"files": files})
                    assert response.status_code == 201, response.text
            uploaded.set()

        async def everyone() -> list[list[int]]:
            answers = asyncio.gather(*(client() for _ in range(8)))
            _, done = await asyncio.gather(uploads(), answers)
            return done

        seqs = sorted(s for one in asyncio.run(everyone()) for s in one)
        assert seqs == list(range(1, len(seqs) + 1))  # each its own number, no gaps
        logged: list[dict[str, Any]] = []
        while len(logged) < len(seqs):
            after = logged[-1]["seq"] if logged else 0
            page = httpx.get(f"{url}/v1/decisions?after_seq={after}&limit=1000", headers=headers)
            assert page.json()["decisions"], "the log ends before the answers do"
            logged += page.json()["decisions"]
        assert [d["seq"] for d in logged] == seqs
        # Whichever worker logged it, no decision comes after one on a newer revision:
        # each checks for the other's commits inside its own write transaction.
        revisions = [d["revision"] for d in logged]
        assert revisions == sorted(revisions) and revisions[-1] == 3, set(revisions)
        # /metrics gives the server's totals whichever worker answers (each publishes its
        # counters about once a second; fresh connections reach both workers), and both
        # workers decided (their published files).
        deadline = time.monotonic() + 15
        agreed = 0
        while agreed < 6:  # six scrapes in a row, on fresh connections, give the totals
            lines = httpx.get(f"{url}/metrics").text.splitlines()
            value = {x.split()[0]: x.split()[-1] for x in lines if x.startswith("charter_")}
            totals = (int(value["charter_decision_request_seconds_count"]),
                      int(value['charter_decisions_total{effect="allow"}']),
                      value["charter_serving_processes"])  # fmt: skip
            agreed = agreed + 1 if totals == (len(seqs), len(seqs), "2") else 0
            assert time.monotonic() < deadline, totals
            time.sleep(0.05)
        files = Path(f"{db}.metrics").glob("*.bin")
        published = [metricsshare.read_counters(f) or {} for f in files]
        assert len(published) == 2 and all(sum(p["counts"]) for p in published), published
    finally:
        process.terminate()
        process.wait(timeout=20)
