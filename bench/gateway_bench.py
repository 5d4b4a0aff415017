"""`python -m bench.gateway_bench`: what `charter gateway` adds to an MCP tool call.

One MCP server written with the SDK (tests/gateway/upstream.py: each tool answers with
its arguments) is called by the SDK's client session over stdio, one call after another:
directly, then through a `charter gateway` process deciding in-process against a fresh
SQLite database (each call decided on the session's turn and logged, then forwarded), and
through the gateway in shadow mode. A call is `echo` (allowed as sent) or `search` with a
limit a hook rewrites. The table gives each way's median and 99th percentile per call,
and the gateway's overhead: its median less the direct median. Not part of `make test`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from api import commands as c
from api.http.app import open_service
from api.service.resources import create_agent
from api.service.tokens import Principal
from policy import identities

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = ROOT / "tests" / "gateway" / "upstream.py"
POLICY = """
toolset demo {
  tool echo(text: str)
  tool search(query: str, limit: int = 20)
}
role worker {
  allow demo.echo, demo.search
}
hook clamp on demo.search where args.limit > 20 {
  rewrite args.limit = 20
}
profile helper {
  roles worker
  hooks clamp
}
"""
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "echo": ("echo", {"text": "hello"}),
    "search (rewritten)": ("search", {"query": "q", "limit": 90}),
}


def _database(folder: Path) -> Path:
    db = folder / "charter.db"
    service = open_service(db)
    try:
        with service.store.atomic():
            service.upload([("policy.charter", POLICY)], "bench")
        view, _ = identities.create(service.store, service.sealer, "bench")
        made = c.CreateAgent.model_validate(
            {"name": "bot", "profile": "helper", "identity": view["id"]}
        )
        create_agent(service, Principal("bench", "admin"), made, "bot")
    finally:
        service.store.close()
    return db


def _config(folder: Path, shadow: bool) -> Path:
    path = folder / ("shadow.toml" if shadow else "gateway.toml")
    path.write_text(
        f'agent = "bot"\nshadow = {"true" if shadow else "false"}\n'
        f'report = "{folder / "shadow.jsonl"}"\n[[upstream]]\ntoolset = "demo"\n'
        f'command = ["{sys.executable}", "{UPSTREAM}"]\n'
    )
    return path


async def _timed(
    server: StdioServerParameters, name: str, args: dict[str, Any], n: int
) -> list[float]:
    async with (
        stdio_client(server) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await session.list_tools()
        for _ in range(max(10, n // 10)):  # warm up: the first calls compile and cache
            await session.call_tool(name, args)
        times = []
        for _ in range(n):
            started = time.perf_counter()
            result = await session.call_tool(name, args)
            times.append(time.perf_counter() - started)
            if result.is_error:
                raise RuntimeError(f"the call was refused: {result.content}")
        return times


def _gateway(config: Path, db: Path, env: dict[str, str]) -> StdioServerParameters:
    args = ["-m", "charter", "gateway", "--config", str(config), "--db", str(db)]
    return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(ROOT))


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="timed calls per row")
    n = parser.parse_args(argv).calls
    env = {"PYTHONPATH": str(ROOT)}
    direct = StdioServerParameters(command=sys.executable, args=[str(UPSTREAM)], env=env)
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        db = _database(folder)
        ways = {
            "direct": direct,
            "gateway": _gateway(_config(folder, False), db, env),
            "gateway, shadow": _gateway(_config(folder, True), db, env),
        }
        print(f"{n} calls each, one at a time, over stdio (ms per call)")
        print(f"{'call':<20} {'way':<16} {'median':>8} {'p99':>8} {'overhead':>9}")
        for label, (name, args) in CALLS.items():
            base = None
            for way, server in ways.items():
                times = anyio.run(_timed, server, name, args, n)
                median = 1000 * statistics.median(times)
                if base is None:
                    base = median
                extra = "" if way == "direct" else f"{median - base:+9.2f}"
                print(f"{label:<20} {way:<16} {median:8.2f} {_ms(times, 0.99):8.2f} {extra:>9}")


if __name__ == "__main__":
    main()
