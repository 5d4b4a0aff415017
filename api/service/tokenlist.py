"""`GET /v1/tokens`: the tokens in the order they were issued, a page at a time, each as
its record shows it (api.records.Token): its id, scope, agent, name, when it was issued,
when it expires and when it was last used; never its hash, nor anything of the token."""

from __future__ import annotations

from typing import Any

from api.commands import Listing
from api.records import Token
from api.service import pages
from api.service.core import Service
from api.service.tokenuse import TokenUses


class ListTokens(Listing):
    tool = "tokens.list"  # (an admin's alone: no agent's tool call, and no operation)


def listed(service: Service, uses: TokenUses, cursor: str | None, limit: int | None) -> Any:
    """A page of the tokens (`{items, next_cursor}`), each `last_used_at` the later of the
    one stored and the one this process noted and has yet to write: its own requests are
    in it, and the listing, a read, writes nothing."""
    body: dict[str, Any] = pages.page(
        service, Token.KIND, ListTokens(cursor=cursor, limit=limit)
    ).body
    items: list[Token] = body["items"]
    body["items"] = [_with_use(item, uses.noted(item.id)) for item in items]
    return body


def _with_use(token: Token, noted: int | None) -> Token:
    if noted is None or (token.last_used_at or 0) >= noted:
        return token
    return token.changed(last_used_at=noted)
