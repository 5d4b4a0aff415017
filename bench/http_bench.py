"""`python -m bench.http_bench`: decisions over HTTP against the framework's ceiling.

Servers: `charter serve` on a fresh database with fixtures/workspace (1 and 2 workers),
and, on the same uvicorn + starlette stack, a minimal endpoint returning constant JSON
(the ceiling) and a bare batch endpoint deciding with the same compiled policy, no store
and no log (the engine's ceiling, which charter's batches are measured against side by
side). The load generator is a small asyncio HTTP/1.1 keep-alive client (one
connection per concurrent client), running on the same machine; it writes a table to
stdout and the figures into docs/benchmarks.md ("The HTTP service") between the BENCH
markers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from api.http.parts import LaneApp
from bench.targets import Conditions, Row, record

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- BENCH:START -->", "<!-- BENCH:END -->"
CALL = {"agent": "demo-support", "tool": "mail.send",
        "args": {"to": "bob@example.com", "subject": "hi", "body": "hello"}}  # fmt: skip
CONSTANT = b'{"effect":"allow","reasons":[]}'


LANE = "/lane/v1/decisions"  # the ceiling's constant, served as charter serves decisions


async def _constant(scope: Scope, receive: Receive, send: Send) -> None:
    while (await receive()).get("more_body"):
        pass
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-length", b"%d" % len(CONSTANT)),
                (b"content-type", b"application/json"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": CONSTANT})


def engine_body() -> Callable[[bytes], bytes]:
    """The engine's ceiling, as a function of the request's body: the same compiled
    policy as charter's (fixtures/workspace), each call decided for the demo agent's
    profile by `Snapshot.decide_call` and answered with its effect, arguments and
    reasons, in JSON. No token, no store, no log, no budget: what a batch costs around
    the engine alone, which charter's batches are measured against."""
    from api.cli_serve import DEMO_PROFILE
    from engine.check import load
    from engine.compile import compile_workspace

    snapshot = compile_workspace(load([ROOT / "fixtures" / "workspace"]))
    agent = {"id": "demo-support", "name": "Demo support agent", "identity": "", "metadata": {}}

    def body(raw: bytes) -> bytes:
        answers = []
        for call in orjson.loads(raw)["calls"]:
            decision = snapshot.decide_call(DEMO_PROFILE, call["tool"], call["args"], None, agent)
            answers.append({"effect": decision.effect, "args": decision.args,
                            "reasons": [r.to_json() for r in decision.reasons]})  # fmt: skip
        return orjson.dumps({"decisions": answers})

    return body


def engine_batch() -> Callable[[Request], Awaitable[Response]]:
    """The batch endpoint of the engine's ceiling (`engine_body`), on starlette."""
    decide = engine_body()

    async def batch(request: Request) -> Response:
        return Response(decide(await request.body()), media_type="application/json")

    return batch


def ceiling_app() -> Starlette:
    from api.http.app import tune_gc

    async def constant(request: Request) -> Response:
        await request.body()
        return Response(CONSTANT, media_type="application/json")

    # The ceiling twice: a starlette endpoint (the ceiling, what the targets are
    # measured against), and at LANE the same constant served the way charter serves its
    # decisions, ahead of starlette's layers (a LaneApp, as charter's decision lanes):
    # what charter's own work costs shows against that one.
    # And the engine's ceiling for batches (`engine_batch`).
    app = LaneApp(routes=[
        Route("/v1/decisions", constant, methods=["POST"]),
        Route("/v1/decisions/batch", engine_batch(), methods=["POST"]),
    ])  # fmt: skip
    app.lanes = {LANE: _constant}
    tune_gc()  # as charter serve's processes do
    return app


@dataclass
class Result:
    server: str
    workers: int
    mode: str
    clients: int
    requests: int
    seconds: float
    latencies: list[float]
    per_request: int
    cpu: float = float("nan")  # CPU seconds the server's processes used meanwhile

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    @property
    def decisions(self) -> float:
        return self.rps * self.per_request

    @property
    def cpu_per_decision_us(self) -> float:
        return self.cpu / (self.requests * self.per_request) * 1e6

    def pct(self, p: float) -> float:
        data = sorted(self.latencies)
        return data[min(len(data) - 1, int(p * len(data)))] * 1000 if data else 0.0


async def _client(port: int, payload: bytes, stop: float, latencies: list[float]) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    done = 0
    try:
        while time.perf_counter() < stop:
            started = time.perf_counter()
            writer.write(payload)
            status = await reader.readline()
            if b" 200 " not in status:
                raise RuntimeError(f"bad response {status!r}")
            length = 0
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - started)
            done += 1
    finally:
        writer.close()
    return done


def _payload(token: str, path: str, body: bytes) -> bytes:
    return _request(body, token).replace(b"{path}", path.encode())


def _request(body: bytes, token: str) -> bytes:
    head = (
        f"POST {{path}} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _load(port: int, payload: bytes, clients: int, seconds: float) -> tuple[int, list[float]]:
    latencies: list[float] = []
    stop = time.perf_counter() + seconds
    counts = await asyncio.gather(
        *(_client(port, payload, stop, latencies) for _ in range(clients))
    )
    return sum(counts), latencies


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(port: int, process: subprocess.Popen[bytes]) -> None:
    import socket

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("the server exited")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the server did not start")


STACKS = {"auto": ("auto", "auto"), "asyncio-h11": ("asyncio", "h11")}


def _start(
    kind: str, workers: int, tmp: Path, stack: str = "auto"
) -> tuple[subprocess.Popen[bytes], int, str]:
    port = _free_port()
    loop, http = STACKS[stack]
    if kind == "ceiling":  # through charter serve's own launcher: the same server stack
        cmd = [sys.executable, "-m", "bench.http_bench", "--serve-ceiling", str(port),
               "--workers", str(workers), "--stack", stack]  # fmt: skip
        token = "none"
    else:
        db = tmp / f"bench-{workers}.db"
        cmd = [sys.executable, "-m", "api.cli", "serve", "--db", str(db), "--workspace",
               str(ROOT / "fixtures" / "workspace"), "--port", str(port),
               "--workers", str(workers), "--loop", loop, "--http", http]  # fmt: skip
    process = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL)
    _wait(port, process)
    if kind != "ceiling":
        token = Path(f"{tmp / f'bench-{workers}.db'}.admin-token").read_text().strip()
    return process, port, token


def _measure(
    server: str, workers: int, mode: str, port: int, payload: bytes, clients: int,
    seconds: float, per: int, pid: int | None = None,
) -> Result:  # fmt: skip
    before = _cpu_seconds(pid)
    count, lat = asyncio.run(_load(port, payload, clients, seconds))
    cpu = _cpu_seconds(pid) - before
    return Result(server, workers, mode, clients, count, seconds, lat, per, cpu)


def _process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (a server and, with --workers, uvicorn's workers)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as children:
                    todo.extend(int(child) for child in children.read().split())
        except OSError:
            continue
    return found


def _cpu_seconds(pid: int | None) -> float:
    """User + system CPU time a server and its workers have used so far (Linux's /proc;
    NaN elsewhere). Per decision it shows what a worker costs whatever share of the
    machine it got: with --workers 2 the servers and the load generator share 2 cores."""
    if pid is None or not os.path.exists(f"/proc/{pid}/stat"):
        return float("nan")
    ticks = 0
    for process in _process_tree(pid):
        try:
            with open(f"/proc/{process}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def _merge(parts: list[Result]) -> Result:
    first = parts[0]
    return Result(
        first.server, first.workers, first.mode, first.clients,
        sum(p.requests for p in parts), sum(p.seconds for p in parts),
        [x for p in parts for x in p.latencies], first.per_request, sum(p.cpu for p in parts),
    )  # fmt: skip


def _side_by_side(
    servers: dict[str, tuple[subprocess.Popen[bytes], int, str]], payloads: dict[str, bytes],
    workers: int, mode: str, clients: int, seconds: float, per: int, rounds: int,
) -> list[Result]:  # fmt: skip
    """Each server measured `rounds` times for `seconds / rounds`, taking turns, and the
    turns summed: a drift in the machine's load (seen here: 10-25% over a minute) lands
    on both servers alike instead of on whichever ran during it."""
    parts: dict[str, list[Result]] = {kind: [] for kind in payloads}
    for _ in range(rounds):
        for kind, payload in payloads.items():
            process, port, _ = servers[kind]
            parts[kind].append(_measure(kind, workers, mode, port, payload, clients,
                                        seconds / rounds, per, process.pid))  # fmt: skip
    merged = [_merge(found) for found in parts.values()]
    for result in merged:
        print(_row(result), flush=True)
    return merged


def run(
    seconds: float, levels: list[int], worker_counts: list[int], stack: str = "auto",
    rounds: int = 3,
) -> list[Result]:  # fmt: skip
    """Both servers run side by side and each client level is measured on the ceiling and
    on charter in turns (`rounds` of each): on a shared machine whose load drifts, the
    ratio compares figures taken under the same conditions."""
    results: list[Result] = []
    single = json.dumps(CALL).encode()
    batch = json.dumps({"calls": [CALL] * 100}).encode()
    with tempfile.TemporaryDirectory() as tmp:
        for workers in worker_counts:
            servers = {
                kind: _start(kind, workers, Path(tmp), stack) for kind in ("ceiling", "charter")
            }
            servers["ceiling-lane"] = servers["ceiling"]  # the same server, its other path
            servers["engine"] = servers["ceiling"]  # (and its engine's batch endpoint)
            try:
                singles = {
                    kind: _payload(token, LANE if kind == "ceiling-lane" else "/v1/decisions",
                                   single)
                    for kind, (_, _, token) in servers.items() if kind != "engine"
                }  # fmt: skip
                batches = {
                    kind: _payload(servers[kind][2], "/v1/decisions/batch", batch)
                    for kind in ("engine", "charter")
                }
                for kind in singles:  # warm up
                    asyncio.run(_load(servers[kind][1], singles[kind], 4, 0.5))
                for kind, payload in batches.items():
                    asyncio.run(_load(servers[kind][1], payload, 4, 0.5))
                for clients in levels:
                    results += _side_by_side(servers, singles, workers, "single", clients,
                                             seconds, 1, rounds)  # fmt: skip
                for clients in levels:
                    results += _side_by_side(servers, batches, workers, "batch100", clients,
                                             seconds, 100, rounds)  # fmt: skip
            finally:
                for kind in ("ceiling", "charter"):  # (the lane and engine: the ceiling's)
                    process = servers[kind][0]
                    process.terminate()
                    process.wait(20)
    order = {"ceiling": 0, "ceiling-lane": 1, "engine": 2, "charter": 3}
    return sorted(results, key=lambda r: (r.workers, order[r.server], r.mode != "single"))


def _row(r: Result) -> str:
    return (f"| {r.server} | {r.workers} | {r.mode} | {r.clients} | {r.rps:,.0f} | "
            f"{r.decisions:,.0f} | {r.pct(0.5):.2f} | {r.pct(0.99):.2f} | "
            f"{r.cpu_per_decision_us:.1f} |")  # fmt: skip


def _stack_name(stack: str) -> str:
    import importlib.util

    import uvicorn

    loop, http = STACKS[stack]
    if loop == "auto":
        loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    if http == "auto":
        http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    return f"uvicorn {uvicorn.__version__} ({loop}, {http})"


def report(results: list[Result], stack: str = "auto") -> str:
    lines = [
        f"Run {time.strftime('%Y-%m-%d')} on {platform.machine()}, {os.cpu_count()} CPUs "
        f"(shared by the servers and the load generator), Python {platform.python_version()}, "
        f"both servers on {_stack_name(stack)} + starlette.",
        "",
        "| server | workers | mode | clients | requests/s | decisions/s | p50 ms | p99 ms "
        "| server CPU µs / decision |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *(_row(r) for r in results),
        "",
    ]
    ceiling = {(r.workers, r.clients): r.rps for r in results if r.server == "ceiling"}
    lane = {(r.workers, r.clients): r.rps for r in results if r.server == "ceiling-lane"}
    for r in results:
        if r.server == "charter" and r.mode == "single" and (r.workers, r.clients) in ceiling:
            share = r.rps / ceiling[(r.workers, r.clients)]
            line = (f"- single, {r.workers} worker(s), {r.clients} clients: "
                    f"{share:.0%} of the ceiling (target >= 60%)")  # fmt: skip
            if (r.workers, r.clients) in lane:
                line += f"; {r.rps / lane[(r.workers, r.clients)]:.0%} of the lane's ceiling"
            lines.append(line)
    engine = {(r.workers, r.clients): r.decisions for r in results if r.server == "engine"}
    for r in results:
        if r.server == "charter" and r.mode == "batch100" and (r.workers, r.clients) in engine:
            share = r.decisions / engine[(r.workers, r.clients)]
            lines.append(
                f"- batch of 100, {r.workers} worker(s), {r.clients} clients: {share:.0%} of "
                "the engine's ceiling, a bare starlette endpoint deciding with the same "
                "snapshot (target >= 80%)"
            )
    for r in results:
        if r.server == "charter" and r.mode == "batch100":
            # A keep-alive connection is served by one worker: 1 client keeps one busy.
            busy = min(r.workers, r.clients)
            lines.append(
                f"- batch of 100, {r.workers} worker(s), {r.clients} clients: "
                f"{r.decisions / busy:,.0f} decisions/s per busy worker (target >= 100,000; "
                f"{1e6 / r.cpu_per_decision_us:,.0f} per second of a worker's CPU)"
            )
    return "\n".join(lines) + "\n"


def targets(results: list[Result]) -> list[Row]:
    """The batch's share of the engine's ceiling (issue target: at least 80%)."""
    engine = {(r.workers, r.clients): r.decisions for r in results if r.server == "engine"}
    return [
        Row(
            f"batch of 100 over HTTP, {r.workers} worker(s), {r.clients} clients: >= 80% of "
            "the decisions/s of a bare starlette endpoint deciding with the same snapshot",
            f"{r.decisions / engine[(r.workers, r.clients)]:.0%}",
            r.decisions / engine[(r.workers, r.clients)] >= 0.8,
        )
        for r in results
        if r.server == "charter" and r.mode == "batch100" and (r.workers, r.clients) in engine
    ]


def write_doc(text: str, start: str = START, end: str = END) -> None:
    """`text` in docs/benchmarks.md between the markers `start` and `end`."""
    if not DOC.exists():
        return
    doc = DOC.read_text()
    if start in doc and end in doc:
        head, rest = doc.split(start, 1)
        _, tail = rest.split(end, 1)
        DOC.write_text(f"{head}{start}\n{text}{end}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.http_bench")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--clients", default="1,16,64")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--rounds", type=int, default=3,
                        help="turns each server takes per client level (the seconds are "
                        "split between them)")  # fmt: skip
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--stack", choices=sorted(STACKS), default="auto",
                        help="uvicorn's loop and HTTP parser for both servers (auto: uvloop "
                        "and httptools when installed)")  # fmt: skip
    parser.add_argument("--serve-ceiling", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_ceiling:
        from api.cli_serve import run_uvicorn

        workers = int(args.workers.split(",")[0])
        loop, http = STACKS[args.stack]
        run_uvicorn("bench.http_bench:ceiling_app", "127.0.0.1", args.serve_ceiling, workers,
                    factory=True, loop=loop, http=http)  # fmt: skip
        return 0
    conditions = Conditions()
    results = run(
        args.seconds,
        [int(x) for x in args.clients.split(",")],
        [int(x) for x in args.workers.split(",")],
        args.stack,
        args.rounds,
    )
    text = report(results, args.stack)
    sys.stdout.write(text)
    record("bench.http_bench", targets(results), conditions, docs=not args.no_write)
    if not args.no_write:
        write_doc(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
