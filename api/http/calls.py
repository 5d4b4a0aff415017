"""Reading decision requests: a fast path for well-formed bodies, the models for the rest.

The pydantic models (api.http.models) define what a decision request is and say what is
wrong with a bad one. Building a model per call, then a Call from it, was a sixth of a
batch's cost, so a body is first parsed by the same JSON parser (pydantic-core's, so big
integers stay integers) and checked by hand against a strict subset of what the models
accept; anything outside that subset (a missing or extra field, a wrong type, a string
`expected_cost`, malformed JSON) goes through the models, which accept it or give the
422 they always gave. The fast path never accepts what the models would refuse.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic_core import from_json

from api.http import models as m
from api.http.body import check_depth, parse
from api.service.decide import Call

_FIELDS = frozenset(m.DecisionRequest.model_fields)
_new_call = tuple.__new__


def _call(item: m.DecisionRequest) -> Call:
    return Call(
        item.agent, item.tool, item.args, item.thread, item.turn, item.context,
        item.expected_cost, item.connection,
    )  # fmt: skip


def _fast_call(item: Any) -> Call | None:
    """A Call from a parsed JSON object the models would accept as is, else None."""
    if type(item) is not dict or not item.keys() <= _FIELDS:
        return None
    agent = item.get("agent")
    tool = item.get("tool")
    if type(agent) is not str or not 0 < len(agent) <= m.MAX_ID:
        return None
    if type(tool) is not str or not 0 < len(tool) <= m.MAX_ID:
        return None
    args = item.get("args", None)
    if args is None:
        if "args" in item:  # null is not an object
            return None
        args = {}
    elif type(args) is not dict:
        return None
    if len(item) == 2 or (len(item) == 3 and "args" in item):
        # The usual call: agent, tool, args and nothing else (built by tuple's constructor:
        # a NamedTuple's own __new__ is a Python function, ~100 ns more per call).
        return _new_call(Call, (agent, tool, args, None, None, None, None, None))
    thread = item.get("thread")
    turn = item.get("turn")
    connection = item.get("connection")
    context = item.get("context")
    for value in (thread, turn, connection):
        if value is not None and type(value) is not str:
            return None
    if context is not None and type(context) is not dict:
        return None
    cost = item.get("expected_cost")
    if cost is not None:
        if type(cost) is not int or cost < 0:
            return None  # strings, fractions, negatives: the model decides
        cost = Decimal(cost)
    return Call(agent, tool, args, thread, turn, context, cost, connection)


def _check_depths(calls: list[Call]) -> list[Call]:
    """After every call validated, as the models' path does (a 422 wins over a 400)."""
    for call in calls:
        check_depth(call.args, "args")
        check_depth(call.context, "context")
    return calls


def _parsed(raw: bytes) -> Any:
    try:
        # Keys only: values are mostly distinct, and caching them cost a sixth of the parse.
        return from_json(raw, allow_inf_nan=False, cache_strings="keys")
    except ValueError:
        return None


def one_call(raw: bytes) -> Call:
    """The Call of a `POST /v1/decisions` body (raises ServiceError 400/413/422)."""
    call = _fast_call(_parsed(raw))
    if call is None:
        call = _call(parse(m.DecisionRequest, raw))
    return _check_depths([call])[0]


def batch_calls(raw: bytes) -> list[Call]:
    """The Calls of a `POST /v1/decisions/batch` body (raises ServiceError 400/413/422)."""
    body = _parsed(raw)
    if type(body) is dict and body.keys() == {"calls"}:
        items = body["calls"]
        if type(items) is list and 0 < len(items) <= m.MAX_BATCH:
            calls = []
            for item in items:
                call = _fast_call(item)
                if call is None:
                    break
                calls.append(call)
            else:
                return _check_depths(calls)
    return _check_depths([_call(item) for item in parse(m.BatchRequest, raw).calls])
