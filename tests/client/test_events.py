"""The approvals' stream read line by line (charter.client.events), as the server writes
it (api/http/approvals.py): events, comments, keep-alives and their ids."""

from __future__ import annotations

import pytest

from charter.client.errors import NoAnswer
from charter.client.events import ApprovalEvent, EventReader

APPROVAL = (
    '{"id":"ap-1","status":"pending","agent":"a1","tool":"billing.refund","args":{"amount":80},'
    '"thread":null,"turn":null,"connection":null,"revision":1,"reasons":[],"management":false,'
    '"created_at":1,"decided_at":null,"decided_by":null,"final":null}'
)
STREAM = f"""retry: 2000

event: ready
id: 118
data: {{"after":118}}

: keep-alive
id: 120

event: approval.opened
id: 121
data: {APPROVAL}

id: 125

event: reset
id: 900
data: {{"after":900,"detail":"events were missed"}}

"""


def _read(text: str) -> tuple[list[ApprovalEvent], EventReader]:
    reader = EventReader()
    events = [e for line in text.split("\n") if (e := reader.feed(line)) is not None]
    return events, reader


def test_events_and_their_ids() -> None:
    events, reader = _read(STREAM)
    assert [(e.kind, e.id) for e in events] == [
        ("ready", 118), ("approval.opened", 121), ("reset", 900)
    ]  # fmt: skip
    assert events[0].data == {"after": 118} and events[0].approval is None
    opened = events[1].approval
    assert opened is not None and (opened.id, opened.status, opened.args) == (
        "ap-1", "pending", {"amount": 80}
    )  # fmt: skip
    assert reader.last_id == 900


def test_a_keep_alive_moves_the_position_and_is_no_event() -> None:
    events, reader = _read(": keep-alive\nid: 130\n\nid: 131\n\n")
    assert events == [] and reader.last_id == 131


def test_data_on_several_lines_is_one_event() -> None:
    first, rest = APPROVAL.split('"agent"')
    events, _ = _read(f'event: approval.decided\nid: 7\ndata: {first}\ndata: "agent"{rest}\n\n')
    assert [(e.kind, e.data["id"]) for e in events] == [("approval.decided", "ap-1")]
    assert events[0].approval is not None and events[0].approval.agent == "a1"


def test_an_event_that_is_not_the_apis_is_no_answer() -> None:
    with pytest.raises(NoAnswer):
        _read('event: approval.opened\nid: 7\ndata: {"id": "x"}\n\n')
    with pytest.raises(NoAnswer):
        _read("event: ready\nid: 7\ndata: {not json\n\n")
