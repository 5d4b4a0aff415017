"""A real `charter serve` holds steady memory across policy uploads.

Each upload is a new revision, used at once (decisions, a batch, a log page, the agent's
tool listing, the revision history). The worker's resident memory (RSS, /proc) is read
after every upload; once the snapshot cache is full (`WARM` uploads: 8 cached revisions
and the 4 last prepared ones), the median of the last 10 readings may be at most
`BOUND_MIB` above the median of the 10 from upload `WARM` on. A leak of 0.75-0.9 MB a
revision (a snapshot that is a reference cycle) grows it by 27 MB over 30 uploads.

`make test` makes 60 uploads (`WARM` 20); a long run makes 500
(`CHARTER_TEST_UPLOADS=500`, `WARM` 50: RSS after 500 uploads within 12 MiB of RSS after
the first 50), with the same bound: about 100 s, so outside `make fuzz`'s budget.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import free_port, wait_ready

ROOT = Path(__file__).resolve().parents[2]
WORKSPACE = ROOT / "fixtures" / "workspace"
UPLOADS = int(os.environ.get("CHARTER_TEST_UPLOADS", "60"))
WARM = 20 if UPLOADS < 100 else 50
BOUND_MIB = 12.0
CALL = {"agent": "demo-support", "tool": "mail.send",
        "args": {"to": "bob@example.com", "subject": "hi", "body": "hello"}}  # fmt: skip


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _use(client: httpx.Client, revision: int) -> None:
    for _ in range(3):
        answer = client.post("/v1/decisions", json=CALL)
        assert answer.status_code == 200 and answer.json()["revision"] == revision, answer.text
    assert client.post("/v1/decisions/batch", json={"calls": [CALL] * 20}).status_code == 200
    paths = ["/v1/decisions?limit=100", "/v1/revisions"]
    if revision % 5 == 0:  # (a listing asks z3 about each tool: the slow part)
        paths.append("/v1/agents/demo-support/tools")
    for path in paths:
        assert client.get(path).status_code == 200, path


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")
def test_a_worker_holds_steady_memory_over_uploads(tmp_path: Path) -> None:
    assert UPLOADS >= WARM + 20
    port = free_port()
    db = tmp_path / "charter.db"
    process = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "serve", "--db", str(db), "--workspace",
         str(WORKSPACE), "--port", str(port)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    files = [{"path": p.name, "text": p.read_text()} for p in sorted(WORKSPACE.glob("*.charter"))]
    rss: list[float] = []
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, process, 60)
        token = Path(f"{db}.admin-token").read_text().strip()
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
            for number in range(UPLOADS):
                mine = {"path": "upload.charter", "text": f"# upload {number}\n"}
                put = client.put("/v1/policy", json={"files": [*files, mine]})
                assert put.status_code == 201, put.text
                _use(client, put.json()["revision"])
                rss.append(_rss_mib(process.pid))
    finally:
        process.terminate()
        process.wait(20)
    warm = statistics.median(rss[WARM : WARM + 10])
    end = statistics.median(rss[-10:])
    assert end - warm <= BOUND_MIB, (
        f"RSS grew {end - warm:.1f} MiB from upload {WARM} to {UPLOADS}: "
        f"{[round(x) for x in rss[::10]]}"
    )
