"""The cyclic garbage collector, paused while a workspace is built or compiled.

Parsing 10,000 roles allocates ~400,000 long-lived objects (nodes, spans, tuples), and
compiling them as many again (entries, plans, indexes). Each time the young generations
fill up, CPython's collector walks them, and every few times the whole heap, which grows
with the policy: at 100,000 roles the full collections took 4.5 s of a 4.8 s compile and
~0.4 s of a 1.4 s check at 10,000. Paused, nothing is lost: what a build throws away is
freed by reference counting, and the few cycles it makes (generated functions and their
namespaces) are found by the next collection after it.

A serving process (api.http.app.tune_gc) also freezes what a large build made
(`freeze_large_builds`): once the collector is back on, the next collections would walk
every object of the new snapshot, in the young generation and then the middle one, on
the thread that serves decisions (a pause of 1.7 s at 100,000 roles, 0.28 s at 10,000,
measured with a request loop after a whole-policy compile; 0.12 s and 0.09 s frozen,
the loop's own objects). Frozen objects are never walked; they are freed by reference
counting as before (a dropped snapshot is: tests/property/test_snapshot_freed.py). What
the freeze costs: a reference cycle that is garbage at that moment, or that later
becomes garbage through a frozen object, is never collected. Builds make none, so only a
large build freezes, and only in a serving process, whose own start froze its heap the
same way.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused", "freeze_large_builds", "large_build"]

_freezing = False


def large_build() -> int:
    """How many new objects make a build large: the youngest generation's threshold
    (50,000 in a serving process), past which the collector walks them all at once on
    the next allocation (the check or the compile of about 2,000 roles; smaller builds
    cost the collector a few milliseconds)."""
    return max(gc.get_threshold()[0], 1)


def freeze_large_builds(on: bool = True) -> None:
    """Freeze what a large build made as the collector turns back on (a serving process)."""
    global _freezing
    _freezing = on


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector for the block (or the decorated function); nested
    pauses leave it to the outermost to turn it back on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if _freezing and gc.get_count()[0] >= large_build():
                gc.freeze()
            gc.enable()
