"""Two workers racing one conditional write (`If-Match`), shared by the resource and role
tests: the store method both writes reach waits for the other's, the two requests start
together, and the approval's first look can be overtaken by another worker."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from api.http.app import create_app
from api.service.core import Service
from tests.api.conftest import Harness, LiveServer


def writes_meet(service: Service, method: str, barrier: threading.Barrier) -> None:
    """Each call of `service.store.<method>` waits (at most a second) for the other
    request's, inside its transaction: two requests whose comparisons both came before
    either's write both get there; one that compares inside its transaction waits for the
    other's to end."""
    real = getattr(service.store, method)

    def meet(*args: Any, **kwargs: Any) -> Any:
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout=1)
        return real(*args, **kwargs)

    setattr(service.store, method, meet)


@contextlib.contextmanager
def two_workers(harness: Harness, other: Service) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """A client of each of two servers on one database file (`--workers 2`)."""
    with (
        LiveServer(create_app(harness.service)) as one,
        LiveServer(create_app(other)) as two,
        httpx.Client(base_url=one, timeout=30) as first,
        httpx.Client(base_url=two, timeout=30) as second,
    ):
        yield first, second


def race(
    first: httpx.Client, second: httpx.Client, send: Callable[[httpx.Client, str], httpx.Response]
) -> dict[str, httpx.Response]:
    """`send(client, name)` on both at once (`by-one`, `by-two`): each one's answer."""
    answers: dict[str, httpx.Response] = {}
    start = threading.Barrier(2)

    def run(client: httpx.Client, name: str) -> None:
        start.wait()
        answers[name] = send(client, name)

    runs = [threading.Thread(target=run, args=(c, n))
            for c, n in ((first, "by-one"), (second, "by-two"))]  # fmt: skip
    for thread in runs:
        thread.start()
    for thread in runs:
        thread.join(30)
    return answers


def overtake_approval_check(monkeypatch: pytest.MonkeyPatch, meanwhile: Callable[[], None]) -> None:
    """An approval's look before its transaction is followed at once by `meanwhile` (another
    worker's change): the comparison that counts is the one its write joins."""
    from api.service import approvals

    real = approvals.check_approve

    def overtaken(*args: Any) -> None:
        real(*args)
        meanwhile()

    monkeypatch.setattr(approvals, "check_approve", overtaken)
