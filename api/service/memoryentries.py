"""An agent's memory: entries of text under `/`-separated paths, the built-in tools
`memory.list`, `memory.read`, `memory.write` and `memory.delete`.

An agent's entries are shared by all of its threads: one is keyed by the agent's id and
its path, stored as a document of kind `memory` tagged with the agent (so a list reads
one agent's entries through the documents' tag index). An admin names the agent; an
agent's token reaches its own entries only (`not-own-agent`), checked before its request
is decided (api.service.manage), so such a request is neither logged nor paused.

A path is `/` and then 1 to MAX_SEGMENTS segments joined by `/`, each 1 to
MAX_SEGMENT_CHARS characters with no control character, at most MAX_PATH_CHARS in all
(`bad-memory-path`). A list's `path` is a prefix of whole segments: `/notes` lists
`/notes` and everything under `/notes/`, and `/` lists all. Content is the agent's own
data: answered as written, and an agent's `memory.write` is logged with its arguments in
the decision log, as any call is; the server's own log lines never hold it.
"""

from __future__ import annotations

import hashlib
from typing import Any

from api import commands as c
from api.service import agentowned
from api.service.core import Service, now_ms
from api.service.errors import ServiceError
from api.service.ops import Operation, Outcome, Result
from api.service.pages import decode, encode, limit_of
from api.service.tokens import Principal

KIND = agentowned.MEMORY
MAX_PATH_CHARS = 1024
MAX_SEGMENT_CHARS = 256
MAX_SEGMENTS = 32
_SCAN = 200  # documents read at a time while a list looks for entries under its prefix
_PATH_HELP = "a path is `/` then segments joined by `/`, as `/notes/today`"


def _bad_path(why: str) -> ServiceError:
    return ServiceError("bad-memory-path", f"the memory path {why}", help=_PATH_HELP)


def check_path(path: str, *, root: bool = False) -> str:
    """`path` if it is a valid entry path (`root`: or `/`, a list's prefix of all), else
    `bad-memory-path`. The message never quotes a path longer than the limit."""
    if len(path) > MAX_PATH_CHARS:
        raise _bad_path(f"has {len(path)} characters, more than {MAX_PATH_CHARS}")
    if root and path == "/":
        return path
    if not path.startswith("/"):
        raise _bad_path("must start with `/`")
    segments = path[1:].split("/")
    if len(segments) > MAX_SEGMENTS:
        raise _bad_path(f"has {len(segments)} segments, more than {MAX_SEGMENTS}")
    for segment in segments:
        if not segment:
            raise _bad_path(f"`{path}` has an empty segment")
        if len(segment) > MAX_SEGMENT_CHARS:
            raise _bad_path(f"has a segment of more than {MAX_SEGMENT_CHARS} characters")
        if any(ord(char) < 32 or ord(char) == 127 for char in segment):
            raise _bad_path("has a control character")
    return path


def _owner(service: Service, actor: Principal, agent: str | None) -> str:
    """Whose entries the request reaches: an agent's token its own, an admin the agent it
    names (`agent-required`, `agent-not-found`)."""
    if actor.agent is not None:
        if agent is not None and agent != actor.agent:
            raise ServiceError(
                "not-own-agent",
                f"agent `{actor.agent}` reaches its own memory only, not agent `{agent}`'s",
                help="leave out `agent`, or send the request with that agent's own token",
            )  # fmt: skip
        return actor.agent
    if agent is None:
        raise ServiceError("agent-required", "an admin's memory request names its `agent`")
    return service.agent(agent).id


def _key(agent: str, path: str) -> str:
    # One document id of a fixed length per (agent, path): an id is at most 256
    # characters and a path up to 1,024.
    return hashlib.sha256(f"{agent}\0{path}".encode()).hexdigest()


def _entry(doc: Any) -> dict[str, Any]:
    return {key: doc[key] for key in ("agent", "path", "content", "created_at", "updated_at")}


def _item(doc: Any) -> dict[str, Any]:
    return {"path": doc["path"], "chars": len(doc["content"]), "updated_at": doc["updated_at"]}


def check(service: Service, actor: Principal, command: c.MemoryCommand) -> None:
    """Before an agent's `memory.*` request is decided: its path and its agent."""
    check_path(
        "/" if command.path is None else command.path, root=isinstance(command, c.ListMemory)
    )
    _owner(service, actor, command.agent)


def _under(path: str, prefix: str) -> bool:
    return prefix == "/" or path == prefix or path.startswith(prefix + "/")


def memory_list(service: Service, actor: Principal, command: c.ListMemory) -> Result:
    prefix = check_path("/" if command.path is None else command.path, root=True)
    agent = _owner(service, actor, command.agent)
    listed = f"{agent}\0{prefix}"  # (another agent's or prefix's cursor: `bad-cursor`)
    after = decode(KIND, command.cursor, listed)
    limit = limit_of(command.limit)
    found: list[tuple[int, Any]] = []
    while len(found) <= limit:
        rows = service.store.page(KIND, after, _SCAN, agent)
        found.extend((row.pos, row.body) for row in rows if _under(row.body["path"], prefix))
        if len(rows) < _SCAN:
            break
        after = rows[-1].pos
    more = len(found) > limit
    found = found[:limit]
    cursor = encode(KIND, found[-1][0], listed=listed) if more else None
    return Result(Outcome.DONE, {"items": [_item(doc) for _, doc in found], "next_cursor": cursor})


def _stored(service: Service, agent: str, path: str) -> Any:
    doc = service.store.get(KIND, _key(agent, path))
    if doc is None:
        raise ServiceError(
            "memory-entry-not-found", f"agent `{agent}` has no memory entry `{path}`"
        )  # fmt: skip
    return doc


def memory_read(service: Service, actor: Principal, command: c.ReadMemory) -> Result:
    path = check_path(command.path)
    return Result(
        Outcome.DONE, _entry(_stored(service, _owner(service, actor, command.agent), path))
    )


def memory_write(service: Service, actor: Principal, command: c.WriteMemory) -> Result:
    path = check_path(command.path)
    with service.store.atomic():
        agent = _owner(service, actor, command.agent)
        key, now = _key(agent, path), now_ms()
        old = service.store.get(KIND, key)
        doc = {"agent": agent, "path": path, "content": command.content,
               "created_at": now if old is None else old["created_at"], "updated_at": now}  # fmt: skip
        if old is None:
            service.store.insert(KIND, key, doc, tag=agent)
        else:
            service.store.update(KIND, key, doc, tag=agent)
    return Result(Outcome.CREATED if old is None else Outcome.DONE, _entry(doc))


def memory_delete(service: Service, actor: Principal, command: c.DeleteMemory) -> Result:
    path = check_path(command.path)
    with service.store.atomic():
        agent = _owner(service, actor, command.agent)
        _stored(service, agent, path)
        service.store.delete(KIND, _key(agent, path))
    return Result(Outcome.REMOVED, None)


OPERATIONS: dict[str, Operation] = {
    "memory.list": memory_list,
    "memory.read": memory_read,
    "memory.write": memory_write,
    "memory.delete": memory_delete,
}
