"""A test's calls, checked against the signature of the tool they call.

A call that does not fit its tool's signature (an unknown argument, a missing required
one, a value of the wrong type) is denied for its shape before any rule is looked at, so
an `expect deny` of it would pass whatever the roles say. Each `expect` is checked here as
the engine's shape check (`engine.shape`) checks a call at run time, so the two agree on
every call a test can write (its values are literals): an `expect allow`, `deny` or
`pause` whose call does not fit is an error (E0121, E0122, E0211), and so is an
`expect invalid`, which expects that shape denial, whose call fits (E0123). The keys of a
`rewritten` map are arguments of the tool too, with values of their types.
"""

from __future__ import annotations

from collections.abc import Callable

from engine import types as T
from engine import valuefit
from policy import ast
from policy.catalogue import ToolSpec
from policy.diagnostics import Diagnostic, did_you_mean

Report = Callable[[Diagnostic], None]

_OR_INVALID = "or write `expect invalid` to test that the call is refused for its shape"


def misfit(declared: str, value: ast.Expr) -> tuple[ast.Expr, str] | None:
    """The innermost part of `value` that does not fit type `declared` (a list's item,
    an item's item), with the type wanted there; None when all of it fits. As at run
    time: an `int` fits a `decimal`, nothing else fits another type, `null` none."""
    if declared.startswith("list:"):
        if not isinstance(value, ast.ListLit):
            return value, declared
        item = T.item_of(declared)
        for each in value.items:
            found = misfit(item, each)
            if found is not None:
                return found
        return None
    if declared == "map":
        return None if isinstance(value, ast.MapLit) else (value, declared)
    if isinstance(value, ast.Lit) and (
        value.kind == declared or (declared == "decimal" and value.kind == "int")
    ):
        return None
    return value, declared


def _article(ty: str) -> str:
    """A type as an author writes it, with its article: a `str`, an `int`, a `list[int]`."""
    shown = T.show(ty)
    return f"{'an' if shown[0] in 'aeiou' else 'a'} `{shown}`"


def _given(value: ast.Expr) -> str:
    """What a value is: a `str`, a `list[int]`, a `list` (empty), `null`."""
    if isinstance(value, ast.Lit) and value.kind == "null":
        return "`null`"
    ty = T.literal_type(value)
    return "a list of mixed types" if ty is None else _article(ty.replace("list:any", "list"))


def _entries(values: ast.MapLit) -> list[tuple[str, ast.Expr, ast.Span]]:
    """Each entry with its key's span (the map's own where a tree built by hand has none)."""
    return [
        (key, value, ast.name_span(values.key_spans, index, values.span))
        for index, (key, value) in enumerate(values.entries)
    ]


def _check_values(tool: ToolSpec, values: ast.MapLit, what: str, report: Report) -> set[str]:
    """E0121 for each key that names no argument of `tool`, E0211 for each value that
    does not fit its argument's type. Returns the argument names the help lines of the
    unknown keys suggest (a misspelt name is reported once, not missing as well)."""
    suggested: set[str] = set()
    names = [p.name for p in tool.params]
    for key, value, where in _entries(values):
        param = tool.param(key)
        if param is None:
            near = did_you_mean(key, names)  # "did you mean `NAME`?"
            if near is not None:
                suggested.add(near.split("`")[1])
            shown = ", ".join(f"`{n}`" for n in names) or "none"
            report(
                Diagnostic(
                    "E0121",
                    f"tool `{tool.name}` has no argument `{key}`",
                    where,
                    near or f"its arguments: {shown}",
                )
            )
            continue
        ty = param.type
        found = misfit(T.from_ref(ty), value) if ty.plain else valuefit.misfit(ty, value)
        if found is None:
            continue
        part, wanted = found
        whole = part is value
        subject = f"argument `{key}`" if whole else f"an item of argument `{key}`"
        report(
            Diagnostic(
                "E0211",
                f"{subject} of `{tool.name}` must be {_article(wanted)}, "
                f"and {what} gives {_given(part)}",
                part.span if part.span.line else where,
                f"write {_article(wanted)}" + (f", {_OR_INVALID}" if what == "the call" else ""),
            )
        )
    return suggested


def call_problems(tool: ToolSpec, expect: ast.Expect) -> list[Diagnostic]:
    """Why the call of `expect` does not fit the signature of `tool` (empty: it fits)."""
    found: list[Diagnostic] = []
    suggested = _check_values(tool, expect.args, "the call", found.append)
    given = {key for key, _ in expect.args.entries}
    for param in tool.params:
        if param.required and param.name not in given and param.name not in suggested:
            found.append(
                Diagnostic(
                    "E0122",
                    f"call of `{tool.name}` misses required argument `{param.name}`",
                    expect.args.span if expect.args.span.line else expect.span,
                    f"add `{param.name}: ...` ({_article(T.from_ref(param.type))}), " + _OR_INVALID,
                )
            )
    return found


def check_expect(tool: ToolSpec, expect: ast.Expect, report: Report) -> None:
    """Report what keeps `expect` from meaning what it says (module docstring)."""
    if expect.effect != "invalid":
        for problem in call_problems(tool, expect):
            report(problem)
        if expect.rewritten is not None:
            _check_values(tool, expect.rewritten, "`rewritten`", report)
        return
    if expect.rewritten is not None:
        report(
            Diagnostic(
                "E0123",
                "`expect invalid` with `rewritten` can never pass",
                expect.rewritten.span if expect.rewritten.span.line else expect.span,
                "a call refused for its shape runs with no arguments: drop `rewritten`",
            )
        )
    if not call_problems(tool, expect):
        report(
            Diagnostic(
                "E0123",
                f"`expect invalid` can never pass: this call fits the signature of `{tool.name}`",
                expect.effect_span if expect.effect_span.line else expect.span,
                "a call that fits is decided by the rules, never refused for its shape: "
                "expect `allow`, `deny` or `pause`",
            )
        )


# What a test's `agent` and `thread` maps may hold: the keys conditions read of the
# request's agent and thread (the service builds them so), and a thread's `max_cost`.
AGENT_KEYS: dict[str, str] = {"id": "str", "name": "str", "identity": "str", "metadata": "map"}
THREAD_KEYS: dict[str, str] = {
    "id": "str",
    "depth": "int",
    "cost": "decimal",
    "max_cost": "decimal",
}


def check_test_settings(test: ast.Test, report: Report) -> None:
    """E0124 for a key an `agent` or `thread` map may not hold, E0212 for a value of the
    wrong type there (a thread's `depth`, `cost` and `max_cost` are 0 or more)."""
    for kind, allowed in (("agent", AGENT_KEYS), ("thread", THREAD_KEYS)):
        values: ast.MapLit | None = getattr(test, kind)
        if values is None:
            continue
        for key, value, where in _entries(values):
            declared = allowed.get(key)
            shown = ", ".join(f"`{k}`" for k in allowed)
            if declared is None:
                near = did_you_mean(key, list(allowed))
                report(
                    Diagnostic(
                        "E0124",
                        f"a test's `{kind}` has no `{key}`",
                        where,
                        near or f"a test's `{kind}` holds {shown}",
                    )
                )
                continue
            found = misfit(declared, value)
            negative = (
                found is None
                and isinstance(value, ast.Lit)
                and declared in ("int", "decimal")
                and value.value is not None
                and not isinstance(value.value, (str, bool))
                and value.value < 0
            )
            if found is not None or negative:
                wanted = _article(declared) + (" of 0 or more" if negative else "")
                report(
                    Diagnostic(
                        "E0212",
                        f"`{key}` of a test's `{kind}` must be {wanted}, "
                        f"and the test gives {_given(value)}",
                        value.span if value.span.line else where,
                        f"write {wanted}",
                    )
                )
