"""Generators of requests against a generated workspace: valid calls, broken calls, junk.

Valid calls type every argument per the tool's signature and sometimes leave optional
ones out; broken calls drop a required argument, add an unknown one, give a value of
the wrong kind (bools for ints, tuples for lists, NaN for decimals) or are not an object
at all. Context, agent and thread values are drawn from every kind, wrong ones included,
so conditions over them both hold, fail and error.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

from engine.decision import Request
from engine.types import from_ref, item_of
from policy.catalogue import ToolSpec
from tests.property.strategies import (
    BUILTIN_TARGETS,
    CONTEXT_KEYS,
    GenWorkspace,
    decimals,
    one_in,
    small_ints,
    strings,
)

ODD_NUMBERS = (Decimal("NaN"), float("nan"), float("inf"), Decimal("-Infinity"), 10**30)

scalars: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    small_ints,
    decimals,
    st.floats(-1e6, 1e6),
    strings,
    st.sampled_from(ODD_NUMBERS),
)
any_values: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(("team", "x", "a")), inner, max_size=3),
    ),
    max_leaves=6,
)


def values_of(ty: str) -> st.SearchStrategy[Any]:
    """Values that fit an argument of type `ty` (as `engine.types` spells types)."""
    if ty == "str":
        return strings
    if ty == "int":
        return st.one_of(small_ints, st.integers())
    if ty == "decimal":
        return st.one_of(small_ints, decimals, st.floats(-1e6, 1e6))
    if ty == "bool":
        return st.booleans()
    if ty == "map":
        return st.dictionaries(st.sampled_from(("team", "x")), any_values, max_size=2)
    return st.lists(values_of(item_of(ty)), max_size=3)


def wrong_values(ty: str) -> st.SearchStrategy[Any]:
    """Values of the wrong kind for `ty`, chosen where the distinction is subtle."""
    subtle = {
        "int": st.one_of(st.booleans(), st.floats(-10, 10), decimals),
        "decimal": st.one_of(st.booleans(), strings, st.sampled_from(ODD_NUMBERS[:4])),
        "bool": st.one_of(st.integers(0, 1), strings),
        "str": st.one_of(small_ints, st.none(), st.lists(strings, max_size=1)),
        "map": st.one_of(st.lists(strings, max_size=1), st.just({1: "x"})),
    }
    if ty.startswith("list:"):
        return st.one_of(
            st.lists(values_of(item_of(ty)), min_size=1, max_size=2).map(tuple),
            st.lists(wrong_values(item_of(ty)), min_size=1, max_size=2),
            strings,
        )
    return subtle[ty]


@st.composite
def valid_args(draw: st.DrawFn, tool: ToolSpec) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for param in tool.params:
        if param.required or draw(st.booleans()):
            args[param.name] = draw(values_of(from_ref(param.type)))
    return args


@st.composite
def broken_args(draw: st.DrawFn, tool: ToolSpec | None) -> Any:
    """Arguments that do not match the signature (or no signature at all)."""
    if tool is None or one_in(draw, 6):
        return draw(st.one_of(any_values, st.lists(strings, max_size=2).map(tuple)))
    args = draw(valid_args(tool))
    required = [p.name for p in tool.params if p.required]
    choices = ["unknown"] + (["missing"] if required else []) + (["wrong"] if tool.params else [])
    how = draw(st.sampled_from(choices))
    if how == "missing":
        del args[draw(st.sampled_from(required))]
    elif how == "wrong":
        param = draw(st.sampled_from(tool.params))
        args[param.name] = draw(wrong_values(from_ref(param.type)))
    else:
        args[draw(st.sampled_from(("bogus", "To", "")))] = draw(any_values)
    return args


# Mostly well-formed roots (so conditions over them hold or fail rather than error),
# sometimes missing, and sometimes of any kind at all.
typical_context = st.fixed_dictionaries(
    {
        "team": strings,
        "level": st.one_of(small_ints, decimals),
        "flag": st.booleans(),
        "tags": st.lists(st.one_of(strings, small_ints), max_size=3),
    },
    optional={"ip": strings, "other": any_values},
)
contexts = st.one_of(
    typical_context,
    typical_context,
    st.none(),
    st.dictionaries(st.sampled_from((*CONTEXT_KEYS, "other")), any_values, max_size=4),
)
typical_agent = st.fixed_dictionaries(
    {
        "id": strings,
        "name": strings,
        "identity": strings,
        "metadata": st.fixed_dictionaries({}, optional={"team": strings, "x": any_values}),
    }
)
agents = st.one_of(
    typical_agent,
    typical_agent,
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "id": any_values,
            "name": strings,
            "metadata": st.one_of(
                st.dictionaries(st.sampled_from(("team", "x")), any_values, max_size=2),
                any_values,
            ),
        },
    ),
)
typical_thread = st.fixed_dictionaries(
    {"id": strings, "cost": st.one_of(decimals, small_ints), "depth": small_ints}
)
threads = st.one_of(
    typical_thread,
    typical_thread,
    st.none(),
    st.fixed_dictionaries({}, optional={"cost": any_values, "depth": any_values}),
)


def tool_names(gw: GenWorkspace) -> st.SearchStrategy[str]:
    authored = sorted(n for n, t in gw.specs.items() if not t.builtin)
    # Weighted towards the tools the rules talk about; now and then any tool at all.
    return st.integers(0, 9).flatmap(
        lambda n: (
            st.sampled_from(authored)
            if n < 6
            else st.sampled_from(BUILTIN_TARGETS)
            if n < 9
            else st.sampled_from((*sorted(gw.specs), "nope.nothing", "gmail", ""))
        )
    )


@st.composite
def calls(
    draw: st.DrawFn, gw: GenWorkspace, tool: str, profile: str, valid: bool | None = None
) -> Request:
    """A call of `tool` under `profile`; valid args unless `valid` is False (None: either)."""
    spec = gw.specs.get(tool)
    if valid is None:
        valid = spec is not None and not one_in(draw, 10)
    args = draw(valid_args(spec)) if valid and spec is not None else draw(broken_args(spec))
    return Request(profile, tool, args, draw(contexts), draw(agents), draw(threads))


@st.composite
def requests(draw: st.DrawFn, gw: GenWorkspace, valid: bool | None = None) -> Request:
    """Any request against the workspace, now and then for an unknown profile."""
    names = [p.name for p in gw.profiles]
    profile = "ghost" if one_in(draw, 20) else draw(st.sampled_from(names))
    return draw(calls(gw, draw(tool_names(gw)), profile, valid))
