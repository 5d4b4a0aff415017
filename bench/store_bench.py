"""`python -m bench.store_bench`: decisions/s on each store, and on two nodes.

Servers, each a real `charter serve --workers 1` on loopback from fixtures/workspace:
SQLite (one node); PostgreSQL (one node); PostgreSQL with two nodes on one database, the
clients split between them; and the starlette ceiling of bench.http_bench. The
PostgreSQL server is started here from its binaries (tests/pgserver.py), in a temporary
directory, with its durability settings as shipped (fsync and synchronous commit on: a
COMMIT returns once its WAL is on disk; charter's SQLite, in WAL mode with synchronous
NORMAL, syncs its WAL at checkpoints). Every server runs throughout; each setup is measured for single
decisions and batches of 100 in turns with the others (`--rounds`). The machine has 2 cores, which the servers, PostgreSQL and the load generator
share: next to decisions/s, each process's CPU time per decision says what a decision
costs whatever share of the machine it got, and for the PostgreSQL setups, how many of
their turns PostgreSQL's autovacuum and charter's log checkpoint ran in
(bench.backgroundwatch), which move them most.

It writes a table to stdout and into docs/benchmarks.md between the STORES markers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench import wrkload
from bench.backgroundwatch import VACUUM, WALK, BackgroundWatch
from bench.http_bench import (
    CALL,
    _cpu_seconds,
    _free_port,
    _load,
    _payload,
    _start,
    _wait,
    write_doc,
)
from bench.targets import Conditions, Row, record
from tests.pgserver import PgServer

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- STORES:START -->", "<!-- STORES:END -->"
WORKSPACE = ROOT / "fixtures" / "workspace"


@dataclass
class Setup:
    name: str
    ports: list[int]
    token: str
    charter: list[int]  # the charter processes' pids
    postgres: int | None  # the postmaster's pid


@dataclass
class Measured:
    setup: str
    mode: str
    clients: int
    decisions: int
    seconds: float
    charter_cpu: float
    postgres_cpu: float
    turns: int = 1
    vacuumed: int = 0  # turns an autovacuum worker ran in (bench.backgroundwatch)
    walked: int = 0  # turns a node's log checkpoint walked the log in

    @property
    def rate(self) -> float:
        return self.decisions / self.seconds

    def per_decision_us(self, cpu: float) -> float:
        return cpu / self.decisions * 1e6 if self.decisions else float("nan")


def _serve(db: str, key: Path | None, port: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "api.cli", "serve", "--db", db, "--workspace",
               str(WORKSPACE), "--port", str(port), "--workers", "1"]  # fmt: skip
    if key is not None:
        command += ["--key-file", str(key)]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    _wait(port, process)
    return process


@contextmanager
def _postgres() -> Iterator[PgServer]:
    """A server of its own, in a directory of its own (the server's user reaches it)."""
    root = Path(tempfile.mkdtemp(prefix="charter-bench-pg-"))
    server = PgServer(root)
    server.durable = True
    try:
        server.start()
        yield server
    finally:
        server.stop("fast")
        shutil.rmtree(root, ignore_errors=True)


def _postmaster(server: PgServer) -> int:
    return int((server.data / "postmaster.pid").read_text().split()[0])


def _cpu(pids: list[int]) -> float:
    return sum(_cpu_seconds(pid) for pid in pids)


def _measure(setup: Setup, mode: str, body: bytes, per: int, clients: int,
             seconds: float, load_with: str, background: BackgroundWatch | None = None) -> Measured:  # fmt: skip
    path = "/v1/decisions" if per == 1 else "/v1/decisions/batch"
    payload = _payload(setup.token, path, body)
    pg = [setup.postgres] if setup.postgres is not None else []

    async def load() -> int:
        counts = await asyncio.gather(
            *(
                _load(port, payload, n, seconds)
                for port, n in zip(
                    setup.ports, wrkload.split(clients, len(setup.ports)), strict=True
                )
                if n
            )
        )
        return sum(count for count, _ in counts)

    asyncio.run(_warm(setup.ports, payload))
    began = time.monotonic()
    before, before_pg = _cpu(setup.charter), _cpu(pg)
    if load_with == "wrk":
        found = wrkload.run(setup.ports, path, body, setup.token, clients, seconds)
        requests, took = found.requests, found.seconds
    else:
        started = time.perf_counter()
        requests = asyncio.run(load())
        took = time.perf_counter() - started
    charter_cpu, postgres_cpu = _cpu(setup.charter) - before, _cpu(pg) - before_pg
    ran = background.ran(began, time.monotonic()) if background and pg else frozenset()
    return Measured(setup.name, mode, clients, requests * per, took, charter_cpu,
                    postgres_cpu, 1, int(VACUUM in ran), int(WALK in ran))  # fmt: skip


async def _warm(ports: list[int], payload: bytes) -> None:
    await asyncio.gather(*(_load(port, payload, 2, 0.5) for port in ports))


def _merge(parts: list[Measured]) -> Measured:
    first = parts[0]
    return Measured(
        first.setup, first.mode, first.clients, sum(p.decisions for p in parts),
        sum(p.seconds for p in parts), sum(p.charter_cpu for p in parts),
        sum(p.postgres_cpu for p in parts), sum(p.turns for p in parts),
        sum(p.vacuumed for p in parts), sum(p.walked for p in parts),
    )  # fmt: skip


def run(
    seconds: float, clients: int, batch_clients: int, rounds: int, load_with: str = "python"
) -> list[Measured]:
    """Every server runs from the start, and each setup and mode is measured `rounds`
    times for `seconds / rounds`, taking turns, the turns summed: a drift of the machine's
    load (10-30% over minutes here) lands on every setup alike, so their ratios compare
    figures taken under the same conditions."""
    single = json.dumps(CALL).encode()
    batch = json.dumps({"calls": [CALL] * 100}).encode()
    modes = {"single": (single, 1, clients), "batch of 100": (batch, 100, batch_clients)}
    tmp = Path(tempfile.mkdtemp(prefix="charter-stores-"))
    processes: list[subprocess.Popen[bytes]] = []
    try:
        with (
            _postgres() as server,
            _stopped(processes),
            BackgroundWatch(server.url()) as background,
        ):
            ceiling, port, _ = _start("ceiling", 1, tmp)
            processes.append(ceiling)
            setups = [(Setup("starlette ceiling", [port], "none", [ceiling.pid], None),
                       ["single"])]  # fmt: skip
            port = _free_port()
            processes.append(_serve(str(tmp / "bench.db"), None, port))
            token = (tmp / "bench.db.admin-token").read_text().strip()
            setups.append((Setup("SQLite, 1 node", [port], token, [processes[-1].pid], None),
                           list(modes)))  # fmt: skip
            url, key = server.database(), tmp / "nodes.key"
            ports = [_free_port(), _free_port()]
            first = _serve(url, key, ports[0])
            processes.append(first)
            token = (tmp / "nodes.admin-token").read_text().strip()
            second = _serve(url, key, ports[1])
            processes.append(second)
            postmaster = _postmaster(server)
            setups += [
                (Setup("PostgreSQL, 1 node", ports[:1], token, [first.pid], postmaster),
                 list(modes)),
                (Setup("PostgreSQL, 2 nodes", ports, token, [first.pid, second.pid],
                       postmaster), list(modes)),
            ]  # fmt: skip
            parts: dict[tuple[str, str], list[Measured]] = {}
            for _ in range(rounds):
                for setup, names in setups:
                    for name in names:
                        body, per, n = modes[name]
                        found = _measure(setup, name, body, per, n, seconds / rounds,
                                         load_with, background)  # fmt: skip
                        parts.setdefault((setup.name, name), []).append(found)
            results = [_merge(found) for found in parts.values()]
            for found in results:
                print(_row(found), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return results


@contextmanager
def _stopped(processes: list[subprocess.Popen[bytes]]) -> Iterator[None]:
    """The servers stopped on the way out, before the PostgreSQL server they write to."""
    try:
        yield
    finally:
        for process in processes:
            process.terminate()
            process.wait(20)


_GENERATORS = {"wrk": "wrk (one process per node)", "python": "the asyncio client"}


def _row(m: Measured) -> str:
    on_pg = m.setup.startswith("PostgreSQL")
    pg = m.per_decision_us(m.postgres_cpu) if on_pg else None
    return (f"| {m.setup} | {m.mode} | {m.clients} | {m.rate:,.0f} | "
            f"{m.per_decision_us(m.charter_cpu):.1f} | "
            f"{'-' if pg is None else f'{pg:.1f}'} | "
            f"{f'{m.vacuumed} / {m.walked} of {m.turns}' if on_pg else '-'} |")  # fmt: skip


def report(results: list[Measured], load: tuple[float, ...], load_with: str = "python") -> str:
    by = {(m.setup, m.mode): m for m in results}
    lines = [
        f"Run {time.strftime('%Y-%m-%d %H:%M')} UTC on {platform.machine()}, "
        f"{os.cpu_count()} CPUs shared by the servers, PostgreSQL and the load generator, "
        f"Python {platform.python_version()}; load from {_GENERATORS[load_with]}; load "
        f"average before: {' '.join(f'{x:.2f}' for x in load)}.",
        "",
        "| setup | mode | clients | decisions/s | charter CPU µs / decision "
        "| PostgreSQL CPU µs / decision | turns with an autovacuum / a log walk |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *(_row(m) for m in results),
        "",
    ]
    ceiling = by.get(("starlette ceiling", "single"))
    for name in ("SQLite, 1 node", "PostgreSQL, 1 node"):
        found = by.get((name, "single"))
        if ceiling and found:
            lines.append(f"- single, {name}: {found.rate / ceiling.rate:.0%} of the ceiling")
    for mode in ("single", "batch of 100"):
        sqlite, one, two = (by.get((name, mode)) for name in
                            ("SQLite, 1 node", "PostgreSQL, 1 node", "PostgreSQL, 2 nodes"))  # fmt: skip
        if sqlite and one:
            lines.append(f"- {mode}: PostgreSQL with one node makes {one.rate / sqlite.rate:.0%} "
                         "of SQLite's decisions/s (target >= 70%)")  # fmt: skip
        if one and two:
            lines.append(f"- {mode}: two nodes make {two.rate / one.rate:.2f}x one node's "
                         "decisions/s (target >= 1.3x for batches)")  # fmt: skip
    return "\n".join(lines) + "\n"


def targets(results: list[Measured]) -> list[Row]:
    """The issue's targets: two nodes against one on batches of 100, and PostgreSQL's one
    node against SQLite's, on batches and on single decisions."""
    by = {(m.setup, m.mode): m for m in results}
    rows = []
    one, two = (by.get((name, "batch of 100")) for name in
                ("PostgreSQL, 1 node", "PostgreSQL, 2 nodes"))  # fmt: skip
    if one and two:
        ratio = two.rate / one.rate
        rows.append(Row("two single-worker nodes on PostgreSQL: >= 1.3x one node's batch "
                        "decisions/s", f"{ratio:.2f}x ({two.rate:,.0f} / {one.rate:,.0f})",
                        ratio >= 1.3))  # fmt: skip
    for mode, named in (("batch of 100", "batch"), ("single", "single")):
        sqlite, one = (by.get((name, mode)) for name in ("SQLite, 1 node", "PostgreSQL, 1 node"))
        if sqlite and one:
            share = one.rate / sqlite.rate
            rows.append(Row(f"PostgreSQL, one node: >= 70% of SQLite's {named} decisions/s "
                            f"({one.clients} clients)",
                            f"{share:.0%} ({one.rate:,.0f} / {sqlite.rate:,.0f})",
                            share >= 0.7))  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.store_bench")
    parser.add_argument("--seconds", type=float, default=24.0)
    parser.add_argument("--clients", type=int, default=64, help="for single decisions")
    parser.add_argument("--batch-clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=8,
                        help="turns each setup takes (its seconds split between them)")  # fmt: skip
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--load",
        choices=("wrk", "python"),
        default="wrk" if wrkload.available() else "python",
        help="the load generator: wrk (default when installed) or the asyncio client",
    )
    args = parser.parse_args(argv)
    load = os.getloadavg()
    conditions = Conditions()
    print(
        "| setup | mode | clients | decisions/s | charter CPU µs | PostgreSQL CPU µs "
        "| turns with an autovacuum / a log walk |"
    )
    results = run(args.seconds, args.clients, args.batch_clients, args.rounds, args.load)
    text = report(results, load, args.load)
    sys.stdout.write(text)
    if not args.no_write:
        write_doc(text, START, END)
    record("bench.store_bench", targets(results), conditions, docs=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
