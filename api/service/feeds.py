"""Feeds: named streams of text messages, the built-in tools `feeds.list`, `.get`,
`.create`, `.update`, `.delete`, `.publish` and `.messages`.

A feed is a document of kind `feeds` (api.records.Feed) holding `last_seq`, the number of
its newest message. `feeds.publish` reads the feed, numbers the message `last_seq + 1` and
stores both in one write transaction, which holds the store's writer lock: two publishes
never take one number, and a rolled-back one leaves none unused, so a feed's messages are
numbered 1, 2, ... without gaps. A message is a document of kind `feed-messages` keyed by
its feed and number and tagged with the feed, so `feeds.messages` reads `after_seq + 1`,
`after_seq + 2`, ... by key, and deleting a feed deletes its messages through the tag
index. Feeds are the service's, not an agent's: the policy says which agents reach them.
An agent's request on a feed that is not there is refused before it is decided (`check`).
"""

from __future__ import annotations

from typing import Any

from api import commands as c
from api.records import Feed
from api.service.core import Service, new_id, now_ms
from api.service.etags import etag
from api.service.ops import Operation, Outcome, Result
from api.service.pages import limit_of, page
from api.service.tokens import Principal
from policy.store import Doc

MESSAGES = "feed-messages"


def _key(feed: str, seq: int) -> str:
    # (a feed's id is a UUID the service made and a number at most 19 digits: the key is
    # well within a document id's 256 characters)
    return f"{seq}:{feed}"


def check(service: Service, actor: Principal, command: c.Command) -> None:
    """Before an agent's `feeds.*` request is decided: the feed it names, if any, is
    there (else `feed-not-found`, neither logged nor paused, as for a thread). The
    operation looks again, for a paused call approved later."""
    named = command.feed if isinstance(command, c.PublishMessage | c.ReadMessages) else None
    if named is None and isinstance(command, c.ById):
        named = command.id
    if named is not None:
        service.record(Feed, "feed", named)


def stored(service: Service, actor: Principal, command: c.ById) -> Doc:
    """The feed `command.id` as stored: what a `PATCH` or `DELETE` acts on, and its
    `If-Match` names (api.service.manage). A publish changes it (`last_seq`), so its `ETag`
    moves with each message."""
    return service.record(Feed, "feed", command.id).stored()


def feeds_list(service: Service, actor: Principal, command: c.ListFeeds) -> Result:
    return page(service, Feed.KIND, command)


def feeds_get(service: Service, actor: Principal, command: c.GetFeed) -> Result:
    feed = service.record(Feed, "feed", command.id)
    return Result(Outcome.DONE, feed, etag(feed.stored()))


def feeds_create(service: Service, actor: Principal, command: c.CreateFeed) -> Result:
    now = now_ms()
    feed = Feed(id=new_id(), name=command.name, last_seq=0, created_at=now, updated_at=now)
    service.store.insert(Feed.KIND, feed.id, feed.stored())
    return Result(Outcome.CREATED, feed, etag(feed.stored()))


def feeds_update(service: Service, actor: Principal, command: c.UpdateFeed) -> Result:
    with service.store.atomic():  # (a publish meanwhile keeps its `last_seq`)
        feed = service.record(Feed, "feed", command.id)
        if command.name is not None:
            feed = feed.changed(name=command.name, updated_at=now_ms())
            service.store.update(Feed.KIND, feed.id, feed.stored())
    return Result(Outcome.DONE, feed, etag(feed.stored()))


def feeds_delete(service: Service, actor: Principal, command: c.DeleteFeed) -> Result:
    with service.store.atomic():
        service.record(Feed, "feed", command.id)
        for key in [row.id for row in service.store.scan(MESSAGES, tag=command.id)]:
            service.store.delete(MESSAGES, key)
        service.store.delete(Feed.KIND, command.id)
    return Result(Outcome.REMOVED, None)


def feeds_publish(service: Service, actor: Principal, command: c.PublishMessage) -> Result:
    with service.store.atomic():  # (the writer lock: one publish at a time numbers)
        feed = service.record(Feed, "feed", command.feed)
        now, seq = now_ms(), feed.last_seq + 1
        message = {"seq": seq, "message": command.message, "published_at": now}
        service.store.insert(MESSAGES, _key(feed.id, seq), message, tag=feed.id)
        feed = feed.changed(last_seq=seq, updated_at=now)
        service.store.update(Feed.KIND, feed.id, feed.stored())
    return Result(Outcome.CREATED, message)


def feeds_messages(service: Service, actor: Principal, command: c.ReadMessages) -> Result:
    """Messages `after_seq + 1` on, at most `limit`; `next_after_seq` is the last one's
    number, the `after_seq` of the next page (`after_seq` itself when none is newer), as
    `GET /v1/decisions` pages the log."""
    limit = limit_of(command.limit)
    after = command.after_seq or 0
    feed = service.record(Feed, "feed", command.feed)
    last = min(feed.last_seq, after + limit)
    items: list[Any] = []
    for seq in range(after + 1, last + 1):
        doc = service.store.get(MESSAGES, _key(feed.id, seq))
        if doc is not None:  # (a publish is whole: each number up to `last_seq` is there)
            items.append(dict(doc))
    return Result(Outcome.DONE, {"items": items, "next_after_seq": max(after, last)})


OPERATIONS: dict[str, Operation] = {
    "feeds.list": feeds_list,
    "feeds.get": feeds_get,
    "feeds.create": feeds_create,
    "feeds.update": feeds_update,
    "feeds.delete": feeds_delete,
    "feeds.publish": feeds_publish,
    "feeds.messages": feeds_messages,
}
