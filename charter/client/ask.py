"""A request of the client and how its answer is read, apart from any transport: the
one mapping from an operation to HTTP and back that `Client` and `AsyncClient` share,
each of them adding the call that sends it (httpx, blocking or on an event loop)."""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from api.http.answers import Pending
from api.service.encoding import loads
from charter.client.errors import NoAnswer, Paused, problem_of

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Ask(Generic[T]):
    """One request: its method, path (its ids already quoted), query, headers and JSON
    body; `read` turns the body of a success answer into the result; `waits` is how long
    the server may hold the answer back (a long poll), on top of the client's timeout."""

    method: str
    path: str
    read: Callable[[bytes], T]
    body: bytes | None = None
    query: tuple[tuple[str, str], ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    waits: float = 0.0
    # Success statuses besides 2xx whose body `read` takes (`/readyz`'s 503)
    also: frozenset[int] = frozenset()

    def answer(self, status: int, content: bytes) -> T:
        """The result of the answer `status`, `content`; a refusal raises ProblemError, a
        paused management request Paused, an answer that is not the operation's NoAnswer."""
        if not (200 <= status < 300 or status in self.also):
            raise problem_of(status, content)
        try:
            # (no operation of the client answers 202 but an agent's paused request)
            if status == 202:
                raise Paused(reader(Pending)(content))
            return self.read(content)
        except (ValueError, ValidationError) as exc:  # (not JSON, or not the model)
            raise NoAnswer(f"the answer to {self.method} {self.path} is not the API's") from exc


def reader(model: type[M]) -> Callable[[bytes], M]:
    """The body as `model`, its numbers exact (a Decimal where no float is the number)."""
    return lambda content: model.model_validate(loads(content))


# An operation of several requests: a generator that yields each request and is sent its
# result, and returns the operation's (each client drives it with its own transport).
Plan = Generator[Ask[Any], Any, T]
