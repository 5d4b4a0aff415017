"""Load from wrk (Debian's `wrk`, a C HTTP benchmarking tool): the same keep-alive POSTs
as bench.http_bench's asyncio client, for a fraction of its CPU.

On this 2-core machine the load generator shares the cores with what it measures. The
asyncio client costs about as much CPU per request as a batch's HTTP handling in the
server, so a setup that could use both cores (two charter nodes) is measured with the
client holding a large share of them. wrk's event loop in C costs a few microseconds a
request, which leaves the cores to the servers.

Each server gets one wrk process (one thread, its share of the connections), all started
at once and run for the same seconds; their counts are summed. A Lua script per run sets
the method, the body (read from a file) and the headers, and prints wrk's summary as one
JSON line, which is parsed here: requests, the non-2xx answers (any is an error: a
refused batch must not count as decided), socket errors and latency percentiles.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

_SCRIPT = """\
local f = assert(io.open("{body}", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. assert(io.open("{token}", "rb")):read("*l")

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '\\nWRK-SUMMARY {{"requests":%d,"micros":%d,"status":%d,"socket":%d,'
    .. '"p50_us":%d,"p99_us":%d}}\\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


@dataclass
class WrkRun:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float


def available() -> bool:
    return shutil.which("wrk") is not None


def split(connections: int, servers: int) -> list[int]:
    """`connections` shared out over `servers` as evenly as they go, the first first."""
    return [connections // servers + (i < connections % servers) for i in range(servers)]


def run(ports: list[int], path: str, body: bytes, token: str, connections: int,
        seconds: float) -> WrkRun:  # fmt: skip
    """`connections` split over `ports` (one wrk process each), `seconds` long; raises
    RuntimeError when any answer was not a 2xx or a socket failed."""
    share = split(connections, len(ports))
    with tempfile.TemporaryDirectory(prefix="charter-wrk-") as tmp:
        root = Path(tmp)
        (root / "body").write_bytes(body)
        (root / "token").write_text(token + "\n")
        script = root / "post.lua"
        script.write_text(_SCRIPT.format(body=root / "body", token=root / "token"))
        duration = f"-d{max(1, round(seconds))}s"
        commands = [
            ["wrk", "-t1", f"-c{n}", duration, "-s", str(script), "--timeout", "10s",
             f"http://127.0.0.1:{port}{path}"]
            for port, n in zip(ports, share, strict=True)
            if n
        ]  # fmt: skip
        processes = [
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for command in commands
        ]
        summaries = []
        for process in processes:
            out, err = process.communicate(timeout=seconds + 60)
            line = next((x for x in out.splitlines() if x.startswith("WRK-SUMMARY ")), None)
            if process.returncode != 0 or line is None:
                raise RuntimeError(f"wrk failed ({process.returncode}): {err.strip()[:200]}")
            summaries.append(json.loads(line.removeprefix("WRK-SUMMARY ")))
    for found in summaries:
        if found["status"] or found["socket"]:
            raise RuntimeError(
                f"wrk saw {found['status']} answers that were not 2xx and "
                f"{found['socket']} socket errors"
            )
    return WrkRun(
        requests=sum(s["requests"] for s in summaries),
        seconds=max(s["micros"] for s in summaries) / 1e6,
        p50_ms=max(s["p50_us"] for s in summaries) / 1000,
        p99_ms=max(s["p99_us"] for s in summaries) / 1000,
    )
