"""`python -m bench.batch_stages`: where a batch of 100 spends its CPU inside charter.

bench.http_bench measures charter's batches against the engine's ceiling over HTTP; this
says what the difference is made of. In one process, with no HTTP: a fresh database from
fixtures/workspace (as `charter serve --workspace` makes it), the app built as a worker
builds it, and `POST /v1/decisions/batch` (the bench's 100 calls) sent to its decision
lane through ASGI, one batch after another. Each stage is wrapped in a timer of the
process's CPU time: reading the calls, preparing them (the agent, steps 1-5 and 7),
drafting rows and answers (step 6, redaction, the row's JSON), logging (the run INSERT
and what goes with it), and the answer's JSON. Next to it, the engine ceiling's endpoint
body (bench.http_bench: parse, decide, answer) on the same calls. A timer costs about a
tenth of a microsecond a call, per batch: the stages add up to a little more than the
untimed lane.

With `--thread`, the batch's calls are made in one thread (an event each on the thread,
in the same transaction: api.service.threadevents), and only the lane is measured.

Last, the floor of a logged decision in Python (`_floor`): the engine ceiling's body with
what no logged decision can go without, a durable row each: its id, its JSON (the
call, the effect, the reasons' ref, the arguments decided), the run's INSERT with its
digest in a transaction of its own on a real SQLite file, and the answer with each
decision's id and seq. No token, no agent look-up, no step 6, no redaction, no checks of
the calls past their types: less than charter must do, so charter's lane cannot go below
it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

from bench.http_bench import CALL, ROOT

BATCH = json.dumps({"calls": [CALL] * 100}).encode()
STAGES = (
    ("api.http.lane", "batch_calls", "read the calls"),
    ("api.service.groupcommit", "prepare", "prepare (steps 1-5, 7)"),
    ("api.service.groupcommit", "draft", "draft rows and answers (step 6)"),
    ("api.service.decisionlog:Draft", "log", "log (the run INSERT)"),
    ("api.http.lane", "dumps", "the answer's JSON"),
)


def _timed(spent: dict[str, float], label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[label] += time.process_time() - started

    return timed


def _wrap(spent: dict[str, float]) -> None:
    import importlib

    for where, name, label in STAGES:
        module, _, cls = where.partition(":")
        owner: Any = importlib.import_module(module)
        if cls:
            owner = getattr(owner, cls)
        setattr(owner, name, _timed(spent, label, getattr(owner, name)))


async def _lane(db: str, batches: int, spent: dict[str, float], thread: bool) -> float:
    from api import commands as c
    from api.cli_serve import prepare
    from api.http.app import create_app, open_service, tune_gc
    from api.service.threads import threads_create
    from api.service.tokens import Principal

    service = open_service(db)
    prepare(service, db, str(ROOT / "fixtures" / "workspace"), say=lambda _: None)
    app = create_app(service)
    tune_gc()
    token = Path(f"{db}.admin-token").read_text().strip()
    body = BATCH
    if thread:
        made = threads_create(
            service, Principal("bench", "admin"), c.CreateThread(agent=str(CALL["agent"]))
        )
        body = json.dumps({"calls": [{**CALL, "thread": made.body.id}] * 100}).encode()
    scope = {
        "type": "http", "method": "POST", "path": "/v1/decisions/batch", "query_string": b"",
        "headers": [(b"authorization", f"Bearer {token}".encode()),
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
        "app": app, "root_path": "", "scheme": "http", "http_version": "1.1",
    }  # fmt: skip
    lane = app.lanes["/v1/decisions/batch"]
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    while service.snapshots.cached(service.snapshots.latest) is None:
        await asyncio.sleep(0.05)  # (compiled in the background, as a worker does)
    for _ in range(50):
        await lane(dict(scope), receive, send)
    spent.clear()
    started = time.process_time()
    for _ in range(batches):
        await lane(dict(scope), receive, send)
    took = time.process_time() - started
    if set(status) != {200}:
        raise RuntimeError(f"the lane answered {sorted(set(status))}")
    return took


def _cpu_of(body: Callable[[bytes], bytes], batches: int) -> float:
    """The CPU seconds `batches` calls of `body` take on the bench's batch, once warm."""
    for _ in range(50):
        body(BATCH)
    started = time.process_time()
    for _ in range(batches):
        body(BATCH)
    return time.process_time() - started


def _engine(batches: int) -> float:
    from bench.http_bench import engine_body

    return _cpu_of(engine_body(), batches)


def _floor(batches: int) -> float:
    import jiter
    import orjson

    from api.cli_serve import DEMO_PROFILE
    from api.service.encoding import dumps
    from api.service.entropy import random_hex
    from engine.check import load
    from engine.compile import compile_workspace
    from policy.store.sqlite import SqliteStore

    snapshot = compile_workspace(load([ROOT / "fixtures" / "workspace"]))
    agent = {"id": "demo-support", "name": "Demo support agent", "identity": "", "metadata": {}}
    refs: dict[int, tuple[Any, list[dict[str, Any]], str]] = {}

    def body(raw: bytes) -> bytes:
        calls = jiter.from_json(raw, cache_mode="keys")["calls"]
        now = time.time_ns() // 1_000_000
        ids = random_hex(12 * len(calls))
        rows, answers = [], []
        for i, call in enumerate(calls):
            tool, args = call["tool"], call["args"]
            if type(tool) is not str or type(args) is not dict or call["agent"] != agent["id"]:
                raise ValueError("not the bench's call")
            decision = snapshot.decide_call(DEMO_PROFILE, tool, args, None, agent)
            hit = refs.get(id(decision.reasons))
            if hit is None or hit[0] is not decision.reasons:
                hit = (decision.reasons, [r.to_json() for r in decision.reasons], str(i))
                refs[id(decision.reasons)] = hit
            decision_id = ids[24 * i : 24 * i + 24]
            rows.append(dumps({
                "id": decision_id, "at": now, "agent": agent["id"], "profile": DEMO_PROFILE,
                "tool": tool, "args": args, "effect": decision.effect, "reasons_ref": hit[2],
                "revision": snapshot.revision, "final_args": decision.args,
            }))  # fmt: skip
            answers.append({"id": decision_id, "seq": 0, "effect": decision.effect,
                            "args": decision.args, "reasons": hit[1]})  # fmt: skip
        with store.atomic():
            seqs = store.append_decisions(rows)
        for answer, seq in zip(answers, seqs, strict=True):
            answer["seq"] = seq
        return orjson.dumps({"decisions": answers})

    with tempfile.TemporaryDirectory(prefix="charter-floor-") as tmp:
        store = SqliteStore(Path(tmp) / "floor.db")
        try:
            return _cpu_of(body, batches)
        finally:
            store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.batch_stages")
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--thread", action="store_true", help="the calls in one thread")
    args = parser.parse_args(argv)
    spent: dict[str, float] = defaultdict(float)
    _wrap(spent)
    with tempfile.TemporaryDirectory(prefix="charter-stages-") as tmp:
        lane = asyncio.run(_lane(str(Path(tmp) / "stages.db"), args.batches, spent, args.thread))
    per = 1e6 / (args.batches * 100)
    print("| stage | CPU µs / decision |\n| --- | --- |")
    for _, _, label in STAGES:
        print(f"| {label} | {spent[label] * per:.2f} |")
    rest = lane - sum(spent.values())
    print(f"| the rest (token, body, group commit, transaction) | {rest * per:.2f} |")
    print(f"| **charter's lane, in all** | {lane * per:.2f} |")
    if args.thread:
        return 0
    engine = _engine(args.batches)
    floor = _floor(args.batches)
    print(f"| the engine ceiling's endpoint body | {engine * per:.2f} |")
    print(f"| the floor: that body with a durable log row per decision | {floor * per:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
