"""The service: a store, the compiled snapshots and the caches in front of them.

Decisions, approvals and management operations live in their own modules and take a
`Service`; this module holds the shared state and the look-ups they all need.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

from api.records import Agent, Record
from api.service import rolefiles
from api.service.errors import ServiceError, Thing, not_found
from api.service.metrics import Metrics
from api.service.metricsshare import SharedMetrics
from api.service.snapshots import Snapshots
from engine.check import check_sources
from engine.compile import Snapshot, compile_workspace
from engine.workspace import Workspace
from policy.diagnostics import CharterError
from policy.secrets import Sealer
from policy.store import Doc, Store

R = TypeVar("R", bound=Record)
AGENT_STATUSES = ("idle", "running", "stopped", "error")
TURN_LIFETIME_MS = 3_600_000  # an hour: a turn older than that is not running, it is kept
CACHE_EPOCH = "cache_epoch"  # a meta value: moves whenever a cached agent or connection changes
# A meta value: every agent's tag is its parent's id, every agent token's its agent's id.
TAGGED = "documents_tagged"
# The most text (UTF-8 bytes, every file's together) a new revision may hold, by default
# (`charter serve --max-policy-mib`): each `roles.create` adds a file, and an agent's
# chain of them grew one policy, and every compile and read of it, without a bound.
MAX_POLICY_BYTES = 16 << 20


def policy_bytes(files: Sequence[tuple[str, str]]) -> int:
    """The UTF-8 bytes of the files' texts together (a text's length, when it is ASCII)."""
    return sum(
        len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        for _, text in files
    )


def now_ms() -> int:
    return int(time.time() * 1000)


def new_id() -> str:
    return str(uuid.uuid4())


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
        # The store's data version the caches were last brought up to date at (`sync`);
        # read first, so anything committed while the rest is read is looked at again.
        self._version = store.data_version()
        self.sealer = sealer
        self.snapshots = Snapshots(store)
        self.metrics = Metrics()
        # With `--workers N`: this worker's counters published, the others' read back.
        self.shared_metrics: SharedMetrics | None = None
        self._agents: dict[str, Agent] = {}
        self._connections: dict[str, list[tuple[str, str | None]]] = {}
        self._lock = threading.Lock()
        self._epoch: Any = store.get_meta(CACHE_EPOCH)
        self.reason_refs: set[str] = set()  # `reasons` documents known to be committed
        # What step 6 needs that is the same for like calls, kept across requests and
        # dropped with the agent and connection caches it derives from:
        # (id(agent), tool, connection) -> (snapshot, agent, parts); see decisionlog._static.
        self.static_parts: dict[
            tuple[int, str, str | None], tuple[Any, Agent, tuple[Any, ...]]
        ] = {}
        self._static_revision = 0  # the revision of the snapshot in every entry
        # agent id -> (the cached agent document it was built from, the agent's context
        # for conditions); the agent cache hands out the same document until it changes,
        # so identity is the check (see decide._agent_context).
        self.contexts: dict[str, tuple[Agent, dict[str, Any]]] = {}
        # (agent id, the profile a turn pinned) -> (the cached agent document, it under
        # that profile): one document while the agent's stays, so step 6's per-document
        # caches hit for a turn's calls as for any other (api.service.decide).
        self.pinned: dict[tuple[str, str], tuple[Agent, Agent]] = {}
        # The files last `prepare`d and their compiled snapshot, for their `upload`.
        self._prepared: dict[tuple[tuple[str, str], ...], Snapshot] = {}
        # How long an admitted turn decides on its revision and profile (`--turn-lifetime`).
        self.turn_lifetime_ms = TURN_LIFETIME_MS
        self.max_policy_bytes = MAX_POLICY_BYTES  # (`--max-policy-mib`; see require_room)
        self.started_at = now_ms()
        # Called when another process moved the cache epoch, and on forget_tokens (the
        # HTTP app's token cache registers its `forget`).
        self.on_epoch: list[Callable[[], None]] = []
        # Moves whenever what is cached here may have changed: another process's change
        # that a `sync` saw, or one made here (`forget_*`, `upload`). Whatever was prepared
        # on the caches before it moved is prepared again (api.service.groupcommit): the `sync` in
        # the write transaction finds nothing new when another thread of this process saw
        # the change first (a management request's), or made it.
        self.moves = 0

    # ---- caches ---------------------------------------------------------------------------
    def sync(self) -> bool:
        """Catch up with what another process changed (cheap when nothing did); whether
        the latest revision or the cache epoch moved (another process's decisions alone
        move neither). Inside a write transaction it costs no read transaction of its
        own, and nobody else can commit until it ends.

        Any commit by another process changes the store's data version, and with several
        workers nearly all of those are decisions, which change nothing cached here. So the
        agent and connection caches are dropped only when the `cache_epoch` value moved:
        every process moves it when it changes an agent or a connection or revokes a token
        (`forget_*`); the token caches in `on_epoch` are dropped then too.

        The data version and the epoch are taken as seen only once the caches are up to
        date: another thread looking meanwhile (a management request's, in its write
        transaction) catches up itself rather than decide on caches not yet dropped."""
        version = self.store.data_version()
        if version == self._version:
            return False
        latest = self.snapshots.latest
        newest, epoch = self.store.latest_with_meta(CACHE_EPOCH)
        self.snapshots.refresh(newest)
        moved = newest != latest
        if epoch != self._epoch:
            with self._lock:
                self._agents.clear()
                self._connections.clear()
                self.static_parts = {}
                self.moves += 1  # (with the drop: a read begun before is not kept after it)
            for drop in self.on_epoch:
                drop()
            self._epoch = epoch
            moved = True
        elif moved:
            self.moves += 1
        self._version = version
        return moved

    def _move_epoch(self) -> None:
        self._epoch = new_id()
        self.store.set_meta(CACHE_EPOCH, self._epoch)

    def connections_for(self, toolset: str) -> list[tuple[str, str | None]]:
        """(id, owner identity or None) of every connection for a toolset, cached."""
        found = self._connections.get(toolset)
        if found is None:
            moves = self.moves
            found = [(row.id, row.body.get("owner")) for row in self.store.scan("connections")
                     if row.body.get("toolset") == toolset]  # fmt: skip
            with self._lock:
                if self.moves == moves:  # (see find_agent)
                    self._connections[toolset] = found
        return found

    def forget_connections(self) -> None:
        """After a connection was added or removed (here and in every other process), in
        the transaction that did it: the epoch moves with the change or not at all."""
        with self._lock:
            self._connections.clear()
            self.static_parts = {}
            self.moves += 1
        self._move_epoch()

    def forget_tokens(self) -> None:
        """After a token was revoked: dropped from every process's token cache."""
        for drop in self.on_epoch:
            drop()
        self.moves += 1
        self._move_epoch()

    def forget_agent(self, agent_id: str) -> None:
        """After an agent was changed or deleted (here and in every other process), in the
        transaction that did it (see `forget_connections`)."""
        with self._lock:
            self._agents.pop(agent_id, None)
            self.static_parts = {}  # a parent's change reaches its children's caps
            self.moves += 1
        self._move_epoch()

    def keep_static(
        self,
        key: tuple[int, str, str | None],
        entry: tuple[Any, Agent, tuple[Any, ...]],
        moves: int,
    ) -> None:
        """Keep `entry` in `static_parts` unless the caches were dropped since `moves` was
        read (see find_agent): its caps were made from the agent's ancestors as read then,
        maybe before a parent's new budget, and kept, they outlived the drop (the parent's
        cap stayed out of every later call of the child until some other change)."""
        with self._lock:
            if self.moves != moves:
                return
            parts = self.static_parts
            # Every entry is of one revision's snapshot: an entry of a call never made again
            # would otherwise keep its snapshot past the snapshot cache, one old revision
            # for each such entry.
            revision = entry[0].revision
            if len(parts) >= 4096 or revision != self._static_revision:
                parts.clear()
                self._static_revision = revision
            parts[key] = entry

    def find_agent(self, agent_id: str) -> Agent | None:
        cached = self._agents.get(agent_id)
        if cached is not None:
            return cached
        moves = self.moves
        doc = self.store.get(Agent.KIND, agent_id)
        if doc is None:
            return None
        agent = Agent.read(doc)
        with self._lock:
            # Not kept if the caches were dropped while it was read (another thread saw or
            # made a change, maybe this agent's): kept, it outlived the drop.
            if self.moves == moves:
                self._agents[agent_id] = agent
        return agent

    def agent(self, agent_id: str) -> Agent:
        agent = self.find_agent(agent_id)
        if agent is None:
            raise not_found("agent", agent_id)
        return agent

    def agent_profile(self, agent: Agent, snapshot: Snapshot | None = None) -> str:
        """The name of `agent`'s profile, which `snapshot` (default: the latest) declares:
        an agent whose profile a later upload removed is decided deny ("unknown profile")
        and has nothing to list or to check what it makes against: `profile-not-found`."""
        profile = agent.profile
        snapshot = snapshot or self.current()
        if profile not in snapshot.workspace.profiles:
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
        if latest and size <= policy_bytes(self.files(latest)[1]):
            return
        raise ServiceError(
            "policy-too-large",
            f"the policy would hold {size} bytes of text, over this server's cap of "
            f"{self.max_policy_bytes}",
            help="delete roles or files the policy no longer needs, or serve it with a larger "
            "`--max-policy-mib`",
            bytes=size, max_bytes=self.max_policy_bytes,
        )  # fmt: skip

    def check(self, files: Sequence[tuple[str, str]]) -> Workspace:
        """Raises CharterError with every diagnostic; the HTTP layer makes that `policy-invalid`.
        Files under `api/roles/` must be the API's own roles, one a file (E0118,
        api.service.rolefiles); a revision stored before that rule is read as it was
        (`Snapshots` compiles a stored revision without it). A policy over the size cap
        is refused first (`require_room`), before the work of checking it."""
        self.require_room(files)
        try:
            workspace = check_sources(files)
        except CharterError as exc:
            raise rolefiles.with_problems(files, exc) from None
        rolefiles.check(files, workspace.files)
        return workspace

    def compile(self, files: Sequence[tuple[str, str]]) -> Snapshot:
        """`files` checked and compiled, for an `upload(files, ..., prepared=)` (raises
        CharterError): a snapshot of its own, which no other upload can take."""
        return compile_workspace(self.check(files))

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
        snapshot = compile_workspace(self.check(files))  # its revision is set on upload
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
    ) -> Snapshot:
        """A new revision of `files`, compiled: `prepared` (what `compile` gave for these
        files), else the one `prepare` keeps for them (taken: one upload each), else
        compiled now. It is the latest from its transaction's commit on (use the snapshot
        returned until then)."""
        # Here too, inside the caller's transaction: what was checked ahead was measured
        # against a latest revision that may have moved since.
        self.require_room(files)
        with self._lock:
            kept = self._prepared.pop(tuple(files), None)
        snapshot = prepared or kept
        if snapshot is None:
            snapshot = compile_workspace(self.check(files))
        workspace = snapshot.workspace
        body: dict[str, Any] = {
            "files": [[path, text] for path, text in files],
            "author": author,
            "note": note,
            "created_at": now_ms(),
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

    def _publish(self, snapshot: Snapshot) -> None:
        self.snapshots.put(snapshot)
        self.snapshots.latest = max(self.snapshots.latest, snapshot.revision)
        self.moves += 1

    def files(self, revision: int | None = None) -> tuple[int, list[tuple[str, str]]]:
        number = self.snapshots.latest if revision is None else revision
        if number == 0:
            return 0, []
        body = self.store.get_revision(number)
        if body is None:
            raise ServiceError("revision-not-found", f"revision {number} not found")
        return number, [(str(p), str(t)) for p, t in body["files"]]
