"""`charter serve` and `charter token`: the decision service from the command line.

`--db` is a path or a URL (policy/store/open.py): an SQLite file, `sqlite:///PATH`, or
`postgresql://...` with `--key-file` (api/node_files.py says where a node's files lie).

First start on a database: an admin token is created, printed once and written to
`<db>.admin-token` (0600) so scripts and the README's curl can read it; only its hash is
stored. `--workspace DIR` makes that directory's files the latest revision (a new revision
when they differ), keeping the roles made through the API unless it has `api/roles/`.
When it loads a workspace into an empty database that has a profile `support`, it also
seeds the demo agent `demo-support` on it with a fresh identity.

Exit codes: 0 served until stopped, or a token was issued; 1 the workspace has errors, is
over `--max-policy-mib`, or removes a profile, toolset or API-made role still in use
(without `--remove-in-use`), or the store was busy (try again); 2 the command line cannot
be served: an option out of its range, a database path that is empty, in memory,
unopenable or not charter's, a URL no store serves (D0201-D0203), a port that cannot be
listened on, a malformed secret key or a key file others may read, a key file missing
beside a database holding secrets, a file at `<db>.metrics` where `--workers N` keep their
counters. Each of these is found before anything is created, and leaves the path as it
was. Exit 2 also, with
`error[<code>]` (policy/store/refusal.py, docs/operations.md), for a database that lacks
commits its mark records, a missing or empty one beside the files of one that was there,
a damaged mark, and a full disk; a first start is made whole or not at all
(api/first_start.py).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import secrets
import socket
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from api.cli_args import UTF8_HELP, not_utf8
from api.cli_bundle import TRUSTED_FLAG, read_trusted, signed_workspace, unsigned_latest
from api.cli_bundle import workspace_files as workspace_files
from api.cli_db import damaged_row, start_refusal, too_new
from api.cli_serve_checks import (
    bound_port,
    connection_cap,
    database_path,
    database_refusal,
    host_name,
    key_refusal,
    listen_refusal,
    os_reason,
    pipeline_depth,
    policy_mib,
    port_number,
    refuse,
    retry_ms,
    schedule_tick,
    sealed_refusal,
    store_refused,
    timeout_seconds,
    turn_lifetime,
    webhook_urls,
    worker_count,
)
from api.commands import CreateAgent, CreateConnection
from api.first_start import build, build_on_server, disk_full, is_disk_full
from api.http.connection import LIMITS_ENV, MAX_HEAD, Limits
from api.http.lifeline import SUPERVISOR_ENV
from api.node_files import KEY_FILE_ENV, KEY_FILE_FLAG, node_files
from api.service import inuse, metricsshare, tokens
from api.service.connections import create_connection
from api.service.core import MAX_POLICY_BYTES, SCHEDULE_TICK_MS, TURN_LIFETIME_MS, Service
from api.service.errors import ServiceError
from api.service.resources import create_agent
from api.service.rolefiles import is_own
from api.service.tokens import Principal
from api.service.webhookoutbox import FIRST_RETRY_MS, Backoff, WebhookConfig, config_text
from policy import identities
from policy.bundles import BundleError, KeyFileError, TrustedKey, Verified
from policy.diagnostics import CharterError, render_all
from policy.secrets import KEY_ENV
from policy.store import StoreDamaged, StoreTooNew, StoreUnavailable
from policy.store.evidence import is_new, lost_database
from policy.store.open import StoreUrlError, open_store, parse
from policy.store.refusal import StoreRefused

DEMO_AGENT = "demo-support"
ADMIN_ISSUED = "admin_token_issued"  # (a meta flag: the first admin token was issued)
DEMO_PROFILE = "support"


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def token_path(db: str) -> Path:
    return Path(f"{db}.admin-token")


def _write_secret_file(path: Path, text: str) -> None:
    """`text` in a new file of mode 0600 (whatever the umask) that takes `path`'s place:
    written to a file of its own beside it (O_EXCL: made here, no file or link that was
    there), then renamed over `path`. Opened in place, a file already at `path` kept its
    inode and its mode while the token was written into it: whoever held it open (one
    made world-readable earlier, or someone else's, in a shared directory) read the
    token, and a symlink there was followed, the token written wherever it pointed."""
    spare = path.with_name(f"{path.name}.{secrets.token_hex(8)}.new")
    fd = os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text + "\n")
        os.replace(spare, path)
    finally:
        spare.unlink(missing_ok=True)


def _token_left(db: str) -> list[Path]:
    """`<db>.admin-token` when it holds a token, which a first start writes once its
    database is in place (policy/store/evidence.py): an empty file or a directory there
    says nothing of a database, and is replaced (or left) by the first start."""
    path = token_path(db)
    with contextlib.suppress(OSError), path.open("rb") as handle:
        if handle.read(len(tokens.PREFIX)) == tokens.PREFIX.encode():
            return [path]
    return []


def prepare(
    service: Service,
    db: str,
    workspace: str | None,
    say: Callable[[str], None] = _say,
    remove_in_use: bool = False,
    signed: Verified | None = None,
) -> None:
    """What a start needs, done once in the parent before any worker starts: the
    workspace loaded, the demo seeded into a database that had no policy, the admin
    token issued on its first start. A first start runs the first two on the database it
    makes (api/first_start.py), the token once it is in place."""
    store = service.store
    empty = store.latest_revision() == 0
    if workspace is not None:
        load_workspace(service, workspace, say, remove_in_use, signed)
    if empty:
        seed_demo(service, say)
    issue_admin_token(service, db, say)


def prepare_on_server(
    service: Service,
    prefix: str,
    workspace: str | None,
    say: Callable[[str], None] = _say,
    remove_in_use: bool = False,
    signed: Verified | None = None,
) -> None:
    """`prepare` for a store kept by a server, which has no file to make whole under
    another name: the workspace is loaded in a transaction of its own, then the demo seed
    and the admin token in one (api/first_start.py, `build_on_server`), while no admin
    token was issued. A start stopped between the two leaves the policy and no token;
    the next start, finding no token issued, seeds and issues then."""
    store = service.store
    unfinished = store.latest_revision() == 0 or not store.get_meta(ADMIN_ISSUED)
    if workspace is not None:
        load_workspace(service, workspace, say, remove_in_use, signed)
    if not unfinished:
        return

    def seed_and_issue(said: Callable[[str], None]) -> None:
        seed_demo(service, said)
        issue_admin_token(service, prefix, said)

    build_on_server(store, token_path(prefix), seed_and_issue, say)


# The directory `--workspace` last loaded, and a digest of its files then: a restart
# loads it again only when it changed, so a policy uploaded through the API since is kept.
WORKSPACE_KEY = "workspace"


def _loaded(workspace: str, files: list[tuple[str, str]]) -> dict[str, str]:
    digest = hashlib.sha256(json.dumps(sorted(files)).encode("utf-8")).hexdigest()
    return {"path": os.path.realpath(workspace), "digest": digest}


# How the operator says a changed directory is to remove what is still in use.
REMOVE_FLAG = "--remove-in-use"


def load_workspace(
    service: Service,
    workspace: str,
    say: Callable[[str], None],
    remove_in_use: bool = False,
    signed: Verified | None = None,
) -> None:
    """`--workspace` into the database: into an empty one, and afterwards only when the
    directory changed since it was last loaded (an API upload is never reverted by a
    restart). One line says which. A changed directory that removes what is still in use
    (api.service.inuse) is not loaded, unless `remove_in_use` (`--remove-in-use`): a
    ServiceError `policy-in-use` names them, and the database is as it was. `signed`:
    the directory's files as verified (`--trusted-keys`): those very files are loaded,
    alone (no API-made role is added to what was signed), and the latest revision is
    kept only when it is itself a bundle the trusted keys verify."""
    store = service.store
    files = list(signed.files) if signed is not None else workspace_files(workspace)
    loaded = _loaded(workspace, files)
    latest = store.latest_revision()
    trusted = service.trusted
    # (with trusted keys, an unsigned latest revision is replaced, even by the same files)
    latest_ok = not (signed and trusted and latest and unsigned_latest(service, trusted))
    if latest and latest_ok and store.get_meta(WORKSPACE_KEY) == loaded:
        say(f"policy: revision {latest} kept ({workspace} has not changed since it was loaded)")
        return
    _, current = service.files(store.latest_revision() or None)
    if signed is None and not any(is_own(path) for path, _ in files):
        # The roles, profiles, hooks and toolsets made through the API (`api/roles/`,
        # ...: api.service.rolefiles) are the server's, as its agents are, not the
        # directory's: every restart of `make serve` deleted them (or failed, when a
        # profile named one). A directory with files of its own there gives them all.
        files += [(path, text) for path, text in current if is_own(path)]
    if files != current or not latest_ok:
        prepared = service.compile(files)  # (outside the transaction: the slow part)
        note = f"loaded {workspace}" + (f": {signed.note()}" if signed is not None else "")
        with store.atomic():
            override = f"serve with `{REMOVE_FLAG}`"
            removed = inuse.require_unused(service, prepared.workspace, remove_in_use, override)
            snapshot = service.upload(files, "charter serve", note, prepared, signed)
            store.set_meta(WORKSPACE_KEY, loaded)
        say(f"policy: revision {snapshot.revision} from {workspace}")
        if removed:
            say(f"policy: removed what was in use ({REMOVE_FLAG}): {inuse.summary(removed)}")
    else:
        store.set_meta(WORKSPACE_KEY, loaded)
        say(f"policy: revision {store.latest_revision()} is already {workspace}")


def seed_demo(service: Service, say: Callable[[str], None]) -> None:
    """The demo agent on profile `support` (a fresh identity) and a placeholder connection
    for each toolset that requires one, in one transaction: all of them or none."""
    store = service.store
    if not store.latest_revision() or store.get("agents", DEMO_AGENT) is not None:
        return
    if DEMO_PROFILE not in service.current().served.profiles:
        return
    lines = []
    with store.atomic():
        view, _ = identities.create(store, service.sealer, "Demo support agent")
        admin = Principal("serve", "admin")
        made = CreateAgent(name="Demo support agent", profile=DEMO_PROFILE, identity=view["id"])
        create_agent(service, admin, made, DEMO_AGENT)
        lines.append(f"demo agent: {DEMO_AGENT} (profile {DEMO_PROFILE}, identity {view['id']})")
        for name, toolset in sorted(service.current().served.toolsets.items()):
            if toolset.connection_required:  # a placeholder so the demo's calls can run
                placeholder = CreateConnection(
                    name=f"demo-{name}", toolset=name, credential="demo-placeholder"
                )
                create_connection(service, placeholder, None)
                lines.append(f"demo connection: demo-{name} (workspace-owned, toolset {name})")
    for line in lines:
        say(line)


def issue_admin_token(service: Service, db: str, say: Callable[[str], None]) -> None:
    """The first admin token, once per database: its file is written inside the
    transaction that stores its hash (and removed when that transaction fails), so a
    start that failed anywhere issues it again, and a token is never stored unprinted."""
    store = service.store
    if store.get_meta(ADMIN_ISSUED):
        return
    path = token_path(db)
    written = False
    unwritten: str | None = None
    try:
        with store.atomic():
            token, _ = tokens.issue(store, "admin", name="first start")
            store.set_meta(ADMIN_ISSUED, True)
            try:
                _write_secret_file(path, token)
                written = True
            except OSError as exc:  # (a directory at the path): printed all the same
                if is_disk_full(exc):
                    raise
                unwritten = os_reason(exc)
    except BaseException:
        if written:
            path.unlink(missing_ok=True)
        raise
    if unwritten is not None:
        say(f"admin token (shown once; not written to {path}: {unwritten}):\n  {token}")
    else:
        say(f"admin token (shown once; also in {path}, mode 0600):\n  {token}")


def listening_socket(host: str, port: int) -> socket.socket:
    """The socket `--workers N` processes are handed (a `WorkerSocket`). uvicorn's own is
    made without naming the protocol (proto 0), and asyncio sets TCP_NODELAY only on
    connections accepted from a socket whose proto is IPPROTO_TCP; without it a response
    (headers and body are two writes) waits on Nagle's algorithm for the client's delayed
    ACK: a flat 40 ms per request. So this one names it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # SO_REUSEPORT would let this bind beside anything of the same user that listens on
    # the port (another `charter serve`, splitting its traffic): a plain socket binds
    # first, so a port in use fails here as it would without SO_REUSEPORT.
    port = bound_port(host, port)  # (`--port 0`: the port the kernel chose)
    sock = WorkerSocket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    _share_address(sock)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


class WorkerSocket(socket.socket):
    """A listening socket that becomes a socket of its own in each worker.

    uvicorn hands the parent's socket to every worker (multiprocessing pickles it into the
    spawned process as a duplicate), so all of them accept from one queue: whichever
    wakes first takes every connection waiting, and a keep-alive client stays with the
    worker that took it. Measured over 9 runs of 16 and 64 clients connecting at once to
    2 workers: in 5 of the 36 phases one worker served every client (its CPU 198 ticks,
    the other's 4) and others were lopsided (117 against 85). Pickled, this socket is
    instead rebuilt in the worker as a new socket bound to the same address with
    SO_REUSEPORT (`_worker_socket`), so the kernel spreads connections over the workers
    by their addresses' hash. The parent's own is bound (it keeps the port, and a port
    in use fails before any worker starts) but never listens: it gets no connection."""

    def __reduce_ex__(self, protocol: object) -> tuple[Any, ...]:
        return (_worker_socket, (self.family, self.proto, self.getsockname()))


def _share_address(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)


def _worker_socket(family: int, proto: int, address: tuple[Any, ...]) -> socket.socket:
    """A worker's own socket on the parent's address (its port, even with `--port 0`)."""
    sock = socket.socket(family, socket.SOCK_STREAM, proto)
    _share_address(sock)
    sock.bind(address)
    return sock


def run_uvicorn(app: Any, host: str, port: int, workers: int = 1, **options: Any) -> None:
    """uvicorn.run, but with `listening_socket` for several workers (the benchmark's
    ceiling server runs through here too, so both stand on the same stack)."""
    import uvicorn

    options = {"access_log": False, "log_level": "warning", **options}
    if workers <= 1:
        uvicorn.run(app, host=host, port=port, **options)
        return
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config(app, host=host, port=port, workers=workers, **options)
    with contextlib.suppress(KeyboardInterrupt):
        Multiprocess(config, sockets=[listening_socket(host, port)]).run()


def prepare_new(
    service: Service,
    workspace: str | None,
    say: Callable[[str], None],
    signed: Verified | None = None,
) -> None:
    """What a first start puts in the database it makes: the workspace and the demo."""
    if workspace is not None:
        load_workspace(service, workspace, say, signed=signed)
    seed_demo(service, say)


TRUSTED_HELP = (
    "each line is `KEY_ID ed25519 PUBLIC_KEY [expires=DATE]`, as `charter bundle keygen` "
    "prints it; nothing was made"
)


STORED_HELP = "serve a signed directory with `--workspace DIR`: it becomes the latest revision"


def bundle_refused(exc: BundleError, what: str, hint: str | None = None) -> int:
    """A `--workspace` (or a stored revision) that is not a bundle the trusted keys
    verify: exit 1, its code, and nothing made or changed."""
    sys.stderr.write(
        f"charter: error[{exc.code}]: {what}: {exc.message}\nhelp: {hint or exc.help}; "
        "nothing was changed\n"
    )
    return 1


def _workspace_refused(exc: ServiceError) -> int:
    hint = exc.extra.get("help")
    sys.stderr.write(f"charter: {exc.message}\n" + (f"help: {hint}\n" if hint else ""))
    return 1


GUARDED_HTTP = "api.http.connection:GuardedHttpTools"


def connection_options(args: argparse.Namespace) -> dict[str, Any]:
    """uvicorn's options for the connections: the parser and the loop, and the bounds
    (`api.http.connection`) that reach every worker through the environment. `--http
    h11` is uvicorn's h11 protocol, which has its own bounds on the idle time after an
    answer, the head's size and the connections, but no timeout for a request's head or
    body, or for a connection that never sends."""
    limits = Limits(
        idle_timeout=args.idle_timeout, header_timeout=args.header_timeout,
        body_timeout=args.body_timeout, max_connections=args.max_connections,
        max_pipeline=args.max_pipeline,
    )  # fmt: skip
    os.environ[LIMITS_ENV] = limits.to_env()
    options: dict[str, Any] = {
        "loop": args.loop, "ws": "none", "timeout_keep_alive": args.idle_timeout,
        "http": "h11" if args.http == "h11" else GUARDED_HTTP,
    }  # fmt: skip
    if args.http == "h11":
        options.update(
            limit_concurrency=args.max_connections, h11_max_incomplete_event_size=MAX_HEAD
        )
    if args.access_log:  # uvicorn's access log (off by default: a line per request costs)
        options.update(access_log=True, log_level="info")
    return options


def _file_refusal(db: str) -> int | None:
    """What is wrong at an SQLite `--db` and the files beside it, found before anything
    is made (the exit code of its refusal), or None."""
    refused = start_refusal(db) or database_refusal(db, serving=True)
    if refused is not None:
        return refuse(*refused)
    lost = lost_database(db, _token_left(db))  # (an empty file beside a database's files)
    if lost is not None:
        return store_refused(lost)
    return None


def _new_key_refused(key: Path) -> tuple[str, str]:
    """A key made by this start (none was at `--key-file`) for a database whose secrets
    another key sealed."""
    return (
        f"no key file at `{key}`, and the database holds secrets sealed with a key: a new "
        "key would open none of them",
        f"give the key they were sealed with: `{KEY_FILE_FLAG} PATH` (the file every node "
        f"serving this database is given) or `{KEY_ENV}`; nothing was made",
    )


def cmd_serve(args: argparse.Namespace) -> int:
    from api.http.app import (
        MAX_POLICY_ENV,
        SCHEDULE_TICK_ENV,
        TRUSTED_KEYS_ENV,
        TURN_LIFETIME_ENV,
        WEBHOOKS_ENV,
        create_app,
        open_service,
        tune_gc,
    )

    try:
        target = parse(args.db)
        files = node_files(target, args.key_file)
    except StoreUrlError as exc:
        return store_refused(exc)
    db = target.shown  # (a URL's password is never printed)
    if target.path is not None:
        refused = _file_refusal(target.path)
        if refused is not None:
            return refused
    in_the_way = metricsshare.refusal(files.prefix) if args.workers > 1 else None
    if in_the_way is not None:
        move = "serve another `--db`" if target.path is not None else f"another `{KEY_FILE_FLAG}`"
        return refuse(in_the_way, f"move it away, or {move}")
    bad_key = key_refusal(files.key)
    if bad_key is not None:
        return refuse(*bad_key)
    # The trusted keys and the signed workspace, verified before anything is made: a
    # bundle refused leaves the database (or its absence) as it was.
    trusted: dict[str, TrustedKey] | None = None
    signed: Verified | None = None
    if args.trusted_keys is not None:
        try:
            trusted = read_trusted(args.trusted_keys)
        except KeyFileError as exc:
            return refuse(str(exc), TRUSTED_HELP)
        if args.workspace is not None:
            try:
                signed = signed_workspace(args.workspace, trusted)
            except BundleError as exc:
                return bundle_refused(exc, f"`{args.workspace}`")
            except CharterError as exc:
                sys.stderr.write(render_all(exc.diagnostics, exc.sources) + "\n")
                return 1
    # The address is tried before the database is made: a port in use was found only
    # when uvicorn bound it, after the first start had made the database and its token.
    # (`--port 0` is served on the free port found here: it is free again, for a moment,
    # until the server binds it.)
    try:
        port = bound_port(args.host, args.port)
    except OSError as exc:
        return refuse(*listen_refusal(args.host, args.port, exc))
    webhooks = WebhookConfig(
        tuple(dict.fromkeys(args.approval_webhooks)), Backoff(args.approval_webhook_retry_ms)
    )
    first = target.path is not None and is_new(target.path)
    key_made = not (os.environ.get(KEY_ENV) or files.key.exists())
    workspace = args.workspace
    try:
        if target.path is not None and first:  # made whole under a name of its own, or not at all
            lines: list[str] = []
            build(target.path, lambda made: prepare_new(made, workspace, lines.append, signed),
                  args.max_policy_mib << 20, files.key)  # fmt: skip
            for line in lines:
                _say(line)
            workspace = None  # (loaded)
        service = open_service(
            target, turn_lifetime=args.turn_lifetime, max_policy_mib=args.max_policy_mib,
            key_file=files.key, webhooks=webhooks, schedule_tick=args.schedule_tick,
        )  # fmt: skip
    except StoreUrlError as exc:  # (a PostgreSQL URL, and no PostgreSQL store here)
        return store_refused(exc)
    except StoreTooNew as exc:  # (a newer charter migrated it since the look above)
        return refuse(*too_new(db, exc))
    except StoreDamaged as exc:  # (a row a first start reads back)
        return refuse(*damaged_row(db, exc))
    except StoreRefused as exc:  # (it lacks commits its mark records, the disk is full)
        return store_refused(exc)
    except CharterError as exc:
        sys.stderr.write(render_all(exc.diagnostics, exc.sources) + "\n")
        return 1
    except ServiceError as exc:  # a workspace over `--max-policy-mib`
        return _workspace_refused(exc)
    except (sqlite3.Error, OSError, StoreUnavailable) as exc:  # (what the look could not see)
        if target.path is not None and is_disk_full(exc, db):
            return store_refused(disk_full(db, made=not first))
        if isinstance(exc, StoreUnavailable) and target.path is not None:
            raise
        why = os_reason(exc) if isinstance(exc, OSError) else str(exc).lower()
        return refuse(f"cannot open database `{db}`: {why}")
    store = service.store
    service.trusted = trusted
    try:
        wrong_key = sealed_refusal(store, service.sealer)
        if wrong_key is not None:
            store.close()
            if key_made and not first:  # (made by this start, for a database it cannot open)
                files.key.unlink(missing_ok=True)
                wrong_key = _new_key_refused(files.key)
            return refuse(*wrong_key)
        unsigned = None if trusted is None or signed else unsigned_latest(service, trusted)
        if unsigned is not None:  # (a database whose policy came some other way)
            latest = store.latest_revision()
            store.close()
            return bundle_refused(unsigned, f"the latest revision ({latest})", STORED_HELP)
        if target.path is None:  # (the seed and the token in one transaction)
            prepare_on_server(
                service, files.prefix, workspace, remove_in_use=args.remove_in_use, signed=signed
            )
        else:
            prepare(service, files.prefix, workspace, remove_in_use=args.remove_in_use,
                    signed=signed)  # fmt: skip
    except StoreDamaged as exc:  # (a row read at start)
        store.close()
        return refuse(*damaged_row(db, exc))
    except CharterError as exc:
        sys.stderr.write(render_all(exc.diagnostics, exc.sources) + "\n")
        return 1
    except ServiceError as exc:  # over `--max-policy-mib`, or removing what is in use
        store.close()
        return _workspace_refused(exc)
    except (StoreUnavailable, OSError) as exc:
        store.close()
        if target.path is not None and is_disk_full(exc, db):
            # (every step rolled back: the database is as it was)
            return store_refused(disk_full(db, made=True))
        sys.stderr.write(f"charter: {exc}\nhelp: try again\n")
        return 1
    _say(f"serving {db} on http://{args.host}:{port} ({args.workers} worker(s))")
    stack = connection_options(args)
    if args.workers > 1:
        store.close()
        metricsshare.reset(files.prefix)  # the workers' counter files, made afresh
        os.environ["CHARTER_DB"] = target.url
        os.environ[KEY_FILE_ENV] = str(files.key)
        os.environ[SUPERVISOR_ENV] = str(os.getpid())
        os.environ[TURN_LIFETIME_ENV] = str(args.turn_lifetime)
        os.environ[MAX_POLICY_ENV] = str(args.max_policy_mib)
        os.environ[SCHEDULE_TICK_ENV] = str(args.schedule_tick)
        if webhooks.urls:  # (the workers' own: the parent delivers nothing)
            os.environ[WEBHOOKS_ENV] = config_text(webhooks)
        if trusted is not None:  # (public keys: nothing secret in the environment)
            os.environ[TRUSTED_KEYS_ENV] = Path(args.trusted_keys).read_text(encoding="utf-8")
        run_uvicorn(
            "api.http.app:app_from_env", args.host, port, args.workers, factory=True, **stack
        )
    else:
        app = create_app(service)
        tune_gc()
        run_uvicorn(app, args.host, port, **stack)
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    # What `POST /v1/tokens` refuses in its body (api.http.models.TokenCreate): a name past
    # its length was stored, and a text that is not UTF-8 was an internal error.
    for option, value in (("agent", args.agent), ("name", args.name)):
        why = None if value is None else not_utf8(value)
        if why is not None:
            return refuse(f"--{option} is not UTF-8: {why}; no token was issued", UTF8_HELP)
    if len(args.name) > tokens.MAX_NAME:
        return refuse(
            f"--name is {len(args.name)} characters long, more than {tokens.MAX_NAME}; "
            "no token was issued"
        )
    try:  # (as `POST /v1/tokens` takes its `expires_in`: 1 s to ten years)
        expires_at = None
        if args.expires_in is not None:
            if args.expires_in < 1:
                raise ServiceError("invalid-expiry", "a token expires after now")
            expires_at = tokens.expiry(args.expires_in, None)
    except ServiceError as exc:
        return refuse(f"--expires-in: {exc.message}; no token was issued")
    try:
        target = parse(args.db)
    except StoreUrlError as exc:
        return store_refused(exc)
    db = target.shown
    if target.path is not None:
        refused = database_refusal(target.path, serving=False)  # a mistyped path: a token
        if refused is None:  # nobody serves
            refused = start_refusal(target.path)
        if refused is not None:
            return refuse(*refused)
    # Shared: beside `--workers N` processes it takes their writer lock as they do, and
    # waits its turn there rather than in SQLite's busy handler (1, 2, 5 ... ms steps).
    try:
        store = open_store(target, shared=True)
    except StoreUrlError as exc:
        return store_refused(exc)
    except StoreTooNew as exc:
        return refuse(*too_new(db, exc))
    except StoreRefused as exc:
        return store_refused(exc)
    except (sqlite3.Error, OSError) as exc:  # (what the look at the path could not see)
        why = os_reason(exc) if isinstance(exc, OSError) else str(exc).lower()
        return refuse(f"cannot open database `{db}`: {why}")
    try:
        token, _ = tokens.issue(store, args.scope, args.agent, args.name, expires_at)
    except ServiceError as exc:  # the agent's check, the same as POST /v1/tokens makes
        sys.stderr.write(f"charter: {exc.message}; no token was issued\n")
        return 2
    except StoreUnavailable as exc:
        sys.stderr.write(f"charter: {exc}; no token was issued\nhelp: try again\n")
        return 1
    except StoreDamaged as exc:
        return refuse(*damaged_row(db, exc))
    except sqlite3.Error as exc:  # a file it may read but not write, say
        return refuse(f"cannot write to database `{db}`: {str(exc).lower()}; no token was issued")
    finally:
        store.close()
    _say(token)
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="serve the HTTP decision API")
    p.add_argument("--db", type=database_path, default="charter.db",
                   help="the database: an SQLite file (created if absent), `sqlite:///PATH` "
                   "or `postgresql://...`")  # fmt: skip
    p.add_argument(KEY_FILE_FLAG, default=None, metavar="PATH",
                   help="the file of the key that seals secrets (created 0600 on a first "
                   "start; default: `<db>.key`; required for a PostgreSQL --db)")  # fmt: skip
    p.add_argument("--workspace", default=None, help="a policy directory to load")
    p.add_argument(REMOVE_FLAG, action="store_true",
                   help="load a changed --workspace even if it removes what is still in use")  # fmt: skip
    p.add_argument(TRUSTED_FLAG, default=None, metavar="FILE",
                   help="take the policy only as bundles signed by a key this file lists "
                   "(lines `KEY_ID ed25519 PUBLIC_KEY [expires=DATE]`): --workspace, "
                   "uploads; role changes through the API are refused")  # fmt: skip
    p.add_argument("--host", type=host_name, default="127.0.0.1",
                   help="the address to listen on (`0.0.0.0` or `::`: every interface)")  # fmt: skip
    p.add_argument("--port", type=port_number, default=8080, help="0 to 65535 (0: any free)")
    p.add_argument("--workers", type=worker_count, default=1, help="1 or more processes")
    p.add_argument("--turn-lifetime", type=turn_lifetime, default=TURN_LIFETIME_MS // 1000,
                   help="seconds an admitted turn decides on its revision (default: 3600)")  # fmt: skip
    p.add_argument("--schedule-tick", type=schedule_tick, default=SCHEDULE_TICK_MS // 1000,
                   metavar="SECONDS", help="how often each process looks for due schedules "
                   "and runs them (default: 10)")  # fmt: skip
    p.add_argument("--max-policy-mib", type=policy_mib, default=MAX_POLICY_BYTES >> 20,
                   help="the most text (every file's together) a new policy revision may "
                   "hold, in MiB (default: 16)")  # fmt: skip
    p.add_argument("--loop", choices=["auto", "asyncio", "uvloop"], default="auto",
                   help="the event loop (auto: uvloop when installed)")  # fmt: skip
    p.add_argument("--access-log", action="store_true",
                   help="log a line per request (method, path, status; never a header)")  # fmt: skip
    p.add_argument("--http", choices=["auto", "h11", "httptools"], default="auto",
                   help="the HTTP/1.1 parser (auto: httptools when installed)")  # fmt: skip
    limits = Limits()
    p.add_argument("--idle-timeout", type=timeout_seconds, default=limits.idle_timeout,
                   help="seconds a connection may stay idle, or leave its answers untaken "
                   f"(default: {limits.idle_timeout})")  # fmt: skip
    p.add_argument("--header-timeout", type=timeout_seconds, default=limits.header_timeout,
                   help="seconds a request's headers may take to arrive "
                   f"(default: {limits.header_timeout})")  # fmt: skip
    p.add_argument("--body-timeout", type=timeout_seconds, default=limits.body_timeout,
                   help="seconds a request's body may take to arrive after its headers "
                   f"(default: {limits.body_timeout})")  # fmt: skip
    p.add_argument("--max-connections", type=connection_cap, default=limits.max_connections,
                   help="connections each worker serves at once; a request on one more "
                   f"is a 503 (default: {limits.max_connections})")  # fmt: skip
    p.add_argument("--max-pipeline", type=pipeline_depth, default=limits.max_pipeline,
                   help="requests a connection may have waiting before it is no longer "
                   f"read (default: {limits.max_pipeline})")  # fmt: skip
    p.add_argument("--approval-webhook", dest="approval_webhooks", action="extend",
                   type=webhook_urls, default=[], metavar="URL|@FILE",
                   help="POST each approval opened and decided to this http(s) URL, signed "
                   "with the server's key; @FILE: a file of URLs, one a line (repeatable; "
                   "docs/operations.md)")  # fmt: skip
    p.add_argument("--approval-webhook-retry-ms", type=retry_ms, default=FIRST_RETRY_MS,
                   metavar="MS", help="the delay after a webhook's first failed attempt, "
                   f"doubled after each (default: {FIRST_RETRY_MS})")  # fmt: skip
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("token", help="issue an API token (printed once)")
    p.add_argument("--db", type=database_path, default="charter.db",
                   help="the database `charter serve --db` serves: a path or a URL")  # fmt: skip
    p.add_argument("--scope", choices=["admin", "decide", "agent"], required=True)
    p.add_argument("--agent", default=None, help="the agent, for --scope agent")
    p.add_argument("--name", default="", help=f"at most {tokens.MAX_NAME} characters")
    p.add_argument("--expires-in", type=int, default=None, metavar="SECONDS",
                   help="the token expires this many seconds from now (default: never)")  # fmt: skip
    p.set_defaults(func=cmd_token)
