"""Reading the decision log keeps nothing: a serving process reads pages for ever.

CPython 3.11's sqlite3 keeps a weak reference for every blob a connection opens until the
connection closes, so reading runs through `blobopen` grew the process by 89 bytes a run
of every page served. Hundreds of pages, whole runs and runs cut by the byte budget,
must leave the traced heap where it was: what was allocated under this test's reads (the
traces are filtered by its stack, so a thread another test left in this process
allocating meanwhile counts for nothing).
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

from policy.store.sqlite import SqliteStore

PAGES = 300  # a kept blob per run read would be 89 B x ~5,000 runs: past 400 KB
STACK = 32  # frames kept a trace: enough to reach the store's code from sqlite3's
# What this test's own reads allocated, down through the store and sqlite3: a thread
# another test in this process left running (a store's checkpoints, a feed) never has
# this file in its stack.
STORE = [tracemalloc.Filter(True, __file__, all_frames=True)]


def _store_heap() -> tracemalloc.Snapshot:
    return tracemalloc.take_snapshot().filter_traces(STORE)


def test_log_pages_leave_nothing_behind(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "log.db")
    try:
        for run in range(40):  # runs of 1 to 10 rows of 40 bytes
            store.append_decisions([b"x" * 40] * (run % 10 + 1))
        last = store.last_seq()

        def read(page: int) -> None:
            after = page * 7 % last
            whole = store.read_decisions(after, 50)
            cut = store.read_decisions(after, 50, max_bytes=130)  # runs read in part
            assert whole and whole[0][0] == after + 1
            assert len(cut) == 3 or cut[-1][0] == last  # 130 bytes: three rows of 40

        for page in range(200):  # whatever the first reads allocate once
            read(page)
        gc.collect()
        tracemalloc.start(STACK)
        try:
            before = _store_heap()
            for page in range(PAGES):
                read(page)
            gc.collect()
            grown = sum(stat.size_diff for stat in _store_heap().compare_to(before, "filename"))
        finally:
            tracemalloc.stop()
        # A run's blob kept would be 89 bytes for each of the ~10 runs of each read.
        assert grown < 20_000, f"{grown} bytes kept after {PAGES} pages"
    finally:
        store.close()
