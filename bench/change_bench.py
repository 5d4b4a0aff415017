"""`python -m bench.change_bench` (run by `make bench`): what a change to a large policy
costs until it decides, against the policy it changes (engine/rebuild.py, the `base` of
`check_sources` and `Snapshot`).

For each size (the decision benchmark's workload: 100 profiles of 10 roles, 5,000
toolset tools, roles 100 to a file) it times, median of `--repeats`:
- the whole policy checked and compiled from its text;
- a role added in a file of its own (what `roles.create` makes), checked and compiled
  against the policy;
- one file of 100 roles changed (an upload), the same way;
- `roles.create` through the application core on a real SQLite store, until the new
  revision is the latest compiled one (its reads and writes of the store included).
Each derived snapshot is checked against a whole compile of the same files: every
request of the workload decides the same. The figures go into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from api import commands as c
from api.http.app import open_service
from api.service.manage import manage
from api.service.tokens import Principal
from bench.report import load_average, machine_info
from bench.targets import Conditions, Row, publish
from bench.workload import Workload, generate
from engine.check import check_sources
from engine.compile import Snapshot, compile_workspace

BEGIN, END = "<!-- change-bench:begin -->", "<!-- change-bench:end -->"
TARGET_CREATE_MS = 50.0  # 10,000 roles: a role created through the API, live
TARGET_UPLOAD_MS = 500.0  # 100,000 roles: an upload changing one file, live
T = TypeVar("T")


@dataclass
class ChangeResult:
    roles: int
    whole_s: float
    role_added_ms: float
    file_changed_ms: float
    create_ms: float
    differing: int  # requests a derived snapshot decides otherwise than a whole compile


def _median_ms(fn: Callable[[], T], repeats: int) -> tuple[float, T]:
    times, result = [], None
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    assert result is not None
    return statistics.median(times) * 1000, result


def _derived(files: list[tuple[str, str]], base: Snapshot) -> Snapshot:
    return compile_workspace(check_sources(files, base=base.workspace), base=base)


def _differing(work: Workload, derived: Snapshot, files: list[tuple[str, str]]) -> int:
    whole = compile_workspace(check_sources(files))
    return sum(1 for r in work.requests if derived.decide(r) != whole.decide(r))


def _create_ms(work: Workload, repeats: int) -> float:
    """`roles.create` by an admin through the core until the new revision is live."""
    with tempfile.TemporaryDirectory() as where:
        service = open_service(Path(where) / "charter.db")
        try:
            with service.store.atomic():
                service.upload(work.sources, "bench")
            service.current()
            admin = Principal("bench", "admin")
            times = []
            for n in range(repeats):
                role = c.CreateRole(name=f"made{n}", source=f"role made{n} {{\n  allow *\n}}\n")
                gc.collect()
                start = time.perf_counter()
                manage(service, admin, role)
                service.current()
                times.append(time.perf_counter() - start)
        finally:
            service.store.close()
    return statistics.median(times) * 1000


def run_size(roles: int, requests: int, repeats: int) -> ChangeResult:
    work = generate(roles=roles, requests=requests)
    files = list(work.sources)
    start = time.perf_counter()
    base = compile_workspace(check_sources(files))
    whole_s = time.perf_counter() - start
    added = sorted([*files, ("api/roles/added.charter", "role added {\n  allow svc001.*\n}\n")])
    added_ms, snapshot = _median_ms(lambda: _derived(added, base), repeats)
    differing = _differing(work, snapshot, added)
    index = next(i for i, (path, _) in enumerate(files) if path.startswith("roles/"))
    path, text = files[index]
    changed = list(files)
    changed[index] = (path, text + "role extra {\n  allow svc002.*\n}\n")
    changed_ms, snapshot = _median_ms(lambda: _derived(changed, base), repeats)
    differing += _differing(work, snapshot, changed)
    return ChangeResult(roles, whole_s, added_ms, changed_ms, _create_ms(work, repeats), differing)


def targets(results: list[ChangeResult]) -> list[Row]:
    rows = []
    for r in results:
        if r.roles == 10_000:
            rows.append(
                Row(
                    f"10,000 roles: `roles.create` live <= {TARGET_CREATE_MS:.0f} ms",
                    f"{r.create_ms:.1f} ms",
                    r.create_ms <= TARGET_CREATE_MS,
                )
            )
        if r.roles == 100_000:
            rows.append(
                Row(
                    f"100,000 roles: one file changed, live <= {TARGET_UPLOAD_MS:.0f} ms",
                    f"{r.file_changed_ms:.1f} ms",
                    r.file_changed_ms <= TARGET_UPLOAD_MS,
                )
            )
        rows.append(
            Row(
                f"{r.roles:,} roles: derived decides as whole",
                f"{r.differing} differing",
                r.differing == 0,
            )
        )
    return rows


def render(results: list[ChangeResult], info: dict[str, str], command: str) -> str:
    lines = [
        f"Run: `{command}`, " + ", ".join(f"{k}: {v}" for k, v in info.items()) + ".",
        "",
        "| roles | whole check + compile | role added (own file) | one file of 100 roles "
        "changed | `roles.create` until live | requests decided otherwise |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {r.roles:,} | {r.whole_s:.2f} s | {r.role_added_ms:.1f} ms | "
        f"{r.file_changed_ms:.1f} ms | {r.create_ms:.1f} ms | {r.differing} |"
        for r in results
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.change_bench", description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000", help="role counts")
    parser.add_argument("--requests", type=int, default=2_000, help="requests compared")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each change (median)")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite the docs")
    opts = parser.parse_args(argv)
    load_before = load_average()
    conditions = Conditions()
    results = []
    for size in (int(s) for s in opts.sizes.split(",")):
        print(f"-- {size:,} roles ...", flush=True)
        results.append(run_size(size, opts.requests, opts.repeats))
    command = "python -m bench.change_bench " + " ".join(argv if argv is not None else sys.argv[1:])
    report = render(results, machine_info(load_before), command.strip())
    publish(
        "bench.change_bench", report, targets(results), conditions, (BEGIN, END), not opts.no_docs
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
