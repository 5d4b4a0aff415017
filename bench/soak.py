"""`python -m bench.soak`: a long run of mixed load against a real `charter serve`.

A fresh database served from fixtures/workspace on loopback (`--workers`, default 1), for
`--seconds` (default 600; the `SOAK_SECONDS` environment variable sets it too, e.g.
`SOAK_SECONDS=60 make bench`). Meanwhile `--clients` keep-alive connections send a mix of
single decisions, batches of 20, log pages and listings, and a policy upload comes every
`--upload-every` seconds (30), each a new revision (a comment that changes).

Single-decision latency is measured twice the same way: at the start (after a warm-up) and
at the end, each a quiet probe (the load paused: one connection, `--probe-seconds` of
back-to-back decisions) and over the first and last minute of load. Memory is the RSS of
the server's processes, read from /proc at every upload. The figures go to stdout and into
docs/benchmarks.md between the soak markers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.http_bench import _cpu_seconds, _free_port, _process_tree, _request, _wait

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- soak:begin -->", "<!-- soak:end -->"
WORKSPACE = ROOT / "fixtures" / "workspace"
AGENT = "demo-support"
CALL = {"agent": AGENT, "tool": "mail.send",
        "args": {"to": "bob@example.com", "subject": "hi", "body": "hello"}}  # fmt: skip
DENIED = {**CALL, "args": {"to": "eve@elsewhere.net", "subject": "hi", "body": "x"}}
# What each connection of the load sends, by weight.
MIX = (("single", 60), ("batch", 10), ("log", 10), ("agents", 6), ("revisions", 4),
       ("tools", 5), ("denied", 5))  # fmt: skip


def _rss_mib(pid: int) -> float:
    """Resident memory of `pid` and its descendants (the server and any workers), MiB."""
    total = 0
    for process in _process_tree(pid):
        try:
            with open(f"/proc/{process}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


class Connection:
    """One HTTP/1.1 keep-alive connection: a request written, its whole answer read."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def send(self, raw: bytes) -> tuple[int, bytes]:
        self.writer.write(raw)
        status = await self.reader.readline()
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        body = await self.reader.readexactly(length)
        return int(status.split()[1]), body

    def close(self) -> None:
        self.writer.close()


def _get(path: str, token: str) -> bytes:
    return (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n"
    ).encode()


def _put_policy(token: str, revision: int) -> bytes:
    files = [{"path": p.name, "text": p.read_text()} for p in sorted(WORKSPACE.glob("*.charter"))]
    files.append({"path": "soak.charter", "text": f"# soak upload {revision}\n"})
    body = json.dumps({"files": files, "note": f"soak {revision}"}).encode()
    head = (
        f"PUT /v1/policy HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


@dataclass
class Load:
    """What the mixed load did: per kind, how many answers and their latencies."""

    counts: dict[str, int] = field(default_factory=dict)
    # kind -> (when it was sent, seconds it took), for every answer
    times: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def _requests(token: str) -> dict[str, bytes]:
    single = json.dumps(CALL).encode()
    return {
        "single": _request(single, token).replace(b"{path}", b"/v1/decisions"),
        "denied": _request(json.dumps(DENIED).encode(), token).replace(b"{path}", b"/v1/decisions"),
        "batch": _request(json.dumps({"calls": [CALL] * 20}).encode(), token).replace(
            b"{path}", b"/v1/decisions/batch"
        ),
        "agents": _get("/v1/agents?limit=50", token),
        "revisions": _get("/v1/revisions?limit=50", token),
        "tools": _get(f"/v1/agents/{AGENT}/tools", token),
    }


async def _client(port: int, token: str, stop: float, load: Load, seed: int) -> None:
    rng = random.Random(seed)
    made = _requests(token)
    kinds = [kind for kind, _ in MIX]
    weights = [weight for _, weight in MIX]
    connection = await Connection.open(port)
    after = 0
    try:
        while time.perf_counter() < stop:
            kind = rng.choices(kinds, weights)[0]
            if kind == "log":  # a page somewhere in the log, as a reader catching up
                raw = _get(f"/v1/decisions?after_seq={after}&limit=100", token)
            else:
                raw = made[kind]
            started = time.perf_counter()
            status, body = await connection.send(raw)
            took = time.perf_counter() - started
            if status != 200:
                load.failures.append(f"{kind}: {status} {body[:200]!r}")
                continue
            load.counts[kind] = load.counts.get(kind, 0) + 1
            load.times.setdefault(kind, []).append((started, took))
            if kind == "single":
                after = max(0, json.loads(body)["seq"] - rng.randrange(1, 5000))
    finally:
        connection.close()


async def _probe(port: int, token: str, seconds: float) -> list[float]:
    """Back-to-back single decisions on one connection, nothing else going."""
    raw = _requests(token)["single"]
    connection = await Connection.open(port)
    found: list[float] = []
    try:
        stop = time.perf_counter() + seconds
        while time.perf_counter() < stop:
            started = time.perf_counter()
            status, body = await connection.send(raw)
            if status != 200:
                raise RuntimeError(f"probe: {status} {body[:200]!r}")
            found.append(time.perf_counter() - started)
    finally:
        connection.close()
    return found


@dataclass
class KindProbe:
    """One kind of request sent back to back on one connection, nothing else going."""

    latencies: list[float]
    cpu_us: float  # the server's CPU time per request


async def _probe_kinds(port: int, token: str, pid: int, seconds: float) -> dict[str, KindProbe]:
    """Every kind of the mix in turn, `seconds` each, on one connection with the load
    paused: what a request of each kind costs the server, whatever the machine's other
    work does to the latencies under load."""
    made = _requests(token)
    rng = random.Random(0)
    connection = await Connection.open(port)
    found: dict[str, KindProbe] = {}
    try:
        status, body = await connection.send(made["single"])
        last = json.loads(body)["seq"]
        for kind, _ in MIX:
            latencies: list[float] = []
            for warm in (True, False):
                cpu = _cpu_seconds(pid)
                stop = time.perf_counter() + (seconds / 10 if warm else seconds)
                while time.perf_counter() < stop:
                    raw = (
                        _get(f"/v1/decisions?after_seq={max(0, last - rng.randrange(1, 5000))}"
                             "&limit=100", token)
                        if kind == "log" else made[kind]
                    )  # fmt: skip
                    started = time.perf_counter()
                    status, body = await connection.send(raw)
                    if status != 200:
                        raise RuntimeError(f"probe {kind}: {status} {body[:200]!r}")
                    if not warm:
                        latencies.append(time.perf_counter() - started)
            spent = (_cpu_seconds(pid) - cpu) * 1e6 / max(1, len(latencies))
            found[kind] = KindProbe(latencies, spent)
    finally:
        connection.close()
    return found


@dataclass
class Sample:
    at: float  # seconds into the load
    rss_mib: float
    cpu: float  # CPU seconds the server's processes have used so far
    answers: int  # answers of the mixed load so far


@dataclass
class Upload:
    at: float  # seconds into the load
    revision: int
    seconds: float
    rss_mib: float


async def _uploads(
    port: int, token: str, pid: int, stop: float, every: float, began: float, done: list[Upload]
) -> None:
    while True:
        remaining = stop - time.perf_counter()
        if remaining <= 0:
            return
        await asyncio.sleep(min(every, remaining))
        if time.perf_counter() >= stop:
            return
        # A connection of its own each time: an idle one is closed by the server's
        # keep-alive timeout between two uploads.
        connection = await Connection.open(port)
        try:
            started = time.perf_counter()
            status, body = await connection.send(_put_policy(token, len(done) + 2))
        finally:
            connection.close()
        if status != 201:
            raise RuntimeError(f"upload: {status} {body[:300]!r}")
        done.append(Upload(started - began, json.loads(body)["revision"],
                           time.perf_counter() - started, _rss_mib(pid)))  # fmt: skip


async def _sample(
    pid: int, stop: float, began: float, every: float, load: Load, found: list[Sample]
) -> None:
    """The server's RSS and CPU time every `every` seconds of the load."""
    while time.perf_counter() < stop:
        answers = sum(load.counts.values())
        found.append(Sample(time.perf_counter() - began, _rss_mib(pid), _cpu_seconds(pid), answers))
        await asyncio.sleep(min(every, max(0.0, stop - time.perf_counter())))


async def _run_load(
    port: int, token: str, pid: int, seconds: float, clients: int, every: float
) -> tuple[Load, list[Upload], list[Sample], float]:
    load = Load()
    uploads: list[Upload] = []
    samples: list[Sample] = []
    began = time.perf_counter()
    stop = began + seconds
    await asyncio.gather(
        _uploads(port, token, pid, stop, every, began, uploads),
        _sample(pid, stop, began, max(1.0, seconds / 60), load, samples),
        *(_client(port, token, stop, load, seed) for seed in range(clients)),
    )
    return load, uploads, samples, began


def _pct(data: list[float], p: float) -> float:
    ordered = sorted(data)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000 if ordered else 0.0


@dataclass
class Soak:
    seconds: float
    workers: int
    clients: int
    every: float
    rss_start: float
    rss_end: float
    probe_start: list[float]
    probe_end: list[float]
    kinds_start: dict[str, KindProbe]
    kinds_end: dict[str, KindProbe]
    load: Load
    uploads: list[Upload]
    samples: list[Sample]
    began: float
    span: float  # seconds of the first and the last window
    loads: tuple[str, str]  # the machine's load averages before and after

    def window(self, kind: str, last: bool) -> list[float]:
        """The latencies of `kind` in the first or the last `span` seconds of load."""
        edge = self.began + (self.seconds - self.span if last else self.span)
        times = self.load.times.get(kind, [])
        return [t for at, t in times if (at >= edge if last else at < edge)]


def _load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def run(
    seconds: float, workers: int, clients: int, every: float, probe: float, kind_probe: float
) -> Soak:
    before = _load_average()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "soak.db"
        port = _free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "api.cli", "serve", "--db", str(db), "--workspace",
             str(WORKSPACE), "--port", str(port), "--workers", str(workers)],
            cwd=ROOT, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            _wait(port, process)
            token = Path(f"{db}.admin-token").read_text().strip()
            asyncio.run(_probe(port, token, 2.0))  # warm up: the first decisions, the caches
            rss_start = _rss_mib(process.pid)
            probe_start = asyncio.run(_probe(port, token, probe))
            kinds_start = asyncio.run(_probe_kinds(port, token, process.pid, kind_probe))
            load, uploads, samples, began = asyncio.run(
                _run_load(port, token, process.pid, seconds, clients, every)
            )
            probe_end = asyncio.run(_probe(port, token, probe))
            kinds_end = asyncio.run(_probe_kinds(port, token, process.pid, kind_probe))
            rss_end = _rss_mib(process.pid)
        finally:
            process.terminate()
            process.wait(20)
    window = min(60.0, seconds / 4)
    return Soak(seconds, workers, clients, every, rss_start, rss_end, probe_start, probe_end,
                kinds_start, kinds_end, load, uploads, samples, began, window,
                (before, _load_average()))  # fmt: skip


def report(soak: Soak, command: str) -> str:
    load = soak.load
    first, last = soak.window("single", False), soak.window("single", True)
    answered = sum(load.counts.values())
    mix = ", ".join(f"{kind} {load.counts.get(kind, 0):,}" for kind, _ in MIX)
    upload_times = [u.seconds for u in soak.uploads]
    lines = [
        f"Command: `{command}`",
        "",
        f"- machine: {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs (shared by "
        f"the server and the load generator), CPython {platform.python_version()}",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- load average (1/5/15 min) before / after: {soak.loads[0]} / {soak.loads[1]}",
        f"- load: {soak.seconds:g} s, {soak.workers} worker(s), {soak.clients} connections; "
        f"{answered:,} answers ({answered / soak.seconds:,.0f}/s): {mix}; "
        f"{len(load.failures)} failures",
        f"- uploads: {len(soak.uploads)}, one every {soak.every:g} s "
        f"(median {_pct(upload_times, 0.5):.0f} ms each)",
        "",
        "| single decision | p50 ms (start) | p99 ms (start) | p50 ms (end) | p99 ms (end) "
        "| end / start (p50) |",
        "| --- | --- | --- | --- | --- | --- |",
        _latency_row("quiet probe, 1 connection", soak.probe_start, soak.probe_end),
        _latency_row(f"under load, first / last {soak.span:g} s", first, last),
        "",
        "| RSS MiB | start | after 1st upload | end | growth over the uploads |",
        "| --- | --- | --- | --- | --- |",
        _rss_row(soak),
        "",
    ]
    series = ", ".join(
        f"{s.at:.0f}s {s.rss_mib:.0f}" for s in soak.samples[:: max(1, len(soak.samples) // 12)]
    )
    lines += [f"RSS over the load (MiB): {series}", ""]
    lines += [
        f"server CPU µs per answer, first -> last {soak.span:g} s: {_cpu_per_answer(soak)}",
        "",
    ]
    kinds = ", ".join(
        f"{kind} {_pct(soak.window(kind, False), 0.5):.2f} -> {_pct(soak.window(kind, True), 0.5):.2f}"
        for kind, _ in MIX
    )
    lines += [f"p50 ms under load, first -> last {soak.span:g} s: {kinds}", ""]
    lines += [
        "| each kind alone, 1 connection (start / end) | p50 ms (start) | p50 ms (end) "
        "| server CPU µs (start) | server CPU µs (end) | end / start (CPU) |",
        "| --- | --- | --- | --- | --- | --- |",
        *(_kind_row(kind, soak.kinds_start[kind], soak.kinds_end[kind]) for kind, _ in MIX),
        "",
    ]
    if load.failures:
        lines += ["Failures (first 5):", *(f"- `{f}`" for f in load.failures[:5]), ""]
    return "\n".join(lines)


def _cpu_per_answer(soak: Soak) -> str:
    """What an answer cost the server in CPU, whatever share of the machine it got: a
    server that does more per request shows here, a busier machine does not."""
    samples = soak.samples
    if len(samples) < 3:
        return "?"

    def between(a: Sample, b: Sample) -> float:
        return (b.cpu - a.cpu) / max(1, b.answers - a.answers) * 1e6

    first = next((s for s in samples if s.at >= soak.span), samples[1])
    last = next((s for s in samples if s.at >= soak.seconds - soak.span), samples[-2])
    return f"{between(samples[0], first):.0f} -> {between(last, samples[-1]):.0f}"


def _latency_row(name: str, start: list[float], end: list[float]) -> str:
    ratio = _pct(end, 0.5) / _pct(start, 0.5) if start and end else float("nan")
    return (f"| {name} ({len(start):,} / {len(end):,}) | {_pct(start, 0.5):.2f} | "
            f"{_pct(start, 0.99):.2f} | {_pct(end, 0.5):.2f} | {_pct(end, 0.99):.2f} | "
            f"{ratio:.2f} |")  # fmt: skip


def _kind_row(kind: str, start: KindProbe, end: KindProbe) -> str:
    ratio = end.cpu_us / start.cpu_us if start.cpu_us else float("nan")
    return (f"| {kind} ({len(start.latencies):,} / {len(end.latencies):,}) | "
            f"{_pct(start.latencies, 0.5):.2f} | {_pct(end.latencies, 0.5):.2f} | "
            f"{start.cpu_us:.0f} | {end.cpu_us:.0f} | {ratio:.2f} |")  # fmt: skip


def _rss_row(soak: Soak) -> str:
    first = soak.uploads[0].rss_mib if soak.uploads else float("nan")
    growth = soak.rss_end - first
    per = growth / (len(soak.uploads) - 1) if len(soak.uploads) > 1 else float("nan")
    return (f"| server | {soak.rss_start:.1f} | {first:.1f} | {soak.rss_end:.1f} | "
            f"{growth:+.1f} MiB ({per:+.2f} a revision) |")  # fmt: skip


def write_doc(text: str) -> None:
    doc = DOC.read_text(encoding="utf-8")
    if START not in doc or END not in doc:
        return
    head, rest = doc.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{START}\n{text}{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--seconds", type=float,
                        default=float(os.environ.get("SOAK_SECONDS", "600")),
                        help="length of the mixed load (default: $SOAK_SECONDS or 600)")  # fmt: skip
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--clients", type=int, default=4, help="connections of mixed load")
    parser.add_argument("--upload-every", type=float, default=30.0, help="seconds")
    parser.add_argument("--probe-seconds", type=float, default=10.0)
    parser.add_argument("--kind-seconds", type=float, default=2.0,
                        help="seconds of each kind alone at start and end")  # fmt: skip
    parser.add_argument("--no-write", action="store_true", help="do not rewrite the docs")
    args = parser.parse_args(argv)
    soak = run(args.seconds, args.workers, args.clients, args.upload_every, args.probe_seconds,
               args.kind_seconds)  # fmt: skip
    given = argv if argv is not None else sys.argv[1:]
    text = report(soak, " ".join(["python -m bench.soak", *given]))
    print(text)
    if not args.no_write:
        write_doc(text)
    return 1 if soak.load.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
