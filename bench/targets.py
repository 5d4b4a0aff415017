"""Every benchmark target in one table: what each bench of `make bench` last measured.

Each bench (`bench.run`, `bench.change_bench`, `bench.start_bench`, `bench.http_bench`,
`bench.store_bench`) records its verdict rows here with the conditions it ran under: the
load average before and after and the share of a core the bench's own process had (its
CPU time over its wall time). The rows are kept in `bench/targets.json` by bench and
target, so a bench run alone replaces its own rows and keeps the others', and the table
in docs/benchmarks.md (between `<!-- targets:begin -->` and `<!-- targets:end -->`) is
written from all of them.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.report import load_average, write_docs

FILE = Path(__file__).resolve().parent / "targets.json"
BEGIN, END = "<!-- targets:begin -->", "<!-- targets:end -->"


@dataclass(frozen=True)
class Row:
    target: str  # what is asked, with its size ("100,000 roles: ... <= 10 s")
    figure: str  # what was measured
    ok: bool


class Conditions:
    """The run's conditions, from when it was made to when `said` is asked."""

    def __init__(self) -> None:
        self.load_before = load_average()
        self.wall = time.perf_counter()
        self.cpu = time.process_time()

    def said(self) -> str:
        wall = time.perf_counter() - self.wall
        share = (time.process_time() - self.cpu) / wall if wall > 0 else 0.0
        day = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        return f"{day}; load {self.load_before} / {load_average()}; CPU share {share:.0%}"


def record(bench: str, rows: list[Row], conditions: Conditions, docs: bool = True) -> str:
    """Keep `bench`'s rows (replacing what it recorded before) and write the table; the
    table as Markdown."""
    kept: dict[str, list[dict[str, object]]] = {}
    if FILE.exists():
        kept = json.loads(FILE.read_text(encoding="utf-8"))
    said = conditions.said()
    kept[bench] = [{**asdict(row), "run": said} for row in rows]
    table = render(kept)
    if docs:
        spare = FILE.with_name(f"{FILE.name}.{os.getpid()}.new")
        spare.write_text(json.dumps(kept, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        spare.replace(FILE)
        write_docs(table, BEGIN, END)
    return table


def verdict_lines(rows: list[Row]) -> list[str]:
    """A bench's own table of its targets, as it prints them after its figures."""
    lines = ["", "| target | figure | verdict |", "| --- | --- | --- |"]
    return lines + [f"| {t.target} | {t.figure} | {'PASS' if t.ok else 'FAIL'} |" for t in rows]


def publish(
    bench: str,
    report: str,
    rows: list[Row],
    conditions: Conditions,
    markers: tuple[str, str],
    docs: bool = True,
) -> None:
    """A bench's last step: print its report and its verdicts, record its targets, and
    (with `docs`) write the report into docs/benchmarks.md between `markers`: the
    verdicts are in the one table of every target there."""
    print(report + "\n".join(verdict_lines(rows)))
    record(bench, rows, conditions, docs=docs)
    if docs:
        write_docs(report, *markers)
        print("figures written to docs/benchmarks.md")


def render(kept: dict[str, list[dict[str, object]]]) -> str:
    lines = [
        "| target | figure | verdict | bench | run (date; load before / after; CPU share) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for bench in sorted(kept):
        for row in kept[bench]:
            verdict = "PASS" if row["ok"] else "FAIL"
            lines.append(
                f"| {row['target']} | {row['figure']} | {verdict} | `{bench}` | {row['run']} |"
            )
    return "\n".join(lines) + "\n"
