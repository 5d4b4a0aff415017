"""A worker of `charter serve --workers N` ends when its supervisor does.

uvicorn's workers are processes of their own: when the supervisor is killed (SIGKILL, an
OOM kill), nothing tells them, and they would serve on, orphaned, holding the port, so
that a new `charter serve` cannot bind it. So a worker asks the kernel for SIGTERM
when its parent ends (`prctl(PR_SET_PDEATHSIG)`, Linux), which uvicorn takes as a stop:
the worker stops listening at once and closes its connections as they finish. The
supervisor may have ended before the request was made, so the worker then looks at its
parent: another than the supervisor that started it (named in `SUPERVISOR_ENV`) means
it is gone. Where `prctl` is not there, a thread looks at the parent every second.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import threading

SUPERVISOR_ENV = "CHARTER_SUPERVISOR_PID"
PR_SET_PDEATHSIG = 1


def _ask_the_kernel() -> bool:
    """SIGTERM to this process when its parent ends; False where that cannot be asked."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)) == 0
    except (OSError, AttributeError):  # (no such library, no `prctl` in it)
        return False


def _watch(supervisor: int) -> None:
    while os.getppid() == supervisor:
        threading.Event().wait(1.0)
    os.kill(os.getpid(), signal.SIGTERM)


def end_with_supervisor() -> None:
    """In a worker: end (SIGTERM) when the supervisor named in the environment ends."""
    named = os.environ.get(SUPERVISOR_ENV, "")
    if not named.isdigit():  # not a worker of `--workers N`
        return
    supervisor = int(named)
    if not _ask_the_kernel():
        threading.Thread(target=_watch, args=(supervisor,), daemon=True).start()
    elif os.getppid() != supervisor:  # it ended before the kernel was asked
        os.kill(os.getpid(), signal.SIGTERM)
