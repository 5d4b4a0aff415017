"""The read model: what a process keeps of the store to decide without reading it, and
the one rule that drops it.

Agents (by id), threads and turns as decisions read them, the connections of each
toolset, step 6's parts of like calls, each agent's condition context and its copies
under a turn's pinned profile, and what registers in `on_tokens` (the HTTP app's token
cache) all derive from documents whose every change is noted in the store's change feed
(policy/store/changes.py), in the transaction that makes it (a thread's, its deletion
alone: what a decision reads of one never changes while it is there). The rule: the
caches hold what the store held at the feed's version they were brought up to date at.
A change made here drops what it touched at once and notes it for the others
(`forget_*`); `sync` looks at the store's cheap `data_version`, and when another
process committed, reads the changes after the version seen and drops what they name,
nothing else (everything, when the feed cannot tell: see `changes_after`). `moves` counts every drop and every revision published
here, so a reader that began before one does not keep what it read, and a group of
decisions prepared before one is prepared again (api.service.groupcommit).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping
from functools import partial
from typing import Any, TypeVar

from api.records import Agent, Approval, Record, Thread, Turn
from api.service.errors import Thing, not_found
from api.service.snapshots import Snapshots
from policy.store import Store
from policy.store.changes import AGENT, APPROVALS, CONNECTION, THREAD, TOKEN, Change

# What drops tokens from a token cache: the ids of those revoked, or None for all.
TokenDrop = Callable[[Collection[str] | None], None]
R = TypeVar("R", bound=Record)
StaticKey = tuple[int, str, str | None, str | None]
StaticEntry = tuple[Any, Agent, Thread | None, tuple[Any, ...]]
MAX_KEPT = 16_384  # threads, and turns, kept (all dropped past it: those in use come back)


class ReadModel:
    def __init__(self, store: Store, snapshots: Snapshots) -> None:
        self.store = store
        self.snapshots = snapshots
        # The store's data version and the change feed's version the caches were last
        # brought up to date at (`sync`); the data version read first, so anything
        # committed while the feed is read is looked at again.
        self._version = store.data_version()
        self._seen = store.changes_after(0).version
        self._lock = threading.Lock()
        self._agents: dict[str, Agent] = {}
        # Threads as stored when read, for deciding their calls: what a decision reads of
        # one (its id, agent, depth and `max_cost`) never changes while it is there, and a
        # deletion is noted in the feed. Its status may have moved since: never shown.
        self._threads: dict[str, Thread] = {}
        # Turns, which never change: dropped with their agent (deleted with it).
        self._turns: dict[str, Turn] = {}
        self._connections: dict[str, list[tuple[str, str | None]]] = {}
        # What step 6 needs that is the same for like calls, kept across requests and
        # dropped with the agent, thread and connection caches it derives from:
        # (id(agent), tool, connection, thread id) -> (snapshot, agent, thread, parts); see
        # decisionlog._static.
        self.static_parts: dict[StaticKey, StaticEntry] = {}
        self._static_revision = 0  # the revision of the snapshot in every entry
        # agent id -> (the cached agent record it was built from, the agent's context for
        # conditions); the agent cache hands out the same record until it changes, so
        # identity is the check (see decide._agent_context).
        self.contexts: dict[str, tuple[Agent, dict[str, Any]]] = {}
        # (agent id, the profile a turn pinned) -> (the cached agent record, it under that
        # profile): one record while the agent's stays, so step 6's per-record caches hit
        # for a turn's calls as for any other (api.service.decide).
        self.pinned: dict[tuple[str, str], tuple[Agent, Agent]] = {}
        # Called with the ids of tokens revoked (None: any may have been), here or in
        # another process (the HTTP app's token cache registers its `forget`).
        self.on_tokens: list[TokenDrop] = []
        # Called after each commit of this process that opened or decided an approval
        # (`note_approval`): the HTTP app's approval watch, which another process's such
        # commit reaches through the change feed (api/http/approvalwatch.py).
        self.on_approvals: list[Callable[[], None]] = []
        # Called once a commit of this process changed or deleted a thread, with its id:
        # the requests that wait for a thread (api/http/threadwait.py).
        self.on_threads: list[Callable[[str], None]] = []
        # Called inside each transaction that opens or decides an approval, with the
        # change's kind and the approval as written: the webhooks' outbox, whose rows
        # commit with it (api/service/webhookoutbox.py).
        self.on_approval_events: list[Callable[[str, Approval], None]] = []
        # Moves whenever what is cached here may have changed: another process's change
        # that a `sync` saw, or one made here (`forget_*`, an upload: `moved`). Whatever
        # was prepared on the caches before it moved is prepared again
        # (api.service.groupcommit): the `sync` in the write transaction finds nothing new
        # when another thread of this process saw the change first (a management
        # request's), or made it.
        self.moves = 0

    def moved(self) -> None:
        """Something cached here changed without a drop (a revision published here)."""
        self.moves += 1

    def sync(self) -> bool:
        """Catch up with what another process changed (cheap when nothing did); whether
        the latest revision moved or anything cached here was dropped (another process's
        decisions alone do neither). Inside a write transaction it costs no read
        transaction of its own, and nobody else can commit until it ends.

        Any commit by another process changes the store's data version, and with several
        workers nearly all of those are decisions, which change nothing cached here: the
        feed's version then stays, and nothing is dropped.

        The data version and the feed's version are taken as seen only once the caches are
        up to date: another thread looking meanwhile (a management request's, in its write
        transaction) catches up itself rather than decide on caches not yet dropped. Two
        threads that read the same changes drop the same things twice, which is harmless."""
        version = self.store.data_version()
        if version == self._version:
            return False
        latest = self.snapshots.latest
        feed = self.store.changes_after(self._seen)
        self.snapshots.refresh(feed.latest)
        moved = feed.latest != latest
        dropped = feed.version != self._seen and self._drop(feed.changes)
        self._seen = feed.version
        if dropped:  # (`moves` moved with the drop)
            moved = True
        elif moved:
            self.moves += 1
        self._version = version
        return moved

    def _drop(self, changes: tuple[Change, ...] | None) -> bool:
        """Drop what `changes` name (None: all; policy/store/changes.py reads a kind this
        charter does not know as None); whether anything was. Approvals are not cached:
        their changes drop nothing, and a feed that moved with them alone moves nothing."""
        if changes is not None:
            changes = tuple(change for change in changes if change[0] not in APPROVALS)
            if not changes:
                return False
        with self._lock:
            if changes is None:
                self._agents.clear()
                self._threads.clear()
                self._turns.clear()
                self._connections.clear()
            else:
                for kind, key in changes:
                    self._dropped(kind, key)
            self._moved_now()
        revoked = None
        if changes is not None:
            revoked = [key for kind, key in changes if kind == TOKEN]
            if not revoked:
                return True
        for drop in self.on_tokens:
            drop(revoked)
        return True

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

    def _dropped(self, kind: str, key: str) -> None:  # (under the lock)
        """Drop what the change `kind` `key` names from its cache (a token is dropped from
        the token caches, through `on_tokens`)."""
        if kind == AGENT:
            self._agents.pop(key, None)
            for turn in [t.id for t in self._turns.values() if t.agent == key]:
                del self._turns[turn]
        elif kind == THREAD:
            self._threads.pop(key, None)
        elif kind == CONNECTION:
            self._connections.pop(key, None)

    def _moved_now(self) -> None:  # (under the lock)
        # Step 6's parts hold an agent's ancestors' caps and its toolsets' connections: a
        # change to any of them reaches them, so they go whole. `moves` moves with the
        # drop: a read begun before it is not kept after it.
        self.static_parts = {}
        self.moves += 1

    def _forget(self, kind: str, key: str) -> None:
        """After `kind` `key` was changed (here and in every other process), in the
        transaction that did it: dropped here, and noted in the change feed, so the change
        and its note commit together, or neither does."""
        with self._lock:
            self._dropped(kind, key)
            self._moved_now()
        self.store.note_change(kind, key)

    def forget_connections(self, toolset: str) -> None:
        """After a connection of `toolset` was added or removed."""
        self._forget(CONNECTION, toolset)

    def forget_agent(self, agent_id: str) -> None:
        """After an agent was changed or deleted."""
        self._forget(AGENT, agent_id)

    def forget_thread(self, thread_id: str) -> None:
        """After a thread was deleted."""
        self._forget(THREAD, thread_id)

    def forget_tokens(self, token_ids: Collection[str]) -> None:
        """After the tokens `token_ids` were revoked, in the transaction that did it:
        dropped from every process's token cache."""
        for drop in self.on_tokens:
            drop(token_ids)
        self.moves += 1
        for token_id in token_ids:
            self.store.note_change(TOKEN, token_id)

    def note_approval(self, kind: str, approval: Approval) -> None:
        """In the transaction that opened (`kind` APPROVAL_OPENED) or decided
        (APPROVAL_DECIDED) `approval`, as written: noted in the change feed, for the long
        polls and event streams of every process, given to `on_approval_events` in the
        transaction, and told to this process's `on_approvals` once committed. Nothing
        here is dropped: nothing caches approvals."""
        self.store.note_change(kind, approval.id)
        for noted in self.on_approval_events:
            noted(kind, approval)
        for told in self.on_approvals:
            self.store.after_commit(told)

    def note_thread(self, thread_id: str) -> None:
        """In the transaction that changed or deleted thread `thread_id`: told to this
        process's `on_threads` once committed."""
        for told in self.on_threads:
            self.store.after_commit(partial(told, thread_id))

    def keep_static(self, key: StaticKey, entry: StaticEntry, moves: int) -> None:
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

    def thread(self, thread_id: str) -> Thread:
        """Thread `thread_id` for deciding a call in it (`thread-not-found`): as stored when
        first read, so its `status` and `updated_at` may be out of date (`threads.get`
        reads the store), and without its `prompt` (up to 64 KB each, which no decision
        reads: kept, 16,384 prompts could take a gigabyte)."""
        return self._kept(self._threads, Thread, "thread", thread_id, {"prompt": ""})

    def turn(self, turn_id: str) -> Turn:
        """Turn `turn_id` for deciding a call on it (`turn-not-found`). A turn does not
        change; it is deleted with its agent, whose change drops it here."""
        return self._kept(self._turns, Turn, "turn", turn_id)

    def _kept(
        self,
        cache: dict[str, R],
        cls: type[R],
        what: Thing,
        key: str,
        left_out: Mapping[str, Any] | None = None,
    ) -> R:
        cached = cache.get(key)
        if cached is not None:
            return cached
        moves = self.moves
        doc = self.store.get(cls.KIND, key)
        if doc is None:
            raise not_found(what, key)
        found = cls.read(doc if left_out is None else {**doc, **left_out})
        with self._lock:
            if self.moves == moves:  # (see find_agent)
                if len(cache) >= MAX_KEPT:
                    cache.clear()
                cache[key] = found
        return found

    def agent(self, agent_id: str) -> Agent:
        agent = self.find_agent(agent_id)
        if agent is None:
            raise not_found("agent", agent_id)
        return agent
