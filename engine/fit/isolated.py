"""One fit check (or tool listing) in a child process that is killed at its deadline.

z3 honours neither its timeout nor an interrupt while it takes in long string constants or
large regular expressions: seven `!=` of 4,000-character literals, under every size cap of
`encode.py`, held one check 7 s with a deadline of 2 s. A thread cannot be stopped; a
process can. So `run` forks, the child runs the check and writes its answer to a pipe,
and the parent waits for it until the deadline plus MARGIN_MS, then kills the child and
answers `timeout` for the whole check: does not fit, which is sound.

The child is forked from the calling process, so it has the caller's snapshot (and
everything else) copy-on-write: nothing is sent to it but the answer back. A check that
does nothing takes 5 ms so in a process holding the benchmark's 1,000 compiled roles
(pickling that workspace to a worker would take 0.5 s, and as long again to read it).

The fork is made holding `Z3_LOCK`, which every use of z3 in this process holds, so no
other thread is inside z3 (and none of its internal locks is held) when the child is
made. The child runs only the check: it closes every inherited descriptor but its pipe
(a client's socket, the database), never runs the parent's exit handlers (`os._exit`),
and keeps the collector off (it lives for one check; collecting would copy the parent's
pages for nothing).

The child may grow by at most MEMORY_MB over the address space it was forked with (an
`RLIMIT_AS` set in the child, and z3's own `memory_max_size`): a question that makes z3
grow past it ends as `unsupported` ("does not fit", sound), never the machine's memory.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import resource
import select
import signal
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import z3

from engine.fit.result import FitResult, Violation
from engine.fit.terms import Z3_LOCK
from policy.diagnostics import CharterError

# How long after its deadline a check's process is killed: the time to fork, to write the
# violations found by the deadline, and to read them.
MARGIN_MS = 250
_CHUNK = 1 << 16
# How much a check's process may grow beyond what it was forked with.
MEMORY_MB = 1024
# Python 3.12 on warns that forking a process that has threads may deadlock the child on a
# lock another thread held: the child here runs the check alone, no thread inside z3.
warnings.filterwarnings("ignore", r"This process \(pid=\d+\) is multi-threaded", DeprecationWarning)


class Failed(RuntimeError):
    """What the child raised, by its type's name alone (its message may quote the text)."""

    def __init__(self, type_name: str) -> None:
        super().__init__(f"the isolated call failed with {type_name}")
        self.type_name = type_name


def out_of_time() -> FitResult:
    """The answer of a check stopped at its deadline."""
    return FitResult.of(
        [
            Violation(
                "timeout",
                "the solver ran out of time and was stopped at the deadline; treated as "
                "not fitting",
            )
        ]
    )


def run(fn: Callable[..., FitResult], *args: Any, timeout_ms: int, **kwargs: Any) -> FitResult:
    """`fn(*args, timeout_ms=timeout_ms, **kwargs)` in a child process, given at most
    `timeout_ms` + MARGIN_MS of wall-clock time. A CharterError it raises is raised here
    with its diagnostics; any other exception is a RuntimeError naming its type."""
    try:
        kind, value = call(fn, *args, timeout_ms=timeout_ms, **kwargs)
    except Failed as exc:
        raise RuntimeError(f"the fit check failed with {exc.type_name}") from None
    if kind == "timeout":
        return out_of_time()
    if kind == "memory":
        return out_of_memory()
    if kind == "died":
        return FitResult.of(
            [
                Violation(
                    "unsupported",
                    "the solver's process ended without an answer; treated as not fitting",
                )
            ]
        )
    assert isinstance(value, FitResult)
    return value


def call(fn: Callable[..., Any], *args: Any, timeout_ms: int, **kwargs: Any) -> tuple[str, Any]:
    """`fn(*args, timeout_ms=timeout_ms, **kwargs)` in a child process, given at most
    `timeout_ms` + MARGIN_MS of wall-clock time: `("ok", what it returned)`, or
    `("timeout", None)`, `("memory", None)` (it needed more than MEMORY_MB), `("died",
    None)` (its process ended without an answer). A CharterError it raises is raised here
    with its diagnostics; any other exception is `Failed`, naming its type alone."""
    if not hasattr(os, "fork"):  # (no process to kill: it runs here, unbounded)
        with Z3_LOCK:
            return "ok", fn(*args, timeout_ms=timeout_ms, **kwargs)
    read, write = os.pipe()
    try:
        with Z3_LOCK:
            pid = os.fork()
    except BaseException:
        os.close(read)
        os.close(write)
        raise
    if pid == 0:  # pragma: no cover (the child; its answer is what the parent reads)
        _child(read, write, fn, args, kwargs, timeout_ms)
    os.close(write)
    try:
        data = _answer(read, time.monotonic() + (timeout_ms + MARGIN_MS) / 1000)
    finally:
        os.close(read)
        _reap(pid)
    if data is None:
        return "timeout", None
    if not data:  # (it died without answering: killed from outside, out of memory)
        return "died", None
    kind, value = pickle.loads(data)
    if kind == "charter":
        raise CharterError(value)
    if kind == "error":
        raise Failed(value)
    return kind, value


def _child(
    read: int,
    write: int,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    timeout_ms: int,
) -> None:  # pragma: no cover (runs in the child)
    status = 1
    try:
        gc.disable()
        os.close(read)
        os.closerange(3, write)
        os.closerange(write + 1, _max_fd())
        outcome: tuple[str, Any]
        try:
            _cap_memory(MEMORY_MB)
            outcome = ("ok", fn(*args, timeout_ms=timeout_ms, **kwargs))
        except MemoryError:
            outcome = ("memory", None)
        except CharterError as exc:
            outcome = ("charter", list(exc.diagnostics))
        except BaseException as exc:  # (only its type: its message may quote the text)
            outcome = ("error", type(exc).__name__)
        data = memoryview(pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL))
        while data:
            data = data[os.write(write, data) :]
        os.close(write)  # (the answer is read now, not once this process is torn down)
        status = 0
    finally:
        os._exit(status)


def out_of_memory() -> FitResult:
    """The answer of a check that needed more than MEMORY_MB."""
    return FitResult.of(
        [
            Violation(
                "unsupported",
                f"the solver needed more than {MEMORY_MB} MB; treated as not fitting",
            )
        ]
    )


def _cap_memory(megabytes: int) -> None:  # pragma: no cover (runs in the child)
    """Let this process grow by at most `megabytes` of address space, z3 included."""
    z3.set_param("memory_max_size", megabytes)
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # (no /proc: z3's own cap alone)
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = size + (megabytes << 20)
    if hard == resource.RLIM_INFINITY or limit < hard:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _max_fd() -> int:
    try:
        return max(int(os.sysconf("SC_OPEN_MAX")), 1024)
    except (ValueError, OSError):
        return 65536


def _answer(fd: int, until: float) -> bytes | None:
    """What the child wrote, once it closed the pipe; None if that was not by `until`."""
    poller = select.poll()  # (not select(): a server's descriptors go past 1,024)
    poller.register(fd, select.POLLIN)
    chunks: list[bytes] = []
    while True:
        left = until - time.monotonic()
        if left <= 0 or not poller.poll(max(1, int(left * 1000))):
            if time.monotonic() >= until:
                return None
            continue
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _reap(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)  # (a child that answered is exiting: no matter)
    if os.waitpid(pid, os.WNOHANG) == (0, 0):
        # (its memory is still being freed, 3-4 ms at 1,000 roles: not the check's time)
        threading.Thread(target=os.waitpid, args=(pid, 0), daemon=True).start()
