"""What stops a `charter` verb, said as text on stderr or, for a verb given `--format
json`, as one JSON document on stdout: a script reads every outcome from stdout, where
text in place of the JSON it asked for broke its parser (docs/dsl.md, "The command
line"). The JSON forms:

* the diagnostics of a workspace or a file that does not load or check, or of a request
  naming what the workspace lacks (E09xx): an array of diagnostic objects, as `charter
  check --format json` prints them (exit 1);
* a usage error the verb finds itself: `{"error": "usage", "message": ..., "help": ...}`
  (exit 2);
* an internal error (a bug): `{"error": "internal", "message": ..., "help": ...}` (exit 3).

A result is never an object with an `error` key, nor an array of objects with a `code`,
so the three are told apart from any result by their shape as well as by the exit code.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping

from api.service.encoding import dumps_text
from policy.diagnostics import Diagnostic, render_all, to_json

USAGE = 2
INTERNAL = 3


def out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def err(text: str) -> None:
    sys.stderr.write(text if text.endswith("\n") else text + "\n")


def diagnostics(found: Iterable[Diagnostic], sources: Mapping[str, str], fmt: str) -> int:
    """Diagnostics that stop the verb: rendered on stderr, or their JSON array; exit 1."""
    if fmt == "json":
        out(to_json(found))
    else:
        err(render_all(found, sources))
    return 1


def _problem(kind: str, message: str, hint: str | None) -> str:
    return dumps_text({"error": kind, "message": message, "help": hint})


def usage(message: str, hint: str | None = None, fmt: str = "text") -> int:
    """The command line asks for what cannot be done: `charter: <message>` (and its `=
    help:` line) on stderr, or the usage document; exit 2."""
    if fmt == "json":
        out(_problem("usage", message, hint))
    else:
        err(f"charter: {message}" + (f"\n  = help: {hint}" if hint else ""))
    return USAGE


def internal(exc: BaseException, fmt: str) -> int:
    """A bug: one line naming the exception's type (never its message, which may hold
    internals, nor a traceback: `CHARTER_DEBUG=1` shows that); exit 3."""
    message = f"internal error ({type(exc).__name__}); this is a bug, please report it"
    if fmt == "json":
        out(_problem("internal", message, None))
    else:
        err(f"charter: {message}")
    return INTERNAL
