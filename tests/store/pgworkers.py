"""What the processes of tests/store/test_postgres.py do, each with a PostgresStore of
its own: `python -m tests.store.pgworkers append|spend URL COUNT [CAP]`. Each prints
`ready` once its store is open and starts when a line comes on its stdin (so they all
start together), then prints what it did as JSON."""

from __future__ import annotations

import json
import os
import sys
import time

from policy.store import StoreUnavailable
from policy.store.postgres import PostgresStore

SUBJECT = "agent:shared"
COST = 10


def append(store: PostgresStore, count: int) -> list[int]:
    """`count` groups of 1 to 3 rows; every seq given out."""
    seqs: list[int] = []
    for i in range(count):
        rows = [f"{os.getpid()}:{i}:{j}".encode() for j in range(1 + i % 3)]
        seqs += store.append_decisions(rows)
    return seqs


def spend(store: PostgresStore, count: int, cap: int) -> int:
    """`count` tries to charge COST under `cap`: `spent` then `charge` in one transaction,
    as the service's budget check does; how many were charged."""
    charged = 0
    for _ in range(count):
        try:
            with store.atomic():
                if store.spent(SUBJECT, 0) + COST <= cap:
                    store.charge([SUBJECT], COST, int(time.time() * 1000))
                    charged += 1
        except StoreUnavailable:
            continue
    return charged


def main(argv: list[str]) -> None:
    what, url, count = argv[0], argv[1], int(argv[2])
    store = PostgresStore(url)
    print("ready", flush=True)
    sys.stdin.readline()
    if what == "append":
        print(json.dumps(append(store, count)))
    else:
        print(json.dumps(spend(store, count, int(argv[3]))))
    store.close()


if __name__ == "__main__":
    main(sys.argv[1:])
