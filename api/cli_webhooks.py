"""`charter webhooks list` and `charter webhooks retry`: the approval webhooks' deliveries
a database holds (api/service/webhookoutbox.py), and those given up on queued again.

- `charter webhooks list --db DB [--failed] [--format text|json]` prints each delivery
  not yet made (`pending`) or given up on (`failed`), oldest first: its event, where it
  goes (the URL's scheme, host and port: never its path or query), its attempts and its
  last failure.
- `charter webhooks retry --db DB` makes every delivery given up on due again, its
  attempts from 0: a serving process sends it within `RESCAN` seconds.

Either runs beside a serving `charter serve` (its writes take their turn, as `charter
token`'s do). Exit 0; 2 when the database cannot be opened.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from api.cli_serve_checks import (
    database_path,
    missing_database,
    open_database,
    refuse,
    store_refused,
)
from api.service.encoding import dumps_text
from api.service.webhookoutbox import FAILED, KIND, PENDING, now_ms
from policy.store import Store, StoreDamaged, StoreUnavailable
from policy.store.open import StoreUrlError, parse


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")


def _opened(db_arg: str) -> Store | int:
    """The store `--db` names, or the exit code of its refusal."""
    try:
        target = parse(db_arg)
    except StoreUrlError as exc:
        return store_refused(exc)
    missing = missing_database(target)
    return missing if missing is not None else open_database(target)


def _shown(status: str, row: dict[str, Any]) -> dict[str, Any]:
    return {
        "event": row["event"], "target": row["target"], "status": status,
        "attempts": row["attempts"], "last": row["last"], "created_at": row["created_at"],
        "due": row["due"] if status == PENDING else None,
    }  # fmt: skip


def cmd_webhooks_list(args: argparse.Namespace) -> int:
    store = _opened(args.db)
    if isinstance(store, int):
        return store
    statuses = (FAILED,) if args.failed else (PENDING, FAILED)
    try:
        found = sorted(
            ((row.pos, _shown(status, row.body)) for status in statuses
             for row in store.scan(KIND, tag=status)),
            key=lambda item: item[0],
        )  # fmt: skip
    except (StoreUnavailable, StoreDamaged) as exc:
        return refuse(f"cannot read the deliveries: {exc}", "try again")
    finally:
        store.close()
    shown = [item for _, item in found]
    if args.format == "json":
        _say(dumps_text({"deliveries": shown}))
        return 0
    for item in shown:
        last = f"; last: {item['last']}" if item["last"] else ""
        _say(f"{item['status']}  {item['event']}  to {item['target']}: "
             f"{item['attempts']} attempt(s){last}")  # fmt: skip
    if not shown:
        _say("no delivery is pending or failed")
    return 0


def cmd_webhooks_retry(args: argparse.Namespace) -> int:
    store = _opened(args.db)
    if isinstance(store, int):
        return store
    try:
        with store.atomic():
            failed = list(store.scan(KIND, tag=FAILED))
            now = now_ms()
            for row in failed:
                again = {**row.body, "attempts": 0, "due": now, "lease": 0, "holder": ""}
                store.update(KIND, row.id, again, tag=PENDING)
    except (StoreUnavailable, StoreDamaged) as exc:
        return refuse(f"nothing was queued again: {exc}", "try again")
    finally:
        store.close()
    _say(f"{len(failed)} failed delivery(ies) queued again")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("webhooks", help="the approval webhooks' deliveries a database holds")
    verbs = p.add_subparsers(dest="webhooks_verb", required=True)
    listed = verbs.add_parser("list", help="the deliveries pending or given up on")
    listed.add_argument("--db", type=database_path, default="charter.db",
                        help="the database `charter serve --db` serves: a path or a URL")  # fmt: skip
    listed.add_argument("--failed", action="store_true", help="those given up on alone")
    listed.add_argument("--format", choices=["text", "json"], default="text")
    listed.set_defaults(func=cmd_webhooks_list)
    retry = verbs.add_parser("retry", help="queue every delivery given up on again")
    retry.add_argument("--db", type=database_path, default="charter.db",
                       help="the database `charter serve --db` serves: a path or a URL")  # fmt: skip
    retry.set_defaults(func=cmd_webhooks_retry)
