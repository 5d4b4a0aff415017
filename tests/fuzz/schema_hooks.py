"""schemathesis's hooks and check for `make fuzz`'s run against a live `charter serve`
(SCHEMATHESIS_HOOKS=tests.fuzz.schema_hooks; CHARTER_FUZZ_DB names the server's SQLite
file): besides schemathesis's own checks (no 5xx, the status, content type, headers and
body each as `/openapi.json` says),

- `refusal_writes_nothing`: a refusal (4xx) left the database as it was (every table
  compared before and after the request, tests/api/fingerprint.py; the fuzz sends the
  admin's token, whose requests no policy decides, so no refusal logs a decision), and
  it is problem+json with a code of api/http/codes.py given at its status.

The database is read before each request and after its answer, on a read-only connection
of its own; schemathesis runs with one worker, so nothing else writes in between.
"""

from __future__ import annotations

import os
from typing import Any

import schemathesis

from api.http.codes import CODES
from tests.api.fingerprint import fingerprint, reader

Print = dict[str, tuple[Any, ...]]
_state: dict[str, Any] = {"before": None}
_pairs: dict[int, tuple[Print, Print]] = {}


def _read() -> Print:
    # A connection a read: schemathesis runs its phases on threads of their own.
    conn = reader(os.environ["CHARTER_FUZZ_DB"])
    try:
        return fingerprint(conn)
    finally:
        conn.close()


@schemathesis.hook
def before_call(ctx: Any, case: Any, kwargs: dict[str, Any]) -> None:
    _state["before"] = _read()


@schemathesis.hook
def after_call(ctx: Any, case: Any, response: Any) -> None:
    if _state["before"] is None:
        return
    if len(_pairs) > 256:
        _pairs.clear()
    _pairs[id(response)] = (_state["before"], _read())
    _state["before"] = None


@schemathesis.check
def refusal_writes_nothing(ctx: Any, response: Any, case: Any) -> bool | None:
    status = response.status_code
    if not 400 <= status < 500:
        return None
    problem = response.json() if "json" in response.headers.get("content-type", [""])[0] else {}
    code = CODES.get(str(problem.get("code"))) if isinstance(problem, dict) else None  # type: ignore[call-overload]
    if code is None or code.status != status:
        raise AssertionError(f"a {status} refusal without a catalogued code at its status")
    pair = _pairs.get(id(response))
    if pair is None:
        return None
    before, after = pair
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if changed:
        raise AssertionError(f"a {status} refusal (`{problem.get('code')}`) wrote {changed}")
    return True
