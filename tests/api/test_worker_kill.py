"""`charter serve --workers 2` when a worker is killed (SIGKILL): uvicorn's parent starts
another, every decision answered is logged once and gap-free, and /metrics counts every
decision logged, at once and after the kill, whichever worker answers."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.api.conftest import free_port, wait_ready

ROOT = Path(__file__).resolve().parents[2]
CALL = {"agent": "demo-support", "tool": "mail.send",
        "args": {"to": "bob@example.com", "subject": "hi", "body": "hello"}}  # fmt: skip


def _workers(parent: int) -> set[int]:
    """The serving processes uvicorn's parent spawned (not multiprocessing's tracker)."""
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    return {
        int(pid) for pid in children if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    }


def _scrape(url: str) -> dict[str, float]:
    """The samples of one scrape (a fresh connection: either worker may answer), checked
    against the text format's rules for what charter writes."""
    text = httpx.get(f"{url}/metrics").text
    samples: dict[str, float] = {}
    typed: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
        elif not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            family = re.sub(r"_(bucket|sum|count)$", "", name.split("{")[0])
            assert family in typed, line  # TYPE comes before a family's samples
            samples[name] = float(value)
    buckets = [
        v for k, v in samples.items() if k.startswith("charter_decision_request_seconds_bucket")
    ]
    assert buckets == sorted(buckets), text  # cumulative
    assert buckets[-1] == samples["charter_decision_request_seconds_count"]  # (+Inf last)
    return samples


def _decide(url: str, headers: dict[str, str], connections: int) -> int:
    """Five decisions on each of `connections` fresh connections (spread over both
    workers by the kernel); how many were answered."""
    for _ in range(connections):
        with httpx.Client(base_url=url, headers=headers) as http:
            for _ in range(5):
                assert http.post("/v1/decisions", json=CALL).status_code == 200
    return connections * 5


def test_a_killed_worker_is_replaced_and_its_decisions_stay_counted(tmp_path: Path) -> None:
    port = free_port()
    db = tmp_path / "charter.db"
    process = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "serve", "--db", str(db), "--workspace",
         str(ROOT / "fixtures" / "workspace"), "--port", str(port), "--workers", "2"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process, 60, in_a_row=4)
        headers = {"Authorization": f"Bearer {Path(f'{db}.admin-token').read_text().strip()}"}
        decided = _decide(url, headers, 8)
        allowed = 'charter_decisions_total{effect="allow"}'
        # Whichever worker answers, every decision made so far is counted at once.
        for _ in range(8):
            samples = _scrape(url)
            assert samples[allowed] == decided
            assert samples["charter_decision_request_seconds_count"] == decided
        before = _workers(process.pid)
        assert len(before) == 2
        for pid in before:
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while len(_workers(process.pid) - before) < 2:  # the parent starts two others
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        wait_ready(url, process, 60, in_a_row=4)
        for _ in range(8):  # the killed workers' decisions are still counted
            assert _scrape(url)[allowed] == decided
        decided += _decide(url, headers, 8)
        logged = httpx.get(f"{url}/v1/decisions?limit=1000", headers=headers).json()
        seqs = [d["seq"] for d in logged["decisions"]]
        assert seqs == list(range(1, decided + 1))  # each once, no gaps
        for _ in range(8):
            samples = _scrape(url)
            assert samples[allowed] == decided
            assert samples["charter_serving_processes"] == 4  # (two exited, still summed)
    finally:
        process.terminate()
        process.wait(timeout=30)
