"""The store: revisions, resources, the decision log and the budget ledger.

`Store` is what the service codes against: the narrow interfaces `Transactions`,
`ChangeFeed`, `Revisions`, `Documents`, `DecisionLog`, `Ledger`, `NamedValues` and
`Lifecycle` together, each stating its own isolation. `SqliteStore` is the embedded
default, `PostgresStore` (policy/store/postgres.py) the same contract on a
PostgreSQL server shared by several nodes, and `open_store` (policy/store/open.py) builds
the one a `--db` path or URL names. Everything but the ledger is a document (a
CBOR-encodable mapping) keyed by (kind, id), so both keep seven tables and no joins:

- revisions: the DSL source files of every policy change, numbered 1, 2, ..., each file
  as its path and the SHA-256 of its text (policy/store/texts.py); a row holds what
  changed since the revision before, with every file listed at least every 64 rows, so
  a revision is read from at most 64 consecutive rows (`n BETWEEN base AND it`), never
  by a recursive walk (policy/store/revisions.py).
- texts: each file text once, keyed by its SHA-256, written with the revision that first
  holds it (`INSERT ... ON CONFLICT DO NOTHING`) and never deleted; a revision's texts
  are read back by their digests (`digest = ANY(...)`), not joined.
- documents: identities, secrets, agents, threads, turns, approvals, tokens, with an
  insertion position (for cursor pages that stay stable while rows are added) and one
  optional `tag` column to filter on (an approval's status, a thread's agent, an agent's
  parent), indexed with the kind and position.
- decisions: the decision log; `seq` is gap-free because it is assigned inside the
  writing transaction as max(seq) + 1 (never a sequence object, which leaves gaps).
- ledger: budget charges in micro-USD, summed per subject over a time window. Each row
  keeps its subject's running total through it (`cum`, exact past 64 bits: a `numeric`),
  so a sum is the difference of two rows found by an index on (subject, at), never a
  read of the window (policy/store/ledger.py).
- meta: a few named values the service keeps about itself.
- changes: what each write transaction changed that other processes cache (an agent, a
  toolset's connections, a token), numbered without gaps; the newest `KEEP` are kept
  (policy/store/changes.py).

Every row carries a checksum (`sum`, policy/store/rowsum.py), checked on every read
(policy/store/decode.py); the decision log's runs chain (policy/store/logread.py). The
schema's version is SQLite's `user_version` and PostgreSQL's `schema_version` table; the
migrations applied at open are in policy/store/schema.py and policy/store/pgschema.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from policy.store.changes import Feed
from policy.store.deferred import Deferred

Doc = dict[str, Any]
# What `Store.spent` says when the ledger's sum does not fit in 64 bits: more than any cap
# (caps stop at 2^63 - 1 micro-USD), so a budget check fails closed instead of failing.
SPENT_OVERFLOW = 1 << 63


class StoreUnavailable(Exception):
    """The store cannot do it now: its write lock stayed taken past the timeout, the disk
    is full, or an I/O error. The transaction was rolled back, so nothing was written,
    and the same request may succeed later (the HTTP API answers 503 with Retry-After).
    An implementation raises this for such conditions only, never for a bug."""


class StoreDamaged(Exception):
    """A stored row that fails its checksum or does not decode (policy/store/rowsum.py):
    the file was changed behind the store's back, or the disk garbled it. Its data is
    never served; `what` names the row (`document agents/a1`, `revision 3`, ...). Reads
    of other rows go on; `charter db check` lists every damaged row."""

    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"{what} is damaged: {why}")
        self.what = what
        self.why = why


class StoreTooNew(Exception):
    """The database was written by a newer charter (its schema version is past the
    newest this one knows): opening it could misread what that charter wrote."""

    def __init__(self, found: int, known: int) -> None:
        super().__init__(
            f"the database's schema version is {found}, newer than this charter's ({known})"
        )
        self.found = found
        self.known = known


@dataclass(frozen=True, slots=True)
class Damaged:
    """What the decision log holds in place of rows it cannot serve: decisions `seq` to
    `last_seq` are damaged (`why`: `checksum-mismatch`, `undecodable`, `chain-broken`
    or `missing`) and `detail` says how."""

    seq: int
    last_seq: int
    why: str
    detail: str


@dataclass(frozen=True, slots=True)
class Limit:
    """A cap on what `subject` may have been charged since `since_ms` (ms since the epoch;
    0 for all time): `micros` micro-USD."""

    subject: str
    since_ms: int
    micros: int


@dataclass(frozen=True, slots=True)
class Row:
    """One document with its position (the pagination key)."""

    pos: int
    id: str
    body: Doc


class Transactions(Protocol):
    """Write transactions. Whatever else a transaction holds, each interface below says
    (the decision log: its sequence; the ledger: the subjects it read)."""

    # Whether a write transaction waits on a server (its round trips, its COMMIT's
    # fsync): the core then groups more decisions to a transaction
    # (api/service/groupcommit.py). False for SQLite, whose commits are function calls.
    waits: bool

    def atomic(self) -> AbstractContextManager[None]:
        """One write transaction; nested calls join the outer one."""
        ...

    def on_begin(self, check: Callable[[], None] | None) -> None:
        """Run `check` first in every outermost transaction (`atomic()`), once it holds the
        write lock, so what it reads no other writer changes before the COMMIT; what it
        raises rolls the transaction back (nothing of it is written) and goes on up. One
        check at a time (None: none). Every write runs in a transaction, so none passes
        it by: the HTTP app checks there that a request's token is still stored
        (api.service.tokens.check_writes)."""
        ...

    def defer_commit(self) -> Deferred | None:
        """Inside a transaction, on a store that `waits`: its COMMIT is sent at its end
        and its answer read later, which the caller waits for (policy/store/deferred.py)
        before it tells anyone; None when the COMMIT is answered at the end (SQLite's, or
        outside a transaction)."""
        ...

    def after_commit(self, action: Callable[[], None]) -> None:
        """Run `action` once the current outermost transaction has committed (never if it
        rolls back); outside a transaction, at once. For what a caller may only believe
        once it is durable, such as "this document is written"."""
        ...


class ChangeFeed(Protocol):
    """What tells a process that another one changed what it caches, and what: revisions,
    and the changes noted by the transactions that made them (policy/store/changes.py).
    Decisions, documents and charges are read where they are used, not cached."""

    def data_version(self) -> int:
        """A number that differs from any read before whenever another process added a
        revision or noted a change since (SQLite's moves with any commit of another
        process; PostgresStore's with those alone: a commit of decisions or documents
        moves nothing another process caches). The cheap look that says when to read
        `changes_after`. The caller compares it with the one its caches were brought up
        to date at: several threads may look at once, so a look is done only once it is
        done."""
        ...

    def note_change(self, kind: str, key: str) -> None:
        """In the caller's write transaction: `kind` `key` changed (an agent, a toolset's
        connections, a token), numbered after the newest change, committed with it."""
        ...

    def changes_after(self, after: int) -> Feed:
        """In one read: the latest revision, the newest change's number, and the changes
        numbered after `after` (None: they cannot all be told, drop everything).
        StoreTooNew once a newer charter has migrated the database since this store
        opened it."""
        ...


class Revisions(Protocol):
    """The policy's history, numbered 1, 2, ... without gaps: a revision is numbered
    inside the transaction that adds it, after the latest committed."""

    def add_revision(self, body: Mapping[str, Any]) -> int:
        """A new revision, numbered after the latest; `body["files"]` is its `[path, text]`
        pairs. Its texts are kept once each, whatever number of revisions hold them, in
        the same transaction as the revision; so is its row, which holds what changed
        since the latest revision (its files, and the sorted lists of names in
        `body["summary"]`), read inside that transaction: whichever process wrote the
        latest, the new one is stored against it."""
        ...

    def get_revision(self, number: int) -> Doc | None:
        """The body as it was added, its files' texts with them."""
        ...

    def latest_revision(self) -> int: ...
    def list_revisions(self, after: int, limit: int) -> list[tuple[int, Doc]]:
        """Revisions after `after`, at most `limit`, in order: each body with `files` its
        paths alone (what the history shows), read without the texts."""
        ...


class Lifecycle(Protocol):
    """The store as a whole: where it is kept, whether it can write, and its end."""

    def moved(self) -> str | None:
        """Why the store's writes no longer reach where it is kept (the SQLite file was
        removed or replaced), or None: what /readyz reports. Always None for a store
        kept by a server, which has no file to lose."""
        ...

    def serving(self) -> None:
        """This process serves requests from now on: start what keeps the store in shape
        meanwhile, off the requests' path (SqliteStore: a thread that copies its WAL back
        into the file; a server-backed store: nothing, its server does that). Idempotent."""
        ...

    def write_failure(self) -> str | None:
        """Why the store cannot write now (its last write failed for want of space or an
        I/O error, and none succeeded since: a write is tried here while it fails), or
        None: what /readyz reports."""
        ...

    def close(self) -> None: ...


class Documents(Protocol):
    """Identities, agents, threads, turns, approvals, tokens, connections, ... by (kind,
    id). A write inside a transaction is seen by no other until the COMMIT; a check of
    one document and a write that depends on it belong in one transaction."""

    def insert(self, kind: str, id: str, body: Mapping[str, Any], tag: str | None = None) -> bool:
        """Add a new document; False (and nothing written) if the id is taken."""
        ...

    def insert_many(
        self, kind: str, docs: Sequence[tuple[str, Mapping[str, Any], str | None]]
    ) -> int:
        """Add new documents of `kind`, each (id, body, tag), in one statement and
        positioned in their order; one whose id is taken is left as it is. How many
        were added."""
        ...

    def update(self, kind: str, id: str, body: Mapping[str, Any], tag: str | None = None) -> bool:
        """Replace an existing document and its tag (None: no tag), keeping its position;
        False if absent."""
        ...

    def get(self, kind: str, id: str) -> Doc | None: ...
    def delete(self, kind: str, id: str) -> bool: ...
    def page(self, kind: str, after_pos: int, limit: int, tag: str | None = None) -> list[Row]:
        """Documents of `kind` after `after_pos`, in position order; with `tag`, only those
        with that tag, found through an index on (kind, tag, position), never a scan of the
        kind (the service asks "has this agent children?" as a page of one)."""
        ...

    def scan(self, kind: str, tag: str | None = None) -> Iterator[Row]:
        """Every document of `kind` (with `tag`, those with that tag, through its index), a
        page at a time: a caller that changes what it scans collects the rows first."""
        ...


class DecisionLog(Protocol):
    """Decisions, exactly once, numbered without gaps: a transaction that appends holds
    the log's tip until it ends (SQLite: the file; PostgreSQL: the writer lock)."""

    def append_decisions(self, rows: Sequence[bytes]) -> list[int]:
        """Log rows as the service encoded them (kept as given, bytes in and bytes out);
        their sequence numbers, gap-free, assigned inside the caller's transaction."""
        ...

    def read_decisions(
        self, after_seq: int, limit: int, max_bytes: int | None = None
    ) -> list[tuple[int, bytes | Damaged]]:
        """Rows from `after_seq + 1` on, at most `limit`; with `max_bytes`, stopping before
        the row that would take their bytes past it, but never before the first (a reader
        paging on from its last row always moves). Rows that fail their checksum, do not
        decode, break the log's chain or are missing come as one `Damaged` per stretch
        (at its first seq), counted as one row: the rows after them read on."""
        ...

    def log_head(self) -> tuple[int, bytes]:
        """The last seq logged and the digest of the log's chain through it
        (policy/store/rowsum.py): what vouches for every row up to it."""
        ...

    def log_link(self, seq: int) -> bytes | None:
        """The stored digest of the log's chain through `seq` (the `sum` of the run that
        ends there), or None when no run ends at `seq`: what a signed checkpoint of the
        log (policy/logseal.py) is compared with."""
        ...

    def last_seq(self) -> int: ...


class Ledger(Protocol):
    """Budget charges. Inside a transaction, a subject whose charges are read or added is
    held by it until it ends: no other transaction charges that subject meanwhile, so a
    sum read once stays exact until the COMMIT, and a check followed by a charge is
    atomic (policy/store/ledger.py)."""

    def spent(self, subject: str, since_ms: int) -> int:
        """The micro-USD charged to `subject` at or after `since_ms`; SPENT_OVERFLOW when
        the sum is past 64 bits (over every cap: a budget check fails closed). Inside a
        transaction, holds `subject` until it ends."""
        ...

    def charge_within(
        self, limits: Sequence[Limit], subjects: Sequence[str], micros: int, at_ms: int
    ) -> int | None:
        """Atomically, the check and the charge: if `micros` more keeps every limit, charge
        it to each of `subjects` (as `charge`) and answer None; else charge nothing and
        answer the index of the first limit it would pass. In the caller's transaction,
        or one of its own."""
        ...

    def charge(self, subjects: Sequence[str], micros: int, at_ms: int) -> None:
        """Charge `micros` to each subject at `at_ms`, or at the time of the subject's
        latest charge if that is later (a running total needs rows in time order): later,
        never earlier, so a charge can only count in more windows, never in fewer."""
        ...


class NamedValues(Protocol):
    """A few named values the service keeps about itself (whether the first admin token
    was issued, the workspace loaded at start, ...). Nothing caches them: setting one
    moves no change feed."""

    def get_meta(self, key: str) -> Any: ...
    def set_meta(self, key: str, value: Any) -> None: ...


class Store(
    Transactions,
    ChangeFeed,
    Revisions,
    Documents,
    DecisionLog,
    Ledger,
    NamedValues,
    Lifecycle,
    Protocol,
):
    """Everything a store keeps, as one object (SqliteStore, PostgresStore)."""
