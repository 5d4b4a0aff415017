"""A first start: a new database made whole, or nothing made.

Made in place step after step (the file, its tables, the key file, the policy, the demo
agent, its identity and connections, each in a transaction of its own), a first start
that fails on a full disk would leave a database without its demo seed, which no later
start makes, or an empty key file that every later start refuses.

So `charter serve` makes a new database (where there is none, or an empty one with no
other database's files beside it: policy/store/evidence.py) under a name of its own
beside the path, `<db>.<16 hex digits>.new`: its tables, the `--workspace` policy and
the demo seed. Its `-wal` is then copied into it, it is flushed to the disk and renamed
onto the path (linked, when nothing is there): that rename is the step that makes the
database, and any failure before it removes what was made, the key file too when the
first start made it. The key file (unless `CHARTER_SECRET_KEY` gives the key) is made
first, whole and flushed, so a database is never at the path without its key; one a
killed first start leaves alone is taken by the next, as a key made by hand is.

The admin token comes once the database is in place (api/cli_serve.py,
`issue_admin_token`): its file is written inside the transaction that stores its hash,
and removed if that transaction fails, so a restart after any failure issues it then.

A full disk at any step (ENOSPC, EDQUOT, SQLITE_FULL) is `D0104`, exit 2.

A store kept by a server (PostgreSQL) has no file to make under another name. Its first
start loads the workspace in a transaction of its own (a revision, as any later start's
load), then seeds the demo and issues the admin token in one transaction of the store's
(`build_on_server`, api/cli_serve.py `prepare_on_server`). A start that fails or is
killed before that COMMIT leaves no demo and no token, and the next start, finding no
token issued, seeds and issues then; one that committed leaves a database every later
start takes as it is. The key file (`--key-file`) is made before it, whole, as for
SQLite; made for a database that turns out to hold secrets, it is removed and the start
refused.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

from api.service.core import Service
from policy.secrets import KEY_ENV, Sealer, load_key_file
from policy.store import Store
from policy.store.evidence import is_new
from policy.store.refusal import DISK_FULL, StoreRefused
from policy.store.sqlite import SqliteStore

_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_SQLITE_FULL = 13
_SQLITE_IOERR = 10
LOW_SPACE = 1 << 20  # bytes: below this, an I/O error of SQLite's is taken for a full disk


def is_disk_full(exc: BaseException | None, where: str | None = None) -> bool:
    """Whether `exc`, or what it was raised from, says the disk is full. SQLite reports a
    full disk met while it sizes its `-shm` as an I/O error (SQLITE_IOERR, its errno
    dropped): with `where` (the database's path), such an error on a file system with
    less than `LOW_SPACE` left is a full disk too."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
            return True
        code = getattr(exc, "sqlite_errorcode", None)
        if isinstance(code, int) and code & 0xFF == _SQLITE_FULL:
            return True
        if isinstance(code, int) and code & 0xFF == _SQLITE_IOERR and where is not None:
            return _space_left(where) < LOW_SPACE
        exc = exc.__cause__ or exc.__context__
    return False


def _space_left(where: str) -> int:
    try:
        found = os.statvfs(os.path.dirname(os.path.realpath(where)) or ".")
    except OSError:
        return LOW_SPACE
    return found.f_bavail * found.f_frsize


def disk_full(db: str, *, made: bool) -> StoreRefused:
    """The refusal of a start that ran out of space: on a first start (`made` False) no
    database was made; else the database is as it was."""
    what = f"no database was made at `{db}`" if not made else f"`{db}` is as it was"
    return StoreRefused(
        DISK_FULL,
        f"the disk is full: {what}",
        f"free space on the file system that holds `{db}`, then start again",
    )


def build(db: str, make: Callable[[Service], None], max_policy_bytes: int, key: Path) -> None:
    """Make the SQLite database at `db` (nothing there, or an empty file) with what `make`
    puts in it, all of it or none, sealing its secrets with the key in `key` (the key
    file, `--key-file` or `<db>.key`): see the module's docstring. StoreRefused (`D0104`)
    when the disk is full; what `make` raises (the workspace's errors) goes up as it is."""
    target = os.path.realpath(db)  # (through a symlink, as the store opens it)
    spare = f"{target}.{secrets.token_hex(8)}.new"
    key_given = bool(os.environ.get(KEY_ENV)) or key.exists()
    try:
        sealer = Sealer(load_key_file(key))  # (made now, whole, when it is not given)
        store = SqliteStore(spare, mark=False)
        try:
            service = Service(store, sealer)
            service.max_policy_bytes = max_policy_bytes
            make(service)
            store.fold_wal()
        finally:
            store.close()
        _flush(spare)
        _place(spare, target)
    except BaseException as exc:
        if not key_given:
            key.unlink(missing_ok=True)
        if is_disk_full(exc, target):
            raise disk_full(db, made=False) from exc
        raise
    finally:
        for name in (spare, f"{spare}-wal", f"{spare}-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)


def _flush(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _place(spare: str, target: str) -> None:
    """`spare` renamed onto `target`: linked when nothing is there (another first start
    that got there first is not replaced), else put in the empty file's place with its
    mode (a database already there keeps the mode it has); the directory flushed."""
    try:
        os.link(spare, target)
    except FileExistsError:
        if not is_new(target):  # (made meanwhile by another start: left as it is)
            raise
        os.chmod(spare, stat.S_IMODE(os.stat(target).st_mode))
        os.replace(spare, target)
    except OSError as exc:
        if is_disk_full(exc):
            raise
        os.rename(spare, target)  # (a file system without hard links)
    with contextlib.suppress(OSError):  # (a file system that cannot open a directory)
        fd = os.open(os.path.dirname(target), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def build_on_server(
    store: Store, token_file: Path, make: Callable[[Callable[[str], None]], None],
    say: Callable[[str], None],
) -> None:  # fmt: skip
    """A first start on a store kept by a server: what `make` puts in it (the demo seed,
    the admin token and its file) in one transaction, all of it or none.
    The lines `make` says are said once it committed (an admin token printed before a
    COMMIT that failed would be no token); a token file it wrote is removed when the
    transaction rolls back, a file that was there before it is left as it was."""
    before = _identity(token_file)
    lines: list[str] = []
    try:
        with store.atomic():
            make(lines.append)
    except BaseException:
        if _identity(token_file) not in (None, before):
            token_file.unlink(missing_ok=True)
        raise
    for line in lines:
        say(line)


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino, found.st_mtime_ns
