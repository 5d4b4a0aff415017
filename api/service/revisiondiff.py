"""The semantic diff of two stored revisions (`GET /v1/revisions/{n}/diff`): per profile,
what of its access got wider or narrower, as `charter diff` answers it for two
directories (engine.diff). Revision 0 is the empty policy, before the first upload: the
diff of revision 1 against it is every profile added."""

from __future__ import annotations

from typing import Any

from api.service.core import Service
from api.service.errors import ServiceError
from engine.check import check_sources
from engine.diff import diff_workspaces
from engine.workspace import Workspace
from policy.diagnostics import CharterError

# Each of the solver's questions (one direction of one profile) takes at most this long;
# one that does not finish is an `unknown` change, counted as wider, as in `charter diff`.
QUESTION_MS = 2000
# The whole comparison, in its own process, at most this long: past it, 503 `unavailable`.
TOTAL_MS = 30_000
EMPTY = Workspace(tools={}, toolsets={}, roles={}, hooks={}, profiles={}, tests=())


def workspace(service: Service, number: int) -> Workspace:
    """Revision `number`'s workspace (0: the empty policy): its compiled one when it is
    at hand here, else its files checked. 404 `revision-not-found` past the latest;
    409 `revision-does-not-check` for a stored revision this version refuses."""
    if number == 0:
        return EMPTY
    compiled = service.snapshots.cached(number)
    whole = None if compiled is None else compiled.whole_loaded()
    if whole is not None:
        return whole
    _, files = service.files(number)  # (revision-not-found)
    try:
        return check_sources(files)
    except CharterError:
        raise ServiceError(
            "revision-does-not-check",
            f"revision {number} does not check with this version of charter",
        ) from None


def compare(old: Workspace, new: Workspace, *, timeout_ms: int) -> dict[str, Any]:
    """What `charter diff --format json` prints for `old` and `new` (each question of the
    solver bounded by QUESTION_MS; `timeout_ms` bounds the whole, in its process)."""
    return diff_workspaces(old, new, timeout_ms=min(QUESTION_MS, timeout_ms)).to_json()
