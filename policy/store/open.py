"""Which store a `--db` names, and the one place a store is built.

A target is a path (`charter.db`, `/var/lib/charter/charter.db`), an SQLite URL or a
PostgreSQL URL:

- `sqlite:///rel/path.db`: the path after the third slash, relative to the working
  directory; `sqlite:////abs/path.db`: an absolute path (the fourth slash is its root),
  as SQLAlchemy reads them. No host, query or fragment: a path is all SQLite takes here.
- `postgresql://...` or `postgres://...`: handed as it is to `PostgresStore(url,
  shared=...)` from the module `policy.store.postgres`, imported only when such a URL is
  opened, so a charter without that module (or its driver) serves files all the same,
  and says which scheme it cannot serve instead of an ImportError.

Anything else with a scheme (`mysql://`, `file://`, `sqlite://host/x`) is a `StoreUrlError`
with a stable code (docs/errors.md, "D02xx"): a typo in a URL is never taken for a file
name. A text without `://` is a path, whatever characters it holds.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from policy.store import Store

# The codes, each with its section in docs/errors.md ("D02xx: choosing the store").
BAD_URL = "D0201"  # a scheme charter does not serve, or a malformed `sqlite:` URL
NO_BACKEND = "D0202"  # a PostgreSQL URL, and this charter has no PostgreSQL store

SQLITE = "sqlite"
POSTGRESQL = "postgresql"
_POSTGRES_SCHEMES = ("postgresql", "postgres")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
ACCEPTED = (
    "a file path (`charter.db`), `sqlite:///relative/path.db`, `sqlite:////absolute/path.db`, "
    "or `postgresql://user@host/dbname` (`postgres://` too)"
)
_POSTGRES_MODULE = "policy.store.postgres"


class StoreUrlError(ValueError):
    """A `--db` no store serves: `code` (stable), `message` (one line, lowercase) and
    `help` (the forms accepted, or what to install)."""

    def __init__(self, code: str, message: str, help: str) -> None:
        super().__init__(f"error[{code}]: {message}")
        self.code = code
        self.message = message
        self.help = help


@dataclass(frozen=True, slots=True)
class Target:
    """What a `--db` names: `backend` (`sqlite` or `postgresql`); `path`, the file of an
    SQLite store (None for a server); `url`, the text as given."""

    backend: str
    path: str | None
    url: str

    @property
    def shown(self) -> str:
        """The target as messages name it: a URL's password replaced by `***`."""
        return redact(self.url) if self.path is None else self.path


def redact(url: str) -> str:
    """`url` without its password (`postgresql://app:***@db/charter`)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def parse(target: str | Path) -> Target:
    """The store `target` names; StoreUrlError (D0201) for a scheme no store serves or an
    `sqlite:` URL that names no file."""
    text = str(target)
    found = _SCHEME.match(text)
    if found is None:
        return Target(SQLITE, text, text)
    scheme = found[1].lower()
    if scheme in _POSTGRES_SCHEMES:
        return Target(POSTGRESQL, None, text)
    if scheme == SQLITE:
        return Target(SQLITE, _sqlite_path(text), text)
    raise StoreUrlError(
        BAD_URL,
        f"`{redact(text)}` names a `{scheme}://` database, which charter does not serve",
        f"give {ACCEPTED}",
    )


def _sqlite_path(url: str) -> str:
    rest = url[len("sqlite://") :]
    why = None
    if not rest.startswith("/"):
        why = "it names a host; the path starts after a third slash"
    elif "?" in rest or "#" in rest:
        why = "it has a query or a fragment; give the path alone"
    elif rest == "/":
        why = "it names no file"
    if why is not None:
        raise StoreUrlError(BAD_URL, f"`{url}` is not an SQLite URL charter reads: {why}",
                            f"give {ACCEPTED}")  # fmt: skip
    return rest[1:]  # (`sqlite:///a.db`: `a.db`; `sqlite:////srv/a.db`: `/srv/a.db`)


def open_store(
    target: str | Path | Target, *, shared: bool = False, timeout: float = 30.0
) -> Store:
    """The store `target` names, opened. `shared`: one of several processes serving it
    (`charter serve --workers N`, or `charter token` beside them); `timeout`: how long an
    SQLite transaction waits for another writer. What opening raises goes up as it is
    (StoreRefused, StoreTooNew, sqlite3.Error, OSError); StoreUrlError for a `--db` no
    store of this charter serves."""
    found = target if isinstance(target, Target) else parse(target)
    if found.path is not None:
        from policy.store.sqlite import SqliteStore

        return SqliteStore(found.path, shared=shared, timeout=timeout)
    return _postgres_class(found)(found.url, shared=shared)  # type: ignore[no-any-return]


def _postgres_class(target: Target) -> type:
    """`PostgresStore`, imported now: only a PostgreSQL URL needs it (or its driver)."""
    scheme = target.url.partition("://")[0]
    try:
        module = importlib.import_module(_POSTGRES_MODULE)
    except ModuleNotFoundError as exc:
        sqlite = "a file path or a `sqlite:///` URL"
        if exc.name == _POSTGRES_MODULE:
            why, hint = "this charter has no PostgreSQL store", f"this charter serves {sqlite}"
        else:  # (its driver is not installed)
            why = f"its driver `{exc.name}` is not installed"
            hint = f"install `{exc.name}`, or serve {sqlite}"
        raise StoreUrlError(
            NO_BACKEND, f"cannot serve the `{scheme}://` database `{target.shown}`: {why}", hint
        ) from None
    store_class: type = module.PostgresStore
    return store_class
