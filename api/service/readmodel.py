"""The read model: what a process keeps of the store to decide without reading it, and
the one rule that drops it.

Agents (by id), the connections of each toolset, step 6's parts of like calls, each
agent's condition context and its copies under a turn's pinned profile, and what
registers in `on_epoch` (the HTTP app's token cache) all derive from documents whose
every change moves the store's cache epoch, here and in every other process. `sync`
looks at the store's change feed (`data_version`): when another process moved the
epoch, all of it is dropped at once; a change made here drops what it touched and moves
the epoch for the others (`forget_*`). `moves` counts every drop and every revision
published here, so a reader that began before one does not keep what it read, and a
group of decisions prepared before one is prepared again (api.service.groupcommit).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

from api.records import Agent
from api.service.errors import not_found
from api.service.snapshots import Snapshots
from policy.store import Store

CACHE_EPOCH = "cache_epoch"  # a meta value: moves whenever a cached agent or connection changes


class ReadModel:
    def __init__(self, store: Store, snapshots: Snapshots) -> None:
        self.store = store
        self.snapshots = snapshots
        # The store's data version the caches were last brought up to date at (`sync`);
        # read first, so anything committed while the rest is read is looked at again.
        self._version = store.data_version()
        self._epoch: Any = store.get_meta(CACHE_EPOCH)
        self._lock = threading.Lock()
        self._agents: dict[str, Agent] = {}
        self._connections: dict[str, list[tuple[str, str | None]]] = {}
        # What step 6 needs that is the same for like calls, kept across requests and
        # dropped with the agent and connection caches it derives from:
        # (id(agent), tool, connection) -> (snapshot, agent, parts); see decisionlog._static.
        self.static_parts: dict[
            tuple[int, str, str | None], tuple[Any, Agent, tuple[Any, ...]]
        ] = {}
        self._static_revision = 0  # the revision of the snapshot in every entry
        # agent id -> (the cached agent record it was built from, the agent's context for
        # conditions); the agent cache hands out the same record until it changes, so
        # identity is the check (see decide._agent_context).
        self.contexts: dict[str, tuple[Agent, dict[str, Any]]] = {}
        # (agent id, the profile a turn pinned) -> (the cached agent record, it under that
        # profile): one record while the agent's stays, so step 6's per-record caches hit
        # for a turn's calls as for any other (api.service.decide).
        self.pinned: dict[tuple[str, str], tuple[Agent, Agent]] = {}
        # Called when another process moved the cache epoch, and on forget_tokens (the
        # HTTP app's token cache registers its `forget`).
        self.on_epoch: list[Callable[[], None]] = []
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
        self._epoch = str(uuid.uuid4())
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
