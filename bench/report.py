"""What every bench writes its figures with: the machine, the load, docs/benchmarks.md."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def machine_info(load_before: str) -> dict[str, str]:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "machine": f"{platform.system()} {platform.machine()}, {cpu}, {os.cpu_count()} CPUs",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "load average (1/5/15 min) before / after": f"{load_before} / {load_average()}",
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def write_docs(report: str, begin: str = BEGIN, end: str = END) -> None:
    """`report` in docs/benchmarks.md between the markers `begin` and `end` (added at
    its end when missing)."""
    text = DOCS.read_text(encoding="utf-8") if DOCS.exists() else f"{begin}\n{end}\n"
    if begin not in text or end not in text:
        text += f"\n{begin}\n{end}\n"
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    DOCS.write_text(f"{head}{begin}\n{report}{end}{tail}", encoding="utf-8")
