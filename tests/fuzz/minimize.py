"""A failing input made small: `python -m tests.fuzz.minimize TARGET INPUT OUTPUT SECONDS`.

Delta debugging over the input's lines, then its bytes: a part is dropped when the
target still fails the same way without it (the same exception type, raised from the
same line). No atheris: the target runs here as `make test` replays it. An input that
fails only as libFuzzer judged it (a timeout, memory) and not here is kept whole.
Prints the failure's signature and traceback.
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from tests.fuzz.targets import TARGETS


def signature(run: Callable[[bytes], None], data: bytes) -> str | None:
    """How `run` fails on `data`: the exception's type and the line that raised it."""
    try:
        run(data)
    except Exception as exc:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return f"{type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}"
    return None


def _pieces(data: bytes, lines: bool) -> list[bytes]:
    return data.splitlines(keepends=True) if lines else [data[i : i + 1] for i in range(len(data))]


def shrink(run: Callable[[bytes], None], data: bytes, until: float) -> bytes:
    want = signature(run, data)
    if want is None:
        return data
    for lines in (True, False):
        parts = _pieces(data, lines)
        chunk = max(1, len(parts) // 2)
        while chunk >= 1 and time.monotonic() < until:
            index, changed = 0, False
            while index < len(parts) and time.monotonic() < until:
                trial = parts[:index] + parts[index + chunk :]
                if trial and signature(run, b"".join(trial)) == want:
                    parts, changed = trial, True
                else:
                    index += chunk
            if not changed:
                chunk //= 2
        data = b"".join(parts)
    return data


def main() -> None:
    name, source, out, seconds = sys.argv[1:5]
    run = TARGETS[name].run
    data = Path(source).read_bytes()
    small = shrink(run, data, time.monotonic() + float(seconds))
    Path(out).write_bytes(small)
    print(signature(run, small) or "not reproduced outside libFuzzer (a timeout or memory)")
    try:
        run(small)
    except Exception:
        traceback.print_exc(file=sys.stdout)


if __name__ == "__main__":
    main()
