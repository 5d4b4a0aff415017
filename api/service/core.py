"""The service: a store, the compiled snapshots and the caches in front of them.

Decisions, approvals and management operations live in their own modules and take a
`Service`; this module holds the shared state and the look-ups they all need.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, TypeVar

from api.records import Agent, Record
from api.service import rolefiles
from api.service.entropy import random_hex
from api.service.errors import ServiceError, Thing, not_found
from api.service.metrics import Metrics
from api.service.metricsshare import SharedMetrics
from api.service.readmodel import ReadModel
from api.service.receipts import Signer
from api.service.snapshots import Snapshots
from api.service.webhookdelivery import Deliverer
from engine import clock
from engine.check import check_sources
from engine.compile import Snapshot, compile_workspace
from engine.workspace import Workspace
from policy.bundles import TrustedKey, Verified
from policy.diagnostics import CharterError
from policy.logseal import Checkpointer
from policy.secrets import Sealer
from policy.serverkeys import ServerKeys
from policy.store import Doc, Store

R = TypeVar("R", bound=Record)
AGENT_STATUSES = ("idle", "running", "stopped", "error")
TURN_LIFETIME_MS = 3_600_000  # an hour: a turn older than that is not running, it is kept
# A meta value: every agent's tag is its parent's id, every agent token's its agent's id.
TAGGED = "documents_tagged"
# The most text (UTF-8 bytes, every file's together) a new revision may hold, by default
# (`charter serve --max-policy-mib`): each `roles.create` adds a file, and an agent's
# chain of them grew one policy, and every compile and read of it, without a bound.
MAX_POLICY_BYTES = 16 << 20
# How often a serving process looks for due schedules, by default (`charter serve
# --schedule-tick`; api.service.schedulerun).
SCHEDULE_TICK_MS = 10_000


def policy_bytes(files: Sequence[tuple[str, str]]) -> int:
    """The UTF-8 bytes of the files' texts together (a text's length, when it is ASCII)."""
    return sum(
        len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        for _, text in files
    )


def now_ms() -> int:
    """Now, in ms since the epoch; inside `one_moment()`, that moment."""
    return clock.now_ms()


def one_moment() -> AbstractContextManager[None]:
    """A block that decides at one moment: the `time.*` every condition reads and every
    stamp the service takes meanwhile (a log row's `at`, a budget's window, an approval's
    `created_at`) are the same ms, so the log says when the call was decided to the ms its
    conditions saw (a logged decision is explained at its `at`: api.service.logexplain)."""
    return clock.fixed(now_ms())


def new_id() -> str:
    """A document's id: a version 7 UUID (RFC 9562) as text, the ms since the epoch and
    74 random bits from the process's pool of system entropy. Ids of documents made later
    sort later, so the store's index of ids takes a new one at its end. A random (version
    4) id would land anywhere in it: with 100,000 thread events on SQLite, each insert of
    a batch then writes an index page of its own (15-18 µs a row, against 4.5-5 here)."""
    h = f"{time.time_ns() // 1_000_000:012x}{random_hex(10)}"
    return f"{h[:8]}-{h[8:12]}-7{h[13:16]}-{_VARIANT[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


_VARIANT = "89ab"  # RFC 9562's variant bits (10xx) in the 17th hex digit


def parent_tag(agent: Agent) -> str | None:
    """An agent's document tag: its parent's id (None for a root). Every write of an agent
    gives it, so whether an agent has children is a look-up in the store's index of tags
    (`resources._has_children`), not a read of every agent."""
    return agent.parent or None


def _stored_parent(doc: Doc) -> str | None:
    """`parent_tag` of an agent's document as it is stored, however old."""
    parent = doc.get("parent")
    return str(parent) if parent else None


def token_tag(token: Doc) -> str | None:
    """A token's document tag: the agent an agent token acts as (None for the others), so
    deleting an agent finds its tokens in the index of tags (`resources.agents_delete`)."""
    agent = token.get("agent")
    return str(agent) if agent else None


def tag_documents(store: Store) -> None:
    """A database written before agents and tokens were tagged: its agents get their
    parent's id as their tag, its agent tokens their agent's id, once (TAGGED remembers
    it; with `--workers N` the parent process does it before any worker starts). Only the
    tags change: the documents stay as they were."""
    if store.get_meta(TAGGED):
        return
    with store.atomic():
        for kind, tag_of in (("agents", _stored_parent), ("tokens", token_tag)):
            for row in store.scan(kind):
                tag = tag_of(row.body)
                if tag is not None:
                    store.update(kind, row.id, row.body, tag=tag)
        store.set_meta(TAGGED, True)


class Service:
    def __init__(self, store: Store, sealer: Sealer) -> None:
        tag_documents(store)
        self.store = store
        self.sealer = sealer
        self.snapshots = Snapshots(store)
        self.metrics = Metrics()
        # With `--workers N`: this worker's counters published, the others' read back.
        self.shared_metrics: SharedMetrics | None = None
        self._lock = threading.Lock()
        # What this process keeps of the store to decide without reading it, and the one
        # rule that drops it.
        self.read = ReadModel(store, self.snapshots)
        self.reason_refs: set[str] = set()  # `reasons` documents known to be committed
        # The files last `prepare`d and their compiled snapshot, for their `upload`.
        self._prepared: dict[tuple[tuple[str, str], ...], Snapshot] = {}
        # How long an admitted turn decides on its revision and profile (`--turn-lifetime`).
        self.turn_lifetime_ms = TURN_LIFETIME_MS
        self.max_policy_bytes = MAX_POLICY_BYTES  # (`--max-policy-mib`; see require_room)
        self.schedule_tick_ms = SCHEDULE_TICK_MS  # (`--schedule-tick`: a serving app's runner)
        self.started_at = now_ms()
        # `charter serve --trusted-keys`: every new revision is a bundle signed by one of
        # these (`upload`'s `signed`); None: any upload an admin makes.
        self.trusted: dict[str, TrustedKey] | None = None
        # The server's signing keys (made on first use), the log's checkpoints (started by
        # a serving app: api.http.app.lifespan) and the receipts' signer.
        self.keys = ServerKeys(store, sealer)
        self.checkpointer = Checkpointer(store, self.keys)
        self.receipts = Signer()
        # `charter serve --approval-webhook URL`: the approvals' events queued in their
        # transactions and delivered by a thread a serving app starts (lifespan); None
        # without webhooks (api/service/webhookdelivery.py).
        self.webhooks: Deliverer | None = None

    # ---- the read model -------------------------------------------------------------------
    def sync(self) -> bool:
        """Catch up with what another process changed (`ReadModel.sync`)."""
        return self.read.sync()

    def find_agent(self, agent_id: str) -> Agent | None:
        return self.read.find_agent(agent_id)

    def agent(self, agent_id: str) -> Agent:
        return self.read.agent(agent_id)

    def connections_for(self, toolset: str) -> list[tuple[str, str | None]]:
        return self.read.connections_for(toolset)

    def agent_profile(self, agent: Agent, snapshot: Snapshot | None = None) -> str:
        """The name of `agent`'s profile, which `snapshot` (default: the latest) declares:
        an agent whose profile a later upload removed is decided deny ("unknown profile")
        and has nothing to list or to check what it makes against: `profile-not-found`."""
        profile = agent.profile
        snapshot = snapshot or self.current()
        if profile not in snapshot.served.profiles:
            raise ServiceError(
                "profile-not-found",
                f"agent `{agent.id}` has profile `{profile}`, which revision "
                f"{snapshot.revision} does not declare",
                help="give the agent a profile of the latest revision, or upload a policy "
                "that declares this one",
            )  # fmt: skip
        return profile

    def doc(self, kind: str, what: Thing, id: str) -> Doc:
        doc = self.store.get(kind, id)
        if doc is None:
            raise not_found(what, id)
        return doc

    def record(self, cls: type[R], what: Thing, id: str) -> R:
        """The `cls` record `id` as stored (`{what}-not-found` when there is none)."""
        return cls.read(self.doc(cls.KIND, what, id))

    # ---- policy ---------------------------------------------------------------------------
    def current(self) -> Snapshot:
        return self.snapshots.current()

    def require_room(self, files: Sequence[tuple[str, str]]) -> None:
        """`policy-too-large` when `files` hold more than `max_policy_bytes` of text,
        unless no more than the latest revision: a policy over a cap lowered since may
        still shrink (a role deleted), or change without growing."""
        size = policy_bytes(files)
        if size <= self.max_policy_bytes:
            return
        latest = self.store.latest_revision()  # (in `upload`'s transaction: the true latest)
        if latest and size <= policy_bytes(self.working_files(latest)[1]):
            return
        raise ServiceError(
            "policy-too-large",
            f"the policy would hold {size} bytes of text, over this server's cap of "
            f"{self.max_policy_bytes}",
            help="delete roles or files the policy no longer needs, or serve it with a larger "
            "`--max-policy-mib`",
            bytes=size, max_bytes=self.max_policy_bytes,
        )  # fmt: skip

    def check(self, files: Sequence[tuple[str, str]], base: Snapshot | None = None) -> Workspace:
        """Raises CharterError with every diagnostic; the HTTP layer makes that `policy-invalid`.
        Files under `api/roles/` must be the API's own roles, one a file (E0118,
        api.service.rolefiles); a revision stored before that rule is read as it was
        (`Snapshots` compiles a stored revision without it). A policy over the size cap
        is refused first (`require_room`), before the work of checking it. `base`: a
        compiled policy these files change (what did not change is not checked again:
        engine/rebuild.py), when its whole workspace is at hand (a partial one is no base:
        loading the whole to check against would cost what a check of `files` costs)."""
        self.require_room(files)
        whole = None if base is None else base.whole_loaded()
        try:
            workspace = check_sources(files, base=whole)
        except CharterError as exc:
            raise rolefiles.with_problems(files, exc) from None
        rolefiles.check(files, workspace.files)
        return workspace

    def compile(self, files: Sequence[tuple[str, str]]) -> Snapshot:
        """`files` checked and compiled, for an `upload(files, ..., prepared=)` (raises
        CharterError): a snapshot of its own, which no other upload can take. Against
        the newest policy compiled here, so a change to a few files of a large policy
        checks and compiles those files and what depends on them (engine/compile.py)."""
        base = self.snapshots.newest()
        return compile_workspace(self.check(files, base), base=base)

    def prepare(self, files: Sequence[tuple[str, str]]) -> Snapshot:
        """Check and compile `files` ahead of their `upload`, outside any transaction:
        that is the slow part (seconds for a large policy), and inside the upload's
        transaction it held the store's lock, and with it every other writer and every
        worker's decisions. Raises CharterError as `upload` does. The last one prepared
        is kept for the upload of the very same files (the last few, for concurrent ones)."""
        key = tuple(files)
        with self._lock:
            found = self._prepared.get(key)
        if found is not None:
            return found
        snapshot = self.compile(files)  # its revision is set on upload
        with self._lock:
            if len(self._prepared) >= 4:
                self._prepared.pop(next(iter(self._prepared)))
            self._prepared[key] = snapshot
        return snapshot

    def upload(
        self,
        files: Sequence[tuple[str, str]],
        author: str,
        note: str = "",
        prepared: Snapshot | None = None,
        signed: Verified | None = None,
    ) -> Snapshot:
        """A new revision of `files`, compiled: `prepared` (what `compile` gave for these
        files), else the one `prepare` keeps for them (taken: one upload each), else
        compiled now. It is the latest from its transaction's commit on (use the snapshot
        returned until then). `signed`: the verified bundle of these very files, which
        the revision keeps; with trusted keys a revision without one is refused, whatever
        path it came by (`require_signed`)."""
        self.require_signed(files, signed)
        # Here too, inside the caller's transaction: what was checked ahead was measured
        # against a latest revision that may have moved since.
        self.require_room(files)
        with self._lock:
            kept = self._prepared.pop(tuple(files), None)
        snapshot = prepared or kept
        if snapshot is None:
            snapshot = self.compile(files)
        workspace = snapshot.workspace
        body: dict[str, Any] = {
            "files": [[path, text] for path, text in files],
            "author": author,
            "note": note,
            "created_at": now_ms(),
            **({"bundle": signed.document.to_json()} if signed is not None else {}),
            "summary": {
                "toolsets": sorted(workspace.toolsets),
                "roles": sorted(workspace.roles),
                "hooks": sorted(workspace.hooks),
                "profiles": sorted(workspace.profiles),
                "tests": len(workspace.tests),
            },
        }
        # A snapshot's revision is set here, once, before anything else can see it.
        snapshot.revision = self.store.add_revision(body)
        # Served once its transaction commits, not before: one that rolls back (a COMMIT
        # refused by a full disk) left this process deciding on a revision the
        # store never kept, whose number the next upload then gave to other files.
        self.store.after_commit(partial(self._publish, snapshot))
        return snapshot

    def require_signed(
        self, files: Sequence[tuple[str, str]] | None = None, signed: Verified | None = None
    ) -> None:
        """`signature-required` when this server takes only signed bundles and `files`
        are not the very files of a bundle `signed` by a trusted key (None: whether any
        change but a signed bundle may be made at all: a role's, say)."""
        if self.trusted is None:
            return
        if signed is not None and signed.key_id is not None and signed.files == tuple(files or ()):
            return
        raise ServiceError(
            "signature-required",
            "this server takes the policy only as a bundle signed by a trusted key "
            "(`charter serve --trusted-keys`)",
            help="change the workspace, sign it (`charter bundle build DIR -o FILE`, "
            "`charter bundle sign FILE --key KEYFILE`) and upload it: `PUT /v1/policy/bundle`",
        )  # fmt: skip

    def _publish(self, snapshot: Snapshot) -> None:
        self.snapshots.put(snapshot)
        self.snapshots.latest = max(self.snapshots.latest, snapshot.revision)
        self.read.moved()

    def working_files(self, revision: int | None = None) -> tuple[int, list[tuple[str, str]]]:
        """The files a change of the policy starts from: a revision's (default: the
        latest's), from its snapshot when it is compiled here (a revision never changes,
        and its snapshot was compiled from these very texts), else as `files` reads them.
        A reader of a revision asks `files`, which reports a damaged row."""
        number = self.snapshots.latest if revision is None else revision
        compiled = self.snapshots.cached(number) if number else None
        if compiled is not None:
            return number, [(f.path, f.text) for f in compiled.served.files]
        return self.files(number)

    def files(self, revision: int | None = None) -> tuple[int, list[tuple[str, str]]]:
        """A revision's files (default: the latest's), in their order, read from the store."""
        number = self.snapshots.latest if revision is None else revision
        if number == 0:
            return 0, []
        body = self.store.get_revision(number)
        if body is None:
            raise ServiceError("revision-not-found", f"revision {number} not found")
        return number, [(str(p), str(t)) for p, t in body["files"]]
