"""Reading decision requests: a fast path for well-formed bodies, the models for the rest.

The pydantic models (api.http.models) define what a decision request is and say what is
wrong with a bad one. Building a model per call, then a Call from it, costs a sixth of
a batch, so a body is first parsed by the same JSON parser (jiter, pydantic-core's
own, so big integers stay integers) and checked by hand against a strict subset of what
the models accept; anything outside that subset (a missing or extra field, a wrong type,
a string `expected_cost`, malformed JSON) goes through the models, which accept it or
give the 422 they always gave. The fast path never accepts what the models would refuse.

Numbers are compared exactly, never rounded (docs/design-notes.md), and a float is not
exact: `100.000000000000000000000001` and `1e-400` parse to 100.0 and 0.0. So the fast
path parses with `float_mode="lossless-float"` (a number with a fraction or an exponent
is kept as its text) and gives each such number of the args and context its exact value:
the float it parses to when that is exactly what its text says (20.5), else the Decimal
of its text (0.1, 100.000000000000000000000001); a number past the range of a double,
which a float would turn into 0 or an infinity (1e-400, 1e400), is a 422 (the rule is
`api.service.encoding.exact_number`, which every other JSON body meets in
`api.http.body.parse`), and so is an integer past that range (310 digits: found by
`check_depth` as it walks args and context; past 4,300 digits jiter reads no number, and
the models' parser says why). The models read numbers as floats (an `expected_cost` as the
Decimal of a float): when a call they read holds a float, or an expected cost, the same
numbers are taken from the lossless parse of the body instead. A NaN or an Infinity,
which the models' parser takes and JSON does not, is a 400 `malformed-json`: no condition
compares one as a number, so a hook `where args.amount > 100` would let it through.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import jiter

from api.commands import MAX_ID
from api.http import models as m
from api.http.body import duplicate_refusal, not_json_numbers, validate
from api.http.body import unreadable as _unreadable
from api.service.calls import Call
from api.service.encoding import LOSSLESS as _LOSSLESS
from api.service.encoding import check_depth
from api.service.encoding import exact_in_place as _exact_in_place
from api.service.encoding import exact_number as _exact
from api.service.errors import ServiceError

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
    if type(agent) is not str or not 0 < len(agent) <= MAX_ID:
        return None
    if type(tool) is not str or not 0 < len(tool) <= MAX_ID:
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
        if value is not None and (type(value) is not str or not 0 < len(value) <= MAX_ID):
            return None  # (the models say why)
    if context is not None and type(context) is not dict:
        return None
    cost = item.get("expected_cost")
    if cost is not None:
        if type(cost) is not int or not 0 <= cost <= m.MAX_COST:
            return None  # strings, fractions, negatives, past the bound: the model decides
        cost = Decimal(cost)
    return Call(agent, tool, args, thread, turn, context, cost, connection)


def _checked(calls: list[Call]) -> list[Call]:
    """Calls of the fast path, after every call validated, as the models' path does (a
    422 wins over a 400): args and context nested at most MAX_DEPTH deep, their numbers
    exact."""
    for call in calls:
        if check_depth(call.args, "args", _LOSSLESS):
            _exact_in_place(call.args)
        if check_depth(call.context, "context", _LOSSLESS):
            _exact_in_place(call.context)
    return calls


def _models_checked(calls: list[Call], raw: bytes, body: Any, batch: bool) -> list[Call]:
    """Calls the models read, checked as `_checked` does: the numbers they read as
    floats (in args and context, and an expected cost) taken from `body`, the body
    parsed losslessly (None: the strict parse failed where the models read the body,
    which then holds a NaN or an Infinity, and is refused; a ServiceError: it has a key
    twice, refused so)."""
    if body is None:
        raise not_json_numbers()
    if type(body) is ServiceError:  # a key given twice (`_parsed`)
        raise body
    inexact = [
        (check_depth(call.args, "args"), check_depth(call.context, "context"),
         call.expected_cost is not None)
        for call in calls
    ]  # fmt: skip
    if not any(any(flags) for flags in inexact):
        return calls
    items = body.get("calls") if batch and type(body) is dict else [body]
    if type(items) is not list or len(items) != len(calls):
        raise _unreadable()
    read = []
    for call, item, (args, context, cost) in zip(calls, items, inexact, strict=True):
        if type(item) is not dict:
            raise _unreadable()
        if args:
            _merge(call.args, item.get("args"))
        if context:
            _merge(call.context, item.get("context"))
        number = item.get("expected_cost")
        if cost and type(number) is _LOSSLESS:
            exact = _exact(number)  # (a float only when exactly what the text says)
            call = call._replace(expected_cost=exact if type(exact) is Decimal else Decimal(exact))
        read.append(call)
    return read


def _merge(parsed: Any, lossless: Any) -> None:
    """Replace, in place, each float of `parsed` (a JSON object or array parsed with
    floats) by the exact number at the same place in `lossless` (the same JSON, parsed
    losslessly)."""
    if type(lossless) is not type(parsed) or len(lossless) != len(parsed):
        raise _unreadable()
    at = lossless.get if type(lossless) is dict else lossless.__getitem__
    for key, value in parsed.items() if type(parsed) is dict else enumerate(parsed):
        kind = type(value)  # (values replaced, no key added: allowed while iterating)
        if kind is float:
            parsed[key] = _exact(_lossless(at(key)))
        elif kind is dict or kind is list:
            _merge(value, at(key))


def _lossless(value: Any) -> Any:
    if type(value) is not _LOSSLESS:
        raise _unreadable()
    return value


def _parsed(raw: bytes) -> Any:
    """The body parsed losslessly; None when it is not JSON (the models say why, or it
    holds a NaN or an Infinity); the 400 for a key given twice, not raised here: raised
    once the models have read the body, so their 422 comes first, as for a NaN."""
    try:
        # (`api.http.body.strict_json`'s parse, inline.) Keys only: values are mostly
        # distinct, and caching them cost a sixth of the parse.
        return jiter.from_json(
            raw, allow_inf_nan=False, cache_mode="keys", float_mode="lossless-float",
            catch_duplicate_keys=True,
        )  # fmt: skip
    except ValueError as exc:
        return duplicate_refusal(raw, exc)


def one_call(raw: bytes) -> Call:
    """The Call of a `POST /v1/decisions` body (raises ServiceError 400/413/422)."""
    body = _parsed(raw)
    call = _fast_call(body)
    if call is None:
        return _models_checked([_call(validate(m.DecisionRequest, raw))], raw, body, False)[0]
    return _checked([call])[0]


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
                return _checked(calls)
    models = [_call(item) for item in validate(m.BatchRequest, raw).calls]
    return _models_checked(models, raw, body, True)
