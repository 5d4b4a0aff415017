"""`python -m bench.start_bench` (run by `make bench`): how long a `charter serve` worker
takes to serve a stored revision of a large policy, and how much memory it holds.

For each size (the decision benchmark's workload: 100 profiles of 10 roles, 5,000
toolset tools, roles 100 to a file) a first `charter serve --workspace` checks and
stores the policy and stops. Then, `--repeats` times, a `charter serve` on that database
alone (one worker, a process of its own) is timed from its start until `/readyz`
answers 200: the latest revision compiled, ready to decide (engine/served.py: the
served part of the policy, parsed at its outline's ranges). It then decides the
workload's calls for an agent of each of 10 profiles, in batches of 100, and its
resident memory (VmRSS, and the peak VmHWM) is read from /proc. The figures go into
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.report import load_average, machine_info
from bench.targets import Conditions, Row, publish
from bench.workload import Workload, generate

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- start-bench:begin -->", "<!-- start-bench:end -->"
TARGET_READY_S = 3.0  # 100,000 roles: a worker serves a stored revision
TARGET_RSS_MB = 200.0  # 100,000 roles: a serving worker's resident memory
AGENTS = 10


@dataclass
class StartResult:
    roles: int
    store_s: float  # the first start: check, compile and store the policy
    ready_s: float  # median start of a worker on the stored revision, until ready
    rss_mb: float  # VmRSS after deciding
    peak_mb: float  # VmHWM
    decisions: int
    allowed: int


class _Server:
    def __init__(self, db: Path, *more: str) -> None:
        self.started = time.perf_counter()
        command = [sys.executable, "-m", "api.cli", "serve", "--db", str(db), "--port", "0"]
        self.process = subprocess.Popen(
            [*command, *more], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        for line in self.process.stdout:
            found = re.match(r"serving .* on (http://\S+) ", line)
            if found:
                self.url = found.group(1)
                break
        else:
            raise RuntimeError("charter serve did not start")
        while True:
            try:
                if httpx.get(f"{self.url}/readyz", timeout=60).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if self.process.poll() is not None:
                raise RuntimeError("charter serve exited")
            time.sleep(0.01)
        self.ready_s = time.perf_counter() - self.started
        token = Path(f"{db}.admin-token").read_text().strip()
        self.headers = {"Authorization": f"Bearer {token}"}

    def post(self, path: str, body: Any) -> Any:
        answer = httpx.post(f"{self.url}{path}", json=body, headers=self.headers, timeout=60)
        answer.raise_for_status()
        return answer.json()

    def memory_mb(self) -> tuple[float, float]:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        kb = {k: int(v.split()[0]) for k, v in re.findall(r"^(VmRSS|VmHWM):\s+(.*)$", status, re.M)}
        return kb["VmRSS"] / 1024, kb["VmHWM"] / 1024

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(60)
        if self.process.stdout is not None:
            self.process.stdout.close()


def _decide(server: _Server, work: Workload) -> tuple[int, int]:
    """The workload's calls, each for an agent of its profile (of the first `AGENTS`)."""
    identity = server.post("/v1/identities", {"label": "bench"})["id"]
    agents = {
        name: server.post("/v1/agents", {"name": name, "profile": name, "identity": identity})["id"]
        for name in sorted(work.profiles)[:AGENTS]
    }
    calls = [
        {"agent": agents[r.profile], "tool": r.tool, "args": dict(r.args)}
        for r in work.requests
        if r.profile in agents
    ]
    decided = allowed = 0
    for at in range(0, len(calls), 100):
        answers = server.post("/v1/decisions/batch", {"calls": calls[at : at + 100]})["decisions"]
        decided += len(answers)
        allowed += sum(a["effect"] == "allow" for a in answers)
    return decided, allowed


def run_size(roles: int, requests: int, repeats: int) -> StartResult:
    work = generate(roles=roles, requests=requests)
    with tempfile.TemporaryDirectory() as where:
        folder = Path(where) / "ws"
        for path, text in work.sources:
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_text(text, encoding="utf-8")
        db = Path(where) / "charter.db"
        first = _Server(db, "--workspace", str(folder))
        store_s = first.ready_s
        first.stop()
        times = []
        for n in range(repeats):
            server = _Server(db)
            times.append(server.ready_s)
            if n < repeats - 1:
                server.stop()
        try:
            decided, allowed = _decide(server, work)
            rss, peak = server.memory_mb()
        finally:
            server.stop()
    return StartResult(roles, store_s, statistics.median(times), rss, peak, decided, allowed)


def targets(results: list[StartResult]) -> list[Row]:
    rows = []
    for r in results:
        if r.roles == 100_000:
            rows.append(
                Row(
                    f"100,000 roles: a worker serves a stored revision in <= "
                    f"{TARGET_READY_S:.0f} s",
                    f"{r.ready_s:.2f} s",
                    r.ready_s <= TARGET_READY_S,
                )
            )
            rows.append(
                Row(
                    f"100,000 roles: a serving worker's peak RSS <= {TARGET_RSS_MB:.0f} MB",
                    f"{r.peak_mb:.0f} MB",
                    r.peak_mb <= TARGET_RSS_MB,
                )
            )
    return rows


def render(results: list[StartResult], info: dict[str, str], command: str) -> str:
    lines = [
        f"Run: `{command}`, " + ", ".join(f"{k}: {v}" for k, v in info.items()) + ".",
        "",
        "| roles | first start (check, compile, store) | a worker on the stored revision, "
        "until ready | RSS after deciding | peak RSS | decisions (allowed) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {r.roles:,} | {r.store_s:.2f} s | {r.ready_s:.2f} s | {r.rss_mb:.0f} MB | "
        f"{r.peak_mb:.0f} MB | {r.decisions:,} ({r.allowed:,}) |"
        for r in results
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.start_bench", description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000", help="role counts")
    parser.add_argument("--requests", type=int, default=20_000, help="workload requests")
    parser.add_argument("--repeats", type=int, default=3, help="worker starts (median)")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite the docs")
    opts = parser.parse_args(argv)
    load_before = load_average()
    conditions = Conditions()
    results = []
    for size in (int(s) for s in opts.sizes.split(",")):
        print(f"-- {size:,} roles ...", flush=True)
        results.append(run_size(size, opts.requests, opts.repeats))
    command = "python -m bench.start_bench " + " ".join(argv if argv is not None else sys.argv[1:])
    report = render(results, machine_info(load_before), command.strip())
    publish(
        "bench.start_bench", report, targets(results), conditions, (BEGIN, END), not opts.no_docs
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
