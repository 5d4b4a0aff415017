"""`If-Match`: a write made from what the client read goes ahead only while that is still
what is stored (docs/http.md, "Lost updates"). One reader for every endpoint that takes
it: the policy upload (a revision's number as its tag) and the resources' `PATCH` and
`DELETE` (a digest of the stored document, api.service.etags; of a role, of its own
file, api.service.views)."""

from __future__ import annotations

import re

from starlette.requests import Request

from api.service.errors import ServiceError

# RFC 9110's strong entity-tag (`"` etagc* `"`), ASCII only: a resource's own (any such
# tag may be sent; one not its ETag is a 412, as a tag of an earlier state is).
ENTITY_TAG = re.compile(r'"[!#-~]*"')


def if_match(request: Request, shape: re.Pattern[str], what: str, source: str) -> str | None:
    """`If-Match` as sent, without the spaces around it: `*` (the target exists) or one
    entity tag of `shape`; None when not sent. Anything else (a weak `W/` tag, which a
    strong comparison never matches, a list, in one header or in two, a tag without its
    quotes) is 400 `bad-if-match`: the client meant a precondition, and the write must
    not go ahead as if it had sent none. `what`: the tag the endpoint takes, with an
    example; `source`: where the client finds it."""
    sent = request.headers.getlist("if-match")
    if not sent:
        return None
    value = sent[0].strip()
    # Sent twice, it is a list (RFC 9110: field lines of one name are one list), refused
    # as the same list in one line is, not read as its first tag alone.
    if len(sent) > 1 or (value != "*" and shape.fullmatch(value) is None):
        raise ServiceError(
            "bad-if-match", f"`If-Match` is {what}, or `*`",
            help=f"send the `ETag` that {source} gave, quotes and all",
        )  # fmt: skip
    return value
