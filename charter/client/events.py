"""The approvals' event stream (`GET /v1/approvals/events`, Server-Sent Events) read line
by line, apart from any transport: both clients feed it the stream's lines.

An event is `ready` (the stream's start: `data.after`), `approval.opened` or
`approval.decided` (`approval`: the approval as it was when it was sent) or `reset` (the
client was too far behind: read `GET /v1/approvals?status=pending` again). Its `id` is
what a client that reconnects gives back as `last_event_id`; `EventReader.last_id` also
follows the ids of the stream's keep-alive comments, the position past every change."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from api.records import Approval
from api.service.encoding import loads
from charter.client.errors import NoAnswer


@dataclass(frozen=True)
class ApprovalEvent:
    kind: str  # "ready", "approval.opened", "approval.decided" or "reset"
    id: int
    data: dict[str, Any] = field(repr=False)  # the event's JSON
    approval: Approval | None = None  # for `approval.opened` and `approval.decided`


class EventReader:
    """Lines in (without their line breaks), events out, as the SSE specification reads
    them: an event ends at a blank line; a line that starts with `:` is a comment."""

    def __init__(self) -> None:
        self.last_id: int | None = None
        self._kind = ""
        self._data: list[str] = []

    def feed(self, line: str) -> ApprovalEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._kind = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and value.isascii() and value.isdigit():
            self.last_id = int(value)
        return None  # (`retry`, and fields the specification ignores)

    def _dispatch(self) -> ApprovalEvent | None:
        kind, data = self._kind or "message", self._data
        self._kind, self._data = "", []
        if not data:  # (a keep-alive: its id moved `last_id`, and there is no event)
            return None
        try:
            doc = loads("\n".join(data))
            if not isinstance(doc, dict):
                raise ValueError("an event's data is a JSON object")
            shown = Approval.model_validate(doc) if kind.startswith("approval.") else None
        except (ValueError, ValidationError) as exc:  # (not JSON, or not an approval)
            raise NoAnswer(f"a `{kind}` event of the approvals' stream is not the API's") from exc
        return ApprovalEvent(kind, self.last_id or 0, doc, shown)
