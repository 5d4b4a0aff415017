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
    """A page of the tokens (`{items, next_cursor}`). The uses this process noted are
    written first, so its own requests are in `last_used_at`."""
    if uses.pending():
        with service.store.atomic():
            uses.write(service.store)
    return pages.page(service, Token.KIND, ListTokens(cursor=cursor, limit=limit)).body
