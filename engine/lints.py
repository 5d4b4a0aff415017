"""Lints: warnings about a workspace that checks but likely does not say what its author
means (docs/errors.md, "Lints"). `charter check` runs them after the checker; the service
does not (a warning never stops a policy, and the solver's questions cost time an upload
should not wait on).

Each lint is a stage over the checked workspace, as the checker's are:

* `unused_roles`: W0303, a role no profile selects;
* `code_without_execute`: W0305, a rule granting a tool that runs code to a profile
  without the `execute` grant, which the engine then denies every call of;
* `dropped_default_hooks`: W0306, a written `hooks` list without `default` (nor `none`)
  on a profile whose roles allow a tool a default approval hook pauses;
* `idle_hooks`: W0304, a hook no profile installs, or whose profiles allow none of its
  tools;
* `solver`: W0301 and W0302, a rule's `where` that never holds or always holds; W0304, a
  hook whose condition never holds; W0307, a deny hook that fires on every call sent
  without context. Asked of z3 through the fit check's encoding (engine/fit/encode.py),
  which over-approximates what real calls can do: `unsat` there is `unsat` for every
  real call, so each of these claims is a proof. A question z3 cannot answer within its
  time, or a condition outside the fit fragment, gives no warning.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from engine.builtins import default_hook_names
from engine.workspace import Workspace
from grammar.fmt import expr_text
from policy import ast
from policy.catalogue import ToolSpec
from policy.diagnostics import Diagnostic

EXECUTE = "execute"
_BUILTIN_FILES = ("<builtin>", "<default hooks>")
_SHOWN_TOOLS = 3  # tools a message names before "and N more"


@dataclass(frozen=True, slots=True)
class LintOptions:
    """Limits are options. `solver`: ask z3 at all; `check_ms`: one question's time;
    `total_ms`: every question of a workspace (past it the rest are not asked);
    `max_tools`: a rule or hook on more tools than this is not asked about."""

    solver: bool = True
    check_ms: int = 300
    total_ms: int = 5_000
    max_tools: int = 16


DEFAULT_LINT = LintOptions()


def lint(ws: Workspace, options: LintOptions = DEFAULT_LINT) -> list[Diagnostic]:
    """Every lint's warnings, in file order."""
    found: list[Diagnostic] = []
    for stage in (unused_roles, code_without_execute, dropped_default_hooks, idle_hooks):
        found.extend(stage(ws))
    if options.solver:
        found.extend(SolverLints(ws, options).run())
    return sorted(found, key=Diagnostic.sort_key)


def _warning(code: str, message: str, span: ast.Span, help: str) -> Diagnostic:
    return Diagnostic(code, message, span, help, severity="warning")


def _authored(node: ast.Role | ast.Hook | ast.Profile) -> bool:
    return node.span.file not in _BUILTIN_FILES


def _names(tools: Iterable[str]) -> str:
    listed = sorted(tools)
    shown = ", ".join(f"`{t}`" for t in listed[:_SHOWN_TOOLS])
    more = len(listed) - _SHOWN_TOOLS
    return shown + (f" and {more} more" if more > 0 else "")


def _profile_rules(ws: Workspace, profile: ast.Profile) -> Iterator[tuple[str, ast.Rule]]:
    for role_name in dict.fromkeys(profile.roles):
        role = ws.roles.get(role_name)
        if role is not None:
            for rule in role.rules:
                yield role_name, rule


def _allowed_tools(ws: Workspace, profile: ast.Profile) -> set[str]:
    """Every tool some allow rule of the profile's roles matches (conditions aside)."""
    out: set[str] = set()
    for _, rule in _profile_rules(ws, profile):
        if rule.effect == "allow":
            out.update(t.name for t in ws.matching_tools(rule.patterns))
    return out


def _name_span(ws: Workspace, node: ast.Role | ast.Hook, keyword: str) -> ast.Span:
    """The span of the declaration's name (the AST keeps the declaration's whole): found
    in its line, else the declaration's span."""
    span = node.span
    file = next((f for f in ws.files if f.path == span.file), None)
    if file is None or span.line < 1:
        return span
    line = file.text.split("\n", span.line)[span.line - 1]
    at = line.find(node.name, span.col - 1 + len(keyword))
    if at < 0:
        return span
    return ast.Span(span.file, span.line, at + 1, span.line, at + 1 + len(node.name))


def _item_span(profile: ast.Profile, item: str) -> ast.Span:
    return next((span for kind, span in profile.item_spans if kind == item), profile.span)


# ---- W0303 ------------------------------------------------------------------------------
def unused_roles(ws: Workspace) -> Iterator[Diagnostic]:
    selected = {name for profile in ws.profiles.values() for name in profile.roles}
    for role in ws.roles.values():
        if role.name not in selected and _authored(role):
            yield _warning(
                "W0303",
                f"role `{role.name}` is selected by no profile",
                _name_span(ws, role, "role"),
                "list it in a profile's `roles` line, or remove it",
            )


# ---- W0305 ------------------------------------------------------------------------------
def has_execute(ws: Workspace, profile: ast.Profile) -> bool:
    """The `execute` grant as the engine reads it (engine/compile.py): an unconditional
    allow matching `execute` and no deny matching it, whatever its condition."""
    execute = ws.tools.get(EXECUTE)
    if execute is None:
        return False
    allowed = denied = False
    for _, rule in _profile_rules(ws, profile):
        if not any(t.name == EXECUTE for t in ws.matching_tools(rule.patterns)):
            continue
        if rule.effect == "deny":
            denied = True
        elif rule.where is None:
            allowed = True
    return allowed and not denied


def code_without_execute(ws: Workspace) -> Iterator[Diagnostic]:
    for profile in ws.profiles.values():
        if has_execute(ws, profile):
            continue
        for role_name, rule in _profile_rules(ws, profile):
            if rule.effect != "allow":
                continue
            code = [t.name for t in ws.matching_tools(rule.patterns) if t.runs_code]
            # (`*` reaches every tool: only a rule naming them says the author meant them)
            if code and all(p.kind != "all" for p in rule.patterns):
                yield _warning(
                    "W0305",
                    f"{_names(code)} run{'s' if len(code) == 1 else ''} code, and profile "
                    f"`{profile.name}` has no `execute` grant: role `{role_name}` allows "
                    "no call of it there",
                    rule.span,
                    "add a role with an unconditional `allow execute` to the profile, or "
                    "remove the grant",
                )


# ---- W0306 ------------------------------------------------------------------------------
def dropped_default_hooks(ws: Workspace) -> Iterator[Diagnostic]:
    defaults = [ws.hooks[n] for n in default_hook_names() if n in ws.hooks]
    for profile in ws.profiles.values():
        listed = set(profile.hooks)
        if not profile.hooks_written or listed & {"default", "none"}:
            continue
        allowed = _allowed_tools(ws, profile)
        paused = {t.name for hook in defaults for t in ws.matching_tools(hook.patterns)} & allowed
        if paused:
            yield _warning(
                "W0306",
                f"the hooks of profile `{profile.name}` leave out the default approval "
                f"hooks, and its roles allow {_names(paused)}, which they pause",
                _item_span(profile, "hooks"),
                "add `default` to the list (`hooks default, ...`), or write `hooks none` "
                "if no call of the profile should pause",
            )


# ---- W0304 (without the solver) -----------------------------------------------------------
def idle_hooks(ws: Workspace) -> Iterator[Diagnostic]:
    cache: dict[str, set[str]] = {}

    def allowed(profile: ast.Profile) -> set[str]:
        found = cache.get(profile.name)
        if found is None:
            found = cache[profile.name] = _allowed_tools(ws, profile)
        return found

    installed: dict[str, list[ast.Profile]] = {}
    for profile in ws.profiles.values():
        for hook in ws.profile_hooks(profile):
            installed.setdefault(hook.name, []).append(profile)
    for hook in ws.hooks.values():
        if not _authored(hook):
            continue
        profiles = installed.get(hook.name)
        if not profiles:
            yield _warning(
                "W0304",
                f"hook `{hook.name}` is installed by no profile: it never fires",
                _name_span(ws, hook, "hook"),
                "name it in a profile's `hooks` line, or remove it",
            )
            continue
        tools = {t.name for t in ws.matching_tools(hook.patterns)}
        if not any(tools & allowed(p) for p in profiles):
            shown = ", ".join(f"`{p.name}`" for p in profiles)
            yield _warning(
                "W0304",
                f"hook `{hook.name}` never fires: no profile that installs it ({shown}) "
                "allows a tool it is on",
                _name_span(ws, hook, "hook"),
                "a hook acts only on calls the roles allow: grant the tool, or remove the hook",
            )


# ---- the solver's lints -----------------------------------------------------------------
Answer = Literal["never", "always", "sometimes", "unknown"]


class SolverLints:
    """W0301, W0302, W0304 and W0307, each a question to z3 per tool (see the module's
    docstring); answers are kept per (tool, condition text, question), so a condition
    written in many roles is asked about once."""

    def __init__(self, ws: Workspace, options: LintOptions) -> None:
        self.ws = ws
        self.options = options
        self.end = time.monotonic() + options.total_ms / 1000
        self._answers: dict[tuple[str, str, str], Answer] = {}

    def run(self) -> list[Diagnostic]:
        found: list[Diagnostic] = []
        for role in self.ws.roles.values():
            if _authored(role):
                for rule in role.rules:
                    found.extend(self._rule(role, rule))
        for hook in self.ws.hooks.values():
            if _authored(hook) and hook.where is not None:
                found.extend(self._hook(hook))
        return found

    def _tools(self, patterns: tuple[ast.Pattern, ...]) -> list[ToolSpec]:
        tools = self.ws.matching_tools(patterns)
        return tools if 0 < len(tools) <= self.options.max_tools else []

    def _rule(self, role: ast.Role, rule: ast.Rule) -> Iterator[Diagnostic]:
        if rule.where is None:
            return
        tools = self._tools(rule.patterns)
        question = "allow" if rule.effect == "allow" else "applies"
        answer = self._over(tools, rule.where, question)
        what = f"the condition of this {rule.effect} rule of role `{role.name}`"
        if answer == "never":
            yield _warning(
                "W0301",
                f"{what} never holds: the rule applies to no call",
                rule.where.span,
                "a contradiction (`x < 1 and x > 2`) or an optional argument compared "
                "without `has(...)`; fix the condition or remove the rule",
            )
        elif answer == "always":
            yield _warning(
                "W0302",
                f"{what} always holds: the rule applies to every call of its tools",
                rule.where.span,
                "remove the `where` if that is meant; else the condition is weaker than "
                "it reads (`x > 1 or x <= 1`)",
            )

    def _hook(self, hook: ast.Hook) -> Iterator[Diagnostic]:
        assert hook.where is not None
        tools = self._tools(hook.patterns)
        if self._over(tools, hook.where, "fires") == "never":
            yield _warning(
                "W0304",
                f"the condition of hook `{hook.name}` never holds: it never fires",
                hook.where.span,
                "fix the condition, or remove the hook",
            )
        elif (
            hook.kind == "deny"
            and _reads_context(hook.where)
            and self._over(tools, hook.where, "fires-without-context") == "always"
        ):
            yield _warning(
                "W0307",
                f"deny hook `{hook.name}` fires on every call sent without context",
                hook.where.span,
                "a missing context key is an error, and an erroring deny hook applies: "
                "guard the read with `has(context.<key>) and ...`",
            )

    def _over(self, tools: list[ToolSpec], where: ast.Expr, question: str) -> Answer:
        """ "never" / "always" when that holds for every tool, else "sometimes" or
        "unknown" (for some tool, z3 could not tell)."""
        if not tools:
            return "unknown"
        answers = {self._ask(tool, where, question) for tool in tools}
        if len(answers) == 1:
            return answers.pop()
        return "unknown" if "unknown" in answers else "sometimes"

    def _ask(self, tool: ToolSpec, where: ast.Expr, question: str) -> Answer:
        key = (tool.name, expr_text(where), question)
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answers[key] = self._solve(tool, where, question)
        return answer

    def _solve(self, tool: ToolSpec, where: ast.Expr, question: str) -> Answer:
        remaining_ms = int((self.end - time.monotonic()) * 1000)
        if remaining_ms <= 0:
            return "unknown"
        return solve(tool, where, question, min(self.options.check_ms, remaining_ms))


def _reads_context(where: ast.Expr) -> bool:
    return any(isinstance(n, ast.Path) and n.root == "context" for n in ast.walk_expr(where))


def solve(tool: ToolSpec, where: ast.Expr, question: str, timeout_ms: int) -> Answer:
    """Whether `where`, for calls of `tool`, makes the question's event happen never,
    always or sometimes: "allow", an allow rule applies (true, no error); "applies", a
    deny rule applies (true, or an error: fail closed); "fires", a hook fires (the
    same); "fires-without-context", the same for calls whose context holds no key."""
    import z3

    from engine.fit.check import Deadline, bounded_check
    from engine.fit.encode import Encoder
    from engine.fit.terms import Z3_LOCK, Unsupported, negate

    with Z3_LOCK:
        enc = Encoder(tool).prepare([where])
        try:
            value, err = enc.condition(where)
        except Unsupported:
            return "unknown"
        event: Any = z3.And(value, negate(err)) if question == "allow" else z3.Or(value, err)
        given: list[Any] = []
        if question == "fires-without-context":
            given = [z3.Not(var.present) for key, var in enc.paths.items() if key[0] == "context"]
        axioms = [*enc.axioms(), *given]
        deadline = Deadline.after(timeout_ms)
        outcomes = []
        for goal in (event, negate(event)):
            solver = z3.Solver()
            solver.add(*axioms, goal)
            outcomes.append(bounded_check(solver, deadline))
    can, can_not = outcomes
    if can == z3.unsat and can_not == z3.sat:
        return "never"
    if can_not == z3.unsat and can == z3.sat:
        return "always"
    if can == z3.sat and can_not == z3.sat:
        return "sometimes"
    return "unknown"  # (unknown, or both unsat: no call at all, which a tool always has)
