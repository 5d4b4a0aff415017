"""`charter serve` and `charter token`: what is wrong with a command line, found before
anything is made.

A first start makes the database, its key file and its admin token; a refusal found after
that (uvicorn's, when it could not bind the port) left them behind, and a database path
that SQLite reads its own way (`""`: a temporary database; `:memory:`) was served and
lost. So the values are checked by argparse (exit 2 with the usage), and what is at the
database path, the key and the address is looked at before anything is made (exit 2:
`charter: <why>`, and a `help:` line when there is something to do).
"""

from __future__ import annotations

import argparse
import errno
import os
import socket
import sqlite3
import stat
import sys
from collections.abc import Callable
from pathlib import Path

from api.service.webhookoutbox import url_problem
from policy import identities
from policy.secrets import KEY_ENV, Sealer, SecretKeyError, load_key_file
from policy.store import Store, StoreTooNew
from policy.store.open import StoreUrlError, Target, open_store, parse
from policy.store.probe import SQLITE_NOTADB, probe
from policy.store.refusal import StoreRefused


def refuse(message: str, hint: str | None = None) -> int:
    """What the command line asked for cannot be done: say why (and what to do), exit 2."""
    sys.stderr.write(f"charter: {message}\n" + (f"help: {hint}\n" if hint else ""))
    return 2


def store_refused(exc: StoreRefused | StoreUrlError) -> int:
    """The store will not open the database (policy/store/refusal.py), or no store serves
    the `--db` given (policy/store/open.py): its stable code, why and what to do, exit 2."""
    sys.stderr.write(f"charter: error[{exc.code}]: {exc.message}\nhelp: {exc.help}\n")
    return 2


def os_reason(exc: OSError) -> str:
    return (exc.strerror or type(exc).__name__).lower()


# ---- the command line's values, checked by argparse (exit 2 with the usage) ------------


def missing_database(target: Target) -> int | None:
    """For a command that reads what `charter serve` keeps: exit 2 when `--db` names a
    file that is not there (opening it would make an empty database); None when it is."""
    if target.path is not None and not Path(target.path).is_file():
        return refuse(
            f"no database file at `{target.shown}`",
            "`--db` is the database `charter serve` serves",
        )
    return None


def open_database(target: Target) -> Store | int:
    """The store `--db` names, opened beside the processes that may serve it; or the exit
    code of its refusal (a database a newer charter wrote, one the store refuses, one
    that cannot be read)."""
    try:
        return open_store(target, shared=True)
    except (StoreUrlError, StoreRefused) as exc:
        return store_refused(exc)
    except StoreTooNew as exc:
        return refuse(f"`{target.shown}` was written by a newer charter: {exc}")
    except OSError as exc:
        return refuse(f"cannot open database `{target.shown}`: {os_reason(exc)}")


def _digits(text: str, most: int) -> int | None:
    """`text` as a number of at most `most` ASCII digits (int() also takes ` 8`, `+8`,
    `8_0` and other scripts' digits), else None."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= most else None


def port_number(text: str) -> int:
    port = _digits(text, 5)
    if port is None or port > 65535:
        raise argparse.ArgumentTypeError(
            f"`{text}` is not a port: give a number from 0 to 65535 (0: any free port)"
        )
    return port


def _count(least: int, most: int, refusal: str) -> Callable[[str], int]:
    """An argparse type: a whole number from `least` to `most`, given in ASCII digits,
    else `` `<text>` is not <refusal>``."""
    digits = len(str(most))

    def parse(text: str) -> int:
        value = _digits(text, digits)
        if value is None or not least <= value <= most:
            raise argparse.ArgumentTypeError(f"`{text}` is not {refusal}")
        return value

    return parse


# (`--workers 10**18` is refused by its length, before a number that large is made)
worker_count = _count(1, 10**18 - 1, "a number of worker processes: give 1 or more")
# Seconds, 1 to a year: how long an admitted turn decides on its revision.
turn_lifetime = _count(
    1, 366 * 86_400, "a turn's lifetime: give seconds, from 1 to 31622400 (a year)"
)
# Seconds, 1 to 3600: how often a serving process looks for due schedules.
schedule_tick = _count(1, 3600, "a schedule tick: give seconds, from 1 to 3600")
# MiB, 1 to 1024: the most text (every file's together) a new revision may hold.
policy_mib = _count(1, 1024, "a policy's cap: give MiB, from 1 to 1024")
# Seconds, 1 to 3600: how long a connection may keep a worker waiting on it.
timeout_seconds = _count(1, 3600, "a timeout: give seconds, from 1 to 3600")
# Connections, 1 to 1,000,000: how many one worker serves at once.
connection_cap = _count(1, 1_000_000, "a number of connections: give 1 to 1000000")
# Requests, 1 to 1024: how many one connection may have waiting to be served.
pipeline_depth = _count(1, 1024, "a number of waiting requests: give 1 to 1024")


def host_name(text: str) -> str:
    """An address to listen on: an IP address or a host name, in ASCII (a name in another
    script as its `xn--` form). `--host ""` listened on every interface, where an unset
    variable in `--host "$HOST"` meant no such thing; a byte that is not UTF-8 ended in
    an internal error (uvicorn's TypeError)."""
    if text == "":
        raise argparse.ArgumentTypeError(
            "the host is empty: give the address to listen on, e.g. `127.0.0.1` "
            "(`0.0.0.0` or `::` for every interface)"
        )
    if not text.isascii() or not text.isprintable() or " " in text:
        shown = text.encode("utf-8", "backslashreplace").decode()  # (lone surrogates escaped)
        raise argparse.ArgumentTypeError(
            f"`{shown}` is not a host: give an IP address or a host name in ASCII, e.g. `127.0.0.1`"
        )
    return text


def database_path(text: str) -> str:
    """A database to keep the state in: a path or a URL (policy/store/open.py; a URL no
    store serves is refused by the command, with its code and the forms it takes). SQLite
    reads `""` as a temporary database and `:memory:` as one in memory: either is gone
    when the process ends, with the policy and the tokens in it (and the admin token's
    file beside it is `.admin-token` or `:memory:.admin-token`)."""
    example = "name the database file, e.g. `--db charter.db`"
    try:
        path = parse(text).path
    except StoreUrlError:
        return text  # (refused with its code by the command)
    if path == "":
        raise argparse.ArgumentTypeError(f"the path is empty: {example}")
    if path == ":memory:":
        raise argparse.ArgumentTypeError(
            f"`:memory:` is a database in memory, lost when the process ends: {example}"
        )
    return text


# ---- what is at the paths and the address, looked at before anything is made ----------


def database_refusal(db: str, *, serving: bool) -> tuple[str, str | None] | None:
    """Why `db` cannot be opened, by `charter serve` (which makes a database where there
    is none, or in an empty file) or by `charter token` (a charter database only: a token
    in any other would be served by nobody), with a hint; None when it can be."""
    hint = (
        "name a new file (a first start makes it) or a charter database"
        if serving
        else "`--db` is the file `charter serve --db` serves"
    )
    try:
        found = probe(db)
    except OSError as exc:
        return f"cannot open database `{db}`: {os_reason(exc)}", None
    except sqlite3.Error as exc:
        if getattr(exc, "sqlite_errorcode", None) == SQLITE_NOTADB:
            return f"`{db}` is not a charter database: it is not an SQLite file", hint
        return f"cannot open database `{db}`: {str(exc).lower()}", None
    if found.kind == "other":
        tables = ", ".join(found.tables[:5]) + (", ..." if len(found.tables) > 5 else "")
        return (
            f"`{db}` is not a charter database: it is another program's SQLite database "
            f"(its tables: {tables})",
            hint,
        )
    if serving:
        parent = Path(db).parent
        if found.kind == "missing" and not parent.is_dir():
            return f"cannot open database `{db}`: no directory `{parent}`", None
        return None
    makes = f"`charter serve --db {db}` makes one on its first start"
    if found.kind == "missing":
        return f"no database at `{db}`", makes
    if found.kind == "empty":
        return f"`{db}` is not a charter database: it is empty", makes
    return None


def key_refusal(key: Path) -> tuple[str, str] | None:
    """A malformed secret key (`CHARTER_SECRET_KEY`, or the key file: `--key-file`, by
    default the one beside the database), or a key file others may read, found without
    writing a key file: only one that is there is read."""
    if not (os.environ.get(KEY_ENV) or key.exists()):
        if not key.parent.is_dir():
            return f"cannot make the key file `{key}`: no directory `{key.parent}`", (
                "make the directory, or give `--key-file` a path in one that is there"
            )
        return None  # (a new key is made, with the database)
    hint = "the key is 64 hex digits: the one that sealed this database's secrets"
    try:
        load_key_file(key)
    except SecretKeyError as exc:
        return str(exc), hint
    except UnicodeDecodeError:  # (a key file that is not ASCII)
        return f"the key file `{key}` is malformed", hint
    except OSError as exc:
        return f"cannot read the key file `{key}`: {os_reason(exc)}", hint
    if not os.environ.get(KEY_ENV):
        return _exposed_key_file(key)
    return None


def _exposed_key_file(path: Path) -> tuple[str, str] | None:
    """A key file that users other than its owner may read or write (one made by hand,
    `openssl rand -hex 32 > x.db.key`, is 0644 under the usual umask), refused as ssh
    refuses such a private key: whoever reads it opens every seed and credential it
    seals. The one charter makes is 0600."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if not mode & 0o077:
        return None
    return (
        f"other users may read or write the key file `{path}` (mode {mode:o})",
        f"`chmod 600 {path}`, or give the key in `{KEY_ENV}`",
    )


# Where a database keeps what its key sealed (one of them opening is enough to know the key).
SEALED = ((identities.SECRETS, "sealed_seed"), ("connections", "sealed_credential"),
          ("approvals", "sealed_call"))  # fmt: skip


def sealed_refusal(store: Store, sealer: Sealer) -> tuple[str, str] | None:
    """A well-formed key that does not open this database's secrets (another database's,
    or a new one made because `<db>.key` was lost): found at start, not when an approval
    or a signature first needed it (an internal error then)."""
    for kind, field in SEALED:
        for row in store.page(kind, 0, 1):
            sealed = row.body.get(field)
            if not isinstance(sealed, bytes):
                continue
            try:
                sealer.open(sealed)
            except SecretKeyError:
                return (
                    "the secret key does not open this database's secrets",
                    f"serve it with the key that sealed them (`{KEY_ENV}`, or the key file: "
                    "`--key-file`, by default the one beside the database)",
                )
            return None
    return None


def bound_port(host: str, port: int) -> int:
    """Bind (host, port) once, as the server will (OSError if it cannot: the port is
    taken, the host has no such address), and give the port: `--port 0` the one the
    kernel chose. A plain socket, so a port another server listens on, even one that
    shares it with SO_REUSEPORT, fails here."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe_socket:
        probe_socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe_socket.bind((host, port))
        chosen: int = probe_socket.getsockname()[1]
        return chosen


def listen_refusal(host: str, port: int, exc: OSError) -> tuple[str, str | None]:
    taken = exc.errno == errno.EADDRINUSE
    hint = "another server listens there; `--port 0` takes any free port" if taken else None
    return f"cannot listen on `{host}` port {port}: {os_reason(exc)}", hint


# Milliseconds, 1 to an hour: the delay after a webhook's first failed attempt.
retry_ms = _count(1, 3_600_000, "a delay: give milliseconds, from 1 to 3600000")


def webhook_urls(text: str) -> list[str]:
    """The URLs one `--approval-webhook` gives: `URL`, or `@FILE`, a file of them, one a
    line (blank lines skipped), which keeps a URL that carries a receiver's token out of
    the command line that `ps` shows. A refusal does not quote a URL."""
    if not text.startswith("@"):
        why = url_problem(text)
        if why is not None:
            raise argparse.ArgumentTypeError(
                f"{why} (give e.g. `https://hooks.example.com/charter`, or `@FILE`)"
            )
        return [text]
    path = text[1:]
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        why = os_reason(exc) if isinstance(exc, OSError) else "it is not UTF-8"
        raise argparse.ArgumentTypeError(f"cannot read `{path}`: {why}") from None
    urls = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            why = url_problem(line.strip())
            if why is not None:
                raise argparse.ArgumentTypeError(f"`{path}` line {number}: {why}")
            urls.append(line.strip())
    if not urls:
        raise argparse.ArgumentTypeError(f"`{path}` lists no URL: give one a line")
    return urls
