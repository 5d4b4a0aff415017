"""The fuzz run's report: `report.json` for machines, `report.md` for people, and
`summary.txt` (what `make fuzz` prints at the end), in `fuzz-report/`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def summary(meta: dict[str, Any], results: list[dict[str, Any]]) -> str:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault(r["kind"], []).append(r)
    lines = [f"fuzz run of {meta['minutes']} minute(s), {meta['seconds']} s of wall time"]
    for kind, rows in groups.items():
        if kind == "hypothesis":
            lane, props = rows[0], rows[1:]
            failed = [r for r in props if r["outcome"] == "failed"]
            stopped = sum(r["outcome"] == "stopped" for r in props)
            lines.append(
                f"hypothesis: {len(props)} properties, {lane['runs']} examples, "
                f"{len(failed)} failed, {stopped} stopped by the budget; "
                f"coverage {lane['coverage']}"
            )
            lines += [f"  FAILED {r['name']}" for r in failed]
            continue
        for r in rows:
            lines.append(
                f"{kind} {r['name']}: {r['outcome']}, {r['runs']} {r['unit']} in "
                f"{r['seconds']} s; {r['coverage']}; {len(r['failures'])} failure(s)"
            )
            lines += [f"  {f['summary'].splitlines()[0] if f['summary'] else ''} -> "
                      f"{f['saved_as']}" for f in r["failures"]]  # fmt: skip
    return "\n".join(lines) + "\n"


def markdown(meta: dict[str, Any], results: list[dict[str, Any]]) -> str:
    out = [
        "# Fuzz report",
        "",
        f"Started {meta['started']}, a budget of {meta['minutes']} minute(s) "
        f"({meta['seconds']} s of wall time); hypothesis properties at most "
        f"{meta['examples_per_property']} examples each; Python {meta['python']}. "
        "What each target checks and what it cannot show: docs/review.md.",
        "",
        "## Summary",
        "",
        "```",
        summary(meta, results).rstrip(),
        "```",
        "",
        "## Targets",
        "",
        "| target | kind | checks | runs | coverage | time (s) | outcome | failures |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        out.append(
            f"| `{_cell(r['name'])}` | {r['kind']} | {_cell(r['checks'])} | "
            f"{r['runs']} {r['unit']} | {_cell(r['coverage'])} | {r['seconds']} | "
            f"{r['outcome']}{' (' + _cell(r['notes']) + ')' if r['notes'] else ''} | "
            f"{len(r['failures'])} |"
        )
    failures = [(r, f) for r in results for f in r["failures"]]
    out += ["", "## Failures", ""]
    if not failures:
        out.append("None found.")
    for r, f in failures:
        out += [
            f"### `{r['name']}`",
            "",
            f"Saved as `{f['saved_as']}` (replayed by `make test`).",
            "",
            "```",
            f["reproduction"].rstrip(),
            "```",
            "",
        ]
    return "\n".join(out) + "\n"


def write_report(out: Path, meta: dict[str, Any], results: list[dict[str, Any]]) -> None:
    (out / "report.json").write_text(json.dumps({"run": meta, "targets": results}, indent=1))
    (out / "report.md").write_text(markdown(meta, results))
    (out / "summary.txt").write_text(summary(meta, results))
