"""engine/collector.py: builds run with the cyclic collector paused, and in a serving
process a large build's objects are frozen out of the collector's walks as it turns
back on. Run in a child process: freezing is the whole process's state."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import gc, weakref
from bench.workload import generate
from engine import collector
from engine.check import check_sources
from engine.compile import compile_workspace

def build(files):
    return compile_workspace(check_sources(files))

large = list(generate(roles=3000, requests=10).sources)
small = [(p.name, p.read_text()) for p in sorted(__import__("pathlib").Path(
    "fixtures/workspace").glob("*.charter"))]
gc.collect(); gc.freeze(); gc.set_threshold(50_000, 20, 100)  # (as tune_gc)

# Off (a library's process): nothing is frozen, the collector walks the build.
frozen = gc.get_freeze_count()
snapshot = build(large)
assert gc.get_freeze_count() == frozen, "froze while off"
assert len(gc.get_objects()) >= collector.large_build()
del snapshot; gc.collect()

collector.freeze_large_builds()
# A small build: left to the collector.
frozen = gc.get_freeze_count()
kept = build(small)
assert gc.get_freeze_count() == frozen, "a small build was frozen"
gc.collect()

# A large build: frozen, so the collector has nothing of it to walk.
frozen = gc.get_freeze_count()
snapshot = build(large)
grown = gc.get_freeze_count() - frozen
assert grown >= collector.large_build(), grown
assert gc.get_count()[0] < 1000, gc.get_count()
tracked = len(gc.get_objects())
assert tracked < grown / 10, (tracked, grown)
# Still freed by reference counting when dropped, collector or not.
gc.disable()
watched = weakref.ref(snapshot)
del snapshot
assert watched() is None
assert gc.get_freeze_count() < frozen + grown / 10, (gc.get_freeze_count(), frozen, grown)
print("ok", grown)
"""


def test_a_large_build_is_frozen_in_a_serving_process_and_freed_when_dropped() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ok ")
