"""The filters of `GET /v1/decisions`: which logged decisions a page holds.

`agent` (an agent's id), `tool` (a tool's full name, or a prefix ending in `*`:
`mail.*`), `effect` (`allow`, `deny` or `pause`), and `since` / `until` (ms since the
epoch, `since` inclusive, `until` exclusive). The log is kept in sequence order, not by
these, so a filtered page is read by scanning: at most `MAX_SCAN` rows a request, and the
page's `next_after_seq` is the last row scanned, matched or not; a client pages on from
it as without filters, until `next_after_seq` stops moving. A damaged stretch of the log
is always in the page, as it cannot be matched and must not be hidden.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from api.http.pagination import query
from api.service.errors import ServiceError

MAX_SCAN = 10_000  # rows one filtered request reads at most
_EFFECTS = ("allow", "deny", "pause")
_MAX_TEXT = 256  # an agent id or a tool name: at most as long as the API names them
NAMES = ("agent", "tool", "effect", "since", "until")


@dataclass(frozen=True, slots=True)
class LogFilter:
    agent: str | None = None
    tool: str | None = None
    effect: str | None = None
    since: int | None = None
    until: int | None = None

    @property
    def active(self) -> bool:
        given = (self.agent, self.tool, self.effect, self.since, self.until)
        return any(v is not None for v in given)

    def matches(self, entry: dict[str, Any]) -> bool:
        """Whether a page's entry is in: a damaged stretch always is."""
        if "damaged" in entry:
            return True
        if self.agent is not None and entry.get("agent") != self.agent:
            return False
        if self.effect is not None and entry.get("effect") != self.effect:
            return False
        if self.tool is not None:
            tool = str(entry.get("tool", ""))
            if self.tool.endswith("*"):
                if not tool.startswith(self.tool[:-1]):
                    return False
            elif tool != self.tool:
                return False
        at = int(entry.get("at", 0))
        if self.since is not None and at < self.since:
            return False
        return self.until is None or at < self.until


def _text(request: Request, name: str) -> str | None:
    value = query(request, name)
    if value is None or value == "":
        return None
    if len(value) > _MAX_TEXT:  # (an agent's id: refused as every over-long id is)
        if name == "agent":
            raise ServiceError("id-too-long", f"`agent` is over {_MAX_TEXT} characters")
        raise ServiceError("bad-log-filter", f"`{name}` is over {_MAX_TEXT} characters")
    return value


def _time(request: Request, name: str) -> int | None:
    raw = query(request, name)
    if raw is None or raw == "":
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise ServiceError(
            "bad-log-filter",
            f"`{name}` must be a time in ms since the epoch",
            help="e.g. `since=1764806400000`; ASCII digits, at most 18",
        )
    return int(raw)


def log_filter(request: Request) -> LogFilter:
    """The request's filters; 400 `bad-log-filter` for one that cannot be read."""
    effect = _text(request, "effect")
    if effect is not None and effect not in _EFFECTS:
        raise ServiceError(
            "bad-log-filter",
            f"`effect` must be `allow`, `deny` or `pause`, not `{effect[:32]}`",
        )
    return LogFilter(
        _text(request, "agent"), _text(request, "tool"), effect,
        _time(request, "since"), _time(request, "until"),
    )  # fmt: skip
