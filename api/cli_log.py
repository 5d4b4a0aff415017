"""`charter log verify`, `charter log explain` and `charter receipt verify`: what a
reviewer checks of what the service recorded and signed (docs/operations.md, "The signed
log and receipts").

- `charter log verify --db DB [--key-file PATH | --keys FILE]` walks the decision log's
  chain and checks every signed checkpoint (policy/logseal.py), with the server's keys as
  the key file opens them from the database, or as a key set saved from `GET /v1/keys`
  (then no key file is needed). It names every stretch that is wrong, the first first;
  exit 0 when the log is sound, 1 when something is wrong (V0001), 2 when it cannot check.
- `charter log explain SEQ --db DB [--key-file PATH]` explains the decision logged at `SEQ`
  again on the revision it was decided on (api/service/logexplain.py, as `GET
  /v1/log/{seq}/explain`): its trace, and what the policy decides next to what was
  logged; exit 0 with a trace, 1 when the log does not keep what a condition reads (it
  says why), 2 when it cannot read (no such seq, no database).
- `charter receipt verify RECEIPT --keys FILE|URL [--call FILE]` checks a receipt
  (api/service/receipts.py) with a key set saved from `GET /v1/keys` (offline), or the
  one a server's URL answers; with `--call`, that the receipt is about that call. It
  prints the receipt's claims; exit 0 when it verifies, 1 when it does not (V0101, V0102),
  2 when it cannot check (V0103: the key set is not one).
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from api.cli_serve_checks import (
    database_path,
    missing_database,
    open_database,
    os_reason,
    refuse,
    store_refused,
)
from api.http.calls import one_call
from api.node_files import KEY_FILE_FLAG, node_files
from api.service import logexplain, receipts
from api.service.core import Service
from api.service.encoding import dumps_text
from api.service.errors import ServiceError
from policy import logseal
from policy.cose import CoseError
from policy.secrets import KEY_ENV, Sealer, SecretKeyError, load_key_file
from policy.serverkeys import KeysFileError, PublicKey, ServerKeys, b64url, from_jwks
from policy.store import Store, StoreDamaged, StoreUnavailable
from policy.store.open import StoreUrlError, parse

MAX_KEYS_BYTES = 1 << 20


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")


def _keys_from(source: str) -> dict[str, PublicKey] | int:
    """The key set in a file saved from `GET /v1/keys`, or the one a server's URL answers
    (`http(s)://host:port`, its `/v1/keys` asked); an exit code once refused."""
    try:
        if source.startswith(("http://", "https://")):
            url = source.rstrip("/") + (
                "" if source.rstrip("/").endswith("/v1/keys") else "/v1/keys"
            )
            with urllib.request.urlopen(url, timeout=30) as answer:
                raw = answer.read(MAX_KEYS_BYTES + 1)
        else:
            raw = Path(source).read_bytes()
    except (OSError, urllib.error.URLError, ValueError) as exc:
        why = os_reason(exc) if isinstance(exc, OSError) and exc.strerror else str(exc).lower()
        return refuse(f"cannot read the key set `{source}`: {why}")
    if len(raw) > MAX_KEYS_BYTES:
        return refuse(f"error[V0103]: the key set `{source}` is larger than 1 MiB")
    try:
        return from_jwks(json.loads(raw))
    except (ValueError, KeysFileError) as exc:
        return refuse(
            f"error[V0103]: `{source}` is not a key set: {exc}",
            "save the answer of `GET /v1/keys` to a file, or give the server's URL",
        )


# ---- charter log verify -------------------------------------------------------------------


def _line(db: str, finding: logseal.Finding) -> str:
    where = (
        f"decision {finding.seq}"
        if finding.seq == finding.last_seq
        else f"decisions {finding.seq} to {finding.last_seq}"
    )
    return f"{db}: {where}: {finding.why}: {finding.detail}"


def cmd_log_verify(args: argparse.Namespace) -> int:
    try:
        target = parse(args.db)
        files = None if args.keys is not None else node_files(target, args.key_file)
    except StoreUrlError as exc:
        return store_refused(exc)
    db = target.shown
    missing = missing_database(target)
    if missing is not None:
        return missing
    trusted: dict[str, PublicKey] | None = None
    if args.keys is not None:
        found = _keys_from(args.keys)
        if isinstance(found, int):
            return found
        trusted = found
    elif files is not None and not files.key.is_file() and not _key_in_env():
        return refuse(
            f"no key file at `{files.key}`: the server's keys open with the key that sealed them",
            f"give `{KEY_FILE_FLAG}` as `charter serve` has it, or `--keys FILE` saved from "
            "`GET /v1/keys`",
        )
    store = open_database(target)
    if isinstance(store, int):
        return store
    try:
        if trusted is None:
            assert files is not None
            trusted = ServerKeys(store, Sealer(load_key_file(files.key))).trusted()
        report = logseal.verify(store, trusted)
    except (SecretKeyError, StoreUnavailable, StoreDamaged) as exc:
        return refuse(f"cannot verify `{db}`: {exc}")
    finally:
        store.close()
    if args.format == "json":
        _say(dumps_text(report.to_json()))
        return 0 if report.sound else 1
    for finding in report.findings:
        _say(_line(db, finding))
    covered = report.covered_through
    if covered < report.head:
        if not covered:
            after = "every decision"
        elif covered + 1 == report.head:
            after = f"decision {report.head}"
        else:
            after = f"decisions {covered + 1} to {report.head}"
        _say(f"{db}: note: {after}: no signed checkpoint covers it yet, the chain alone does")
    if report.findings:
        first = report.findings[0]
        _say(f"{db}: error[V0001]: the log does not verify: first at decision {first.seq} "
             f"({first.why}); {len(report.findings)} found")  # fmt: skip
        return 1
    counted = (
        "1 signed checkpoint"
        if report.checkpoints == 1
        else (f"{report.checkpoints} signed checkpoints")
    )
    _say(f"{db}: decisions 1 to {report.head} verify; {counted}, the last at {covered}")
    return 0


def _key_in_env() -> bool:
    import os

    return bool(os.environ.get(KEY_ENV))


# ---- charter receipt verify ---------------------------------------------------------------


def _receipt_text(given: str) -> str | int:
    if given == "-":
        return sys.stdin.read().strip()
    if given.startswith("@"):
        try:
            return Path(given[1:]).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            why = os_reason(exc) if isinstance(exc, OSError) else "not UTF-8"
            return refuse(f"cannot read the receipt `{given[1:]}`: {why}")
    return given.strip()


def _shown(claims: dict[str, Any]) -> dict[str, Any]:
    return {k: b64url(v) if isinstance(v, bytes) else v for k, v in claims.items()}


def cmd_receipt_verify(args: argparse.Namespace) -> int:
    text = _receipt_text(args.receipt)
    if isinstance(text, int):
        return text
    keys = _keys_from(args.keys)
    if isinstance(keys, int):
        return keys
    call = None
    if args.call is not None:
        try:
            call = one_call(Path(args.call).read_bytes())
        except OSError as exc:
            return refuse(f"cannot read the call `{args.call}`: {os_reason(exc)}")
        except ServiceError as exc:
            return refuse(f"`{args.call}` is not a decision request: {exc.message}")
    try:
        kid, claims = receipts.verify(receipts.decode(text), keys)
    except (receipts.ReceiptError, CoseError) as exc:
        sys.stderr.write(f"charter: error[V0101]: the receipt does not verify: {exc}\n")
        return 1
    differ = [] if call is None else receipts.differences(claims, call)
    if args.format == "json":
        _say(dumps_text({"valid": not differ, "kid": kid, "claims": _shown(claims),
                         "differs": differ}))  # fmt: skip
    else:
        _say(f"signed by key {kid}")
        for name in receipts.FIELDS:
            _say(f"  {name}: {_shown(claims)[name]}")
    if differ:
        sys.stderr.write(
            f"charter: error[V0102]: the receipt is about another call: its "
            f"{', '.join(f'`{d}`' for d in differ)} differ from `{args.call}`\n"
        )
        return 1
    return 0


# ---- charter log explain ------------------------------------------------------------------


def _opened(args: argparse.Namespace) -> tuple[Store, Sealer, str] | int:
    """The store `--db` names and the sealer its key file opens, for a command that reads
    them as the server does; an exit code once refused."""
    try:
        target = parse(args.db)
        files = node_files(target, args.key_file)
    except StoreUrlError as exc:
        return store_refused(exc)
    missing = missing_database(target)
    if missing is not None:
        return missing
    if not files.key.is_file() and not _key_in_env():
        return refuse(
            f"no key file at `{files.key}`: the approvals' sealed calls open with it",
            f"give `{KEY_FILE_FLAG}` as `charter serve` has it",
        )
    try:
        sealer = Sealer(load_key_file(files.key))
    except SecretKeyError as exc:
        return refuse(f"cannot open the key file `{files.key}`: {exc}")
    store = open_database(target)
    if isinstance(store, int):
        return store
    return store, sealer, target.shown


def cmd_log_explain(args: argparse.Namespace) -> int:
    opened = _opened(args)
    if isinstance(opened, int):
        return opened
    store, sealer, db = opened
    try:
        answer = logexplain.explained(Service(store, sealer), args.seq)
    except ServiceError as exc:
        return refuse(f"{db}: {exc.message}", exc.extra.get("help"))
    except (StoreUnavailable, StoreDamaged) as exc:
        return refuse(f"cannot read `{db}`: {exc}")
    finally:
        store.close()
    if args.format == "json":
        _say(dumps_text(answer))
    elif answer["trace"] is None:
        why = answer["unavailable"]
        sys.stderr.write(
            f"charter: decision {args.seq}: no trace ({why['why']}): {why['message']}\n"
        )
    else:
        _say(answer["trace"])
        _say(f"logged: {answer['logged_effect']} on revision {answer['revision']}; "
             f"the policy decides {answer['effect']}"
             + ("" if answer["same_effect"] else f" ({answer['note']})"))  # fmt: skip
    return 0 if answer["trace"] is not None else 1


def register(sub: Any) -> None:
    p = sub.add_parser(
        "log", help="the decision log: verify its chain and signed checkpoints, explain a decision"
    )
    verbs = p.add_subparsers(dest="log_verb", required=True)
    verify = verbs.add_parser(
        "verify", help="verify the decision log: its chain and its signed checkpoints"
    )
    verify.add_argument("--db", type=database_path, default="charter.db",
                        help="the database `charter serve --db` serves: a path or a URL")  # fmt: skip
    verify.add_argument(KEY_FILE_FLAG, default=None, metavar="PATH",
                        help="the key file `charter serve` has (default: `<db>.key`)")  # fmt: skip
    verify.add_argument("--keys", default=None, metavar="FILE|URL",
                        help="trust these keys (saved from `GET /v1/keys`, or a server's "
                        "URL) instead of opening them with the key file")  # fmt: skip
    verify.add_argument("--format", choices=["text", "json"], default="text")
    verify.set_defaults(func=cmd_log_verify)
    explain = verbs.add_parser(
        "explain", help="explain a logged decision again on the revision it was decided on"
    )
    explain.add_argument("seq", type=int, help="the decision's `seq` in the log")
    explain.add_argument("--db", type=database_path, default="charter.db",
                         help="the database `charter serve --db` serves: a path or a URL")  # fmt: skip
    explain.add_argument(KEY_FILE_FLAG, default=None, metavar="PATH",
                         help="the key file `charter serve` has (default: `<db>.key`)")  # fmt: skip
    explain.add_argument("--format", choices=["text", "json"], default="text")
    explain.set_defaults(func=cmd_log_explain)

    p = sub.add_parser("receipt", help="decision receipts: verify one offline")
    verbs = p.add_subparsers(dest="receipt_verb", required=True)
    check = verbs.add_parser("verify", help="verify a decision receipt with the server's keys")
    check.add_argument("receipt", help="the receipt (base64url), `@FILE`, or `-` (stdin)")
    check.add_argument("--keys", required=True, metavar="FILE|URL",
                       help="a key set saved from `GET /v1/keys`, or the server's URL")  # fmt: skip
    check.add_argument("--call", default=None, metavar="FILE",
                       help="the decision request the receipt is for (JSON): check that "
                       "its agent, tool and arguments are the receipt's")  # fmt: skip
    check.add_argument("--format", choices=["text", "json"], default="text")
    check.set_defaults(func=cmd_receipt_verify)
