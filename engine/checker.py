"""The checker's stages over parsed files (`engine.check` parses and calls it).

`collect` registers every declaration under its name, `resolve` matches tool patterns
and names (and a test's calls against their tools' signatures, `engine.expects`),
`type_conditions` types every condition and rewrite. Each stage reports into `errors`
and `warnings` and goes on: all diagnostics are collected, not just the first.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from engine import types as T
from engine import valuefit
from engine.builtins import builtin_tools, default_hook_names, default_hooks
from engine.expects import check_expect, check_test_settings
from engine.workspace import Workspace, index_namespaces, match_tools
from grammar.parser import DEFAULT_OPTIONS, ParseOptions
from policy import ast
from policy.catalogue import BUILTIN_NAMESPACES, ToolSpec
from policy.diagnostics import Diagnostic, did_you_mean


@dataclass(frozen=True, slots=True)
class CheckOptions:
    parse: ParseOptions = DEFAULT_OPTIONS
    max_rules_per_role: int = 1_000
    max_files: int = 10_000


DEFAULT_CHECK = CheckOptions()


# Names a profile body could not refer to: after `roles` the words `roles`, `hooks`,
# `budget` and `rate` start the next line, and `default` and `none` are the hooks list's
# keywords.
_RESERVED_NAMES: dict[str, tuple[str, ...]] = {
    "role": ("roles", "hooks", "budget", "rate"),
    "hook": ("default", "none"),
}


def _reserved_help(kind: str, name: str) -> str:
    if kind == "hook":
        meaning = "the default approval hooks" if name == "default" else "no hooks at all"
        return f"in a profile, `hooks {name}` means {meaning}, not this hook; pick another name"
    return f"in a profile, `roles {name}` reads `{name}` as a keyword, not this role; pick another name"


_URL = re.compile(r"https?://[^\s/$.?#][^\s]*\Z")
# A declaration's keyword, then white space and comments (as the grammar ignores them),
# then its name: where a caret goes for a name too long (E0120).
_NAME_AFTER = r"(?:[ \t\f\r\n]|#[^\n]*)*([a-z][a-z0-9_-]*)"
SHOWN = 32  # characters of a name too long that its message shows (as the HTTP API's)


# Each declaration's kind, as its diagnostics and the collector's keys name it.
_KINDS: dict[type, str] = {
    ast.Toolset: "toolset", ast.Role: "role", ast.Hook: "hook", ast.Profile: "profile",
    ast.Test: "test",
}  # fmt: skip


def _shown(name: str) -> str:
    return name if len(name) <= SHOWN else name[:SHOWN] + "…"


class Checker:
    """`settled`: the paths of files whose roles and hooks checked without an error
    against this same tool catalogue, `catalogue` (engine/rebuild.py): their bodies are
    not checked again, and the workspace's tools are that very mapping. Every toolset is
    in a settled file then, so toolsets are registered, not checked again either, and
    `namespaces` is the catalogue's index by namespace."""

    def __init__(
        self,
        files: list[ast.SourceFile],
        options: CheckOptions,
        settled: frozenset[str] = frozenset(),
        catalogue: Mapping[str, ToolSpec] | None = None,
        namespaces: dict[str, list[str]] | None = None,
    ) -> None:
        self.files = files
        self.options = options
        self.settled = settled
        self.catalogue = catalogue
        self.namespaces = namespaces
        self.errors: list[Diagnostic] = []
        self.warnings: list[Diagnostic] = []
        self.tools: dict[str, ToolSpec] = dict(builtin_tools())
        self.toolsets: dict[str, ast.Toolset] = {}
        self.roles: dict[str, ast.Role] = {}
        self.hooks: dict[str, ast.Hook] = {h.name: h for h in default_hooks()}
        self.profiles: dict[str, ast.Profile] = {}
        self.tests: list[ast.Test] = []
        # Declarations whose name was taken already: checked, never registered. Recorded
        # where `collect` decides so, rather than derived later as "not the one registered
        # under its name": that needs identity, not `in` (nodes compare equal without
        # their spans, so a copy of a declaration would pass for it), and a second walk
        # of every declaration for a list that is empty in a workspace that checks.
        self.duplicates: list[ast.Declaration] = []
        self.by_namespace: dict[str, list[str]] = {}
        # What `resolve` found once and `type_conditions` types against: each rule
        # condition with the tools its rule matches, and each hook with its tools.
        self.rule_conditions: list[tuple[ast.Expr, list[ToolSpec]]] = []
        self.hook_tools: list[tuple[ast.Hook, list[ToolSpec]]] = []
        self.texts: dict[str, str] = {f.path: f.text for f in files}
        self.line_starts: dict[str, list[int]] = {}  # per file, computed on first need

    def name_span(self, span: ast.Span, keyword: str) -> ast.Span:
        """The span of the name after `keyword` at the start of `span` (a declaration's,
        which the AST keeps whole): found in the text, as only an error needs it."""
        text = self.texts.get(span.file)
        if text is None or span.line < 1:
            return span
        starts = self.line_starts.get(span.file)
        if starts is None:
            starts = self.line_starts[span.file] = [0, *(m.end() for m in re.finditer("\n", text))]
        if span.line > len(starts):
            return span
        found = re.compile(re.escape(keyword) + _NAME_AFTER).match(
            text, starts[span.line - 1] + span.col - 1
        )
        if found is None:
            return span
        at, end = found.span(1)
        line = bisect_right(starts, at)
        col = at - starts[line - 1] + 1
        return ast.Span(span.file, line, col, line, col + end - at)

    def check_name_length(self, kind: str, name: str, span: ast.Span, full: str = "") -> None:
        """E0120: a name the HTTP API could not name (its ids are at most `max_name_chars`
        characters); `full`: a tool's `toolset.tool`, when `name` is the tool's own."""
        limit = self.options.parse.max_name_chars
        if len(full or name) <= limit:
            return
        said = f"at most {limit} characters"
        if full:
            what = f"full name of tool `{_shown(full)}` is {len(full)}"
            hint = f"the HTTP API names a tool by its full name, `toolset.tool`, of {said}: "
            hint += "shorten the tool's or the toolset's name"
        else:
            what = f"{kind} name `{_shown(name)}` is {len(name)}"
            hint = f"the HTTP API names a {kind} by {said}"
            if kind == "toolset":
                hint += " (and each of its tools by `toolset.tool`, within the same limit)"
            hint += ": shorten the name"
        self.report(
            Diagnostic(
                "E0120",
                f"{what} characters long, over the limit of {limit}",
                self.name_span(span, "tool" if full else kind),
                hint,
            )
        )

    def report(self, diag: Diagnostic) -> None:
        (self.errors if diag.severity == "error" else self.warnings).append(diag)

    def run(self) -> Workspace:
        self.collect()
        if self.catalogue is not None:  # (what collect found is the same, tool for tool)
            self.tools = cast(dict[str, ToolSpec], self.catalogue)
        if self.catalogue is not None and self.namespaces is not None:
            self.by_namespace = self.namespaces
        else:
            self.by_namespace = index_namespaces(self.tools)
        self.resolve()
        self.type_conditions()
        return Workspace(
            self.tools,
            self.toolsets,
            self.roles,
            self.hooks,
            self.profiles,
            tuple(self.tests),
            tuple(self.files),
            tuple(self.warnings),
            self.options,
            self.by_namespace,
        )

    # ---- stage: collect ----------------------------------------------------------------
    def collect(self) -> None:
        """Register each declaration under its name. A name declared twice is E0107, and
        the later declaration is not registered (it takes no part in what compiles), but
        its body is still checked, in `duplicates`, so that its errors are reported too."""
        seen: dict[tuple[str, str], ast.Span] = {}
        for file in self.files:
            if file.path in self.settled:
                self.collect_settled(file, seen)
                continue
            for decl in file.declarations:
                self.collect_one(decl, seen)

    def collect_settled(self, file: ast.SourceFile, seen: dict[tuple[str, str], ast.Span]) -> None:
        """A settled file's declarations: what `collect_one` finds of one declaration alone
        (a name reserved or too long, too many rules, a toolset's body) it found in the
        base, without an error. They are registered, and a name another file took first
        goes through `collect_one`, which reports it as the whole check does."""
        defaults = default_hook_names()
        for decl in file.declarations:
            kind = _KINDS[type(decl)]
            key = (kind, decl.name)
            if key in seen or (kind == "hook" and decl.name in defaults):
                self.collect_one(decl, seen)
                continue
            seen[key] = decl.span
            self.register(decl)

    def register(self, decl: ast.Declaration) -> None:
        """`decl` under its name, the first of its kind so named (a test: in order)."""
        if isinstance(decl, ast.Role):
            self.roles[decl.name] = decl
        elif isinstance(decl, ast.Hook):
            self.hooks[decl.name] = decl
        elif isinstance(decl, ast.Profile):
            self.profiles[decl.name] = decl
        elif isinstance(decl, ast.Toolset):
            self.toolsets[decl.name] = decl
        else:
            self.tests.append(decl)

    def collect_one(self, decl: ast.Declaration, seen: dict[tuple[str, str], ast.Span]) -> None:
        kind = _KINDS[type(decl)]
        key = (kind, decl.name)
        duplicate = key in seen or (kind == "hook" and decl.name in default_hook_names())
        if duplicate:
            first = seen.get(key)
            where = f"first declared at {first}" if first else "it is a default approval hook"
            self.report(
                Diagnostic(
                    "E0107",
                    f"{kind} `{decl.name}` is declared more than once",
                    decl.span,
                    f"{where}; rename one of them",
                )
            )
        else:
            seen[key] = decl.span
            if decl.name in _RESERVED_NAMES.get(kind, ()):
                self.report(
                    Diagnostic(
                        "E0117",
                        f"{kind} name `{decl.name}` is reserved",
                        decl.span,
                        _reserved_help(kind, decl.name),
                    )
                )
        if not isinstance(decl, ast.Test):  # (a test's name is no id: the API has none)
            self.check_name_length(kind, decl.name, decl.span)
        if isinstance(decl, ast.Toolset):
            if self.catalogue is not None:  # (settled, as every toolset then is)
                if not duplicate:
                    self.register(decl)
                return
            self.collect_toolset(decl, register=not duplicate)
            return
        if isinstance(decl, ast.Role) and len(decl.rules) > self.options.max_rules_per_role:
            self.report(
                Diagnostic(
                    "E0112",
                    f"role `{decl.name}` has {len(decl.rules)} rules, over the limit of "
                    f"{self.options.max_rules_per_role}",
                    decl.span,
                    "split it into several roles",
                )
            )
        if duplicate:
            self.duplicates.append(decl)
        else:
            self.register(decl)

    def collect_toolset(self, ts: ast.Toolset, register: bool = True) -> None:
        """Check a toolset's body; `register` its tools unless its name is a duplicate."""
        if register and (ts.name in BUILTIN_NAMESPACES or ts.name in ("callables", "tool")):
            self.report(
                Diagnostic(
                    "E0108",
                    f"toolset `{ts.name}` uses a built-in namespace",
                    ts.span,
                    "built-in namespaces are reserved for the API's own tools; pick another name",
                )
            )
            return
        if ts.url is not None and not _URL.match(ts.url):
            self.report(
                Diagnostic(
                    "E0113",
                    f"`{ts.url}` is not an http(s) URL",
                    ts.url_span if ts.url_span.line else ts.span,
                    'write the full address, e.g. "https://tools.example.com/mail"',
                )
            )
        if register:
            self.toolsets[ts.name] = ts
        names: set[str] = set()
        for tool in ts.tools:
            full = f"{ts.name}.{tool.name}"
            if tool.name in names:
                self.report(
                    Diagnostic(
                        "E0109",
                        f"tool `{full}` is declared twice",
                        tool.span,
                        "remove one of them, or rename it",
                    )
                )
                continue
            names.add(tool.name)
            if len(ts.name) <= self.options.parse.max_name_chars:  # (else that is reported)
                self.check_name_length("tool", tool.name, tool.span, full)
            params: set[str] = set()
            for param in tool.params:
                if param.name in params:
                    self.report(
                        Diagnostic(
                            "E0110",
                            f"argument `{param.name}` of `{full}` is declared twice",
                            param.span,
                            "remove one of them, or rename it",
                        )
                    )
                params.add(param.name)
                if param.default is not None and not param.type.plain:
                    self.check_default(param)
                elif param.default is not None:
                    declared = T.from_ref(param.type)
                    given = T.literal_type(param.default)
                    if given is None or not (
                        T.value_fits(declared, given)
                        or (declared == "map" and isinstance(param.default, ast.MapLit))
                    ):
                        self.report(
                            Diagnostic(
                                "E0111",
                                f"default of `{param.name}` is "
                                + (f"a `{T.show(given)}`" if given else "not a single type")
                                + f", but the argument is `{T.show(declared)}`",
                                param.default.span,
                                f"use a value of type `{T.show(declared)}`, or change the argument's type",
                            )
                        )
            if register:
                self.tools[full] = ToolSpec(
                    full, tool.params, ts.name, ts.runs_code, ts.connection_required,
                    sensitive=ToolSpec.secrets_of(tool.params), span=tool.span,
                )  # fmt: skip

    def check_default(self, param: ast.Param) -> None:
        """E0111 for the default of an argument of an enum, a record or a `T | null`
        type that does not fit it (checked as a call's value is: `engine.valuefit`)."""
        assert param.default is not None
        found = valuefit.misfit(param.type, param.default)
        if found is None:
            return
        part, wanted = found
        self.report(
            Diagnostic(
                "E0111",
                f"default of `{param.name}` does not fit its type `{param.type}`",
                part.span if part.span.line else param.default.span,
                f"use a value of type `{wanted}`, or change the argument's type",
            )
        )

    # ---- stage: resolve ----------------------------------------------------------------
    def resolve_patterns(
        self, patterns: tuple[ast.Pattern, ...], lenient: bool = False
    ) -> list[ToolSpec]:
        matched: list[ToolSpec] = []
        for pattern in patterns:
            found = match_tools(self.tools, (pattern,), self.by_namespace)
            if not found and not lenient:
                if pattern.kind == "namespace":
                    namespaces = {t.namespace for t in self.tools.values() if t.namespace}
                    self.report(
                        Diagnostic(
                            "E0102",
                            f"no tool is in namespace `{pattern.namespace}`",
                            pattern.span,
                            did_you_mean(pattern.namespace, namespaces)
                            or "declare a toolset with that name, or check the spelling",
                        )
                    )
                else:
                    self.report(
                        Diagnostic(
                            "E0101",
                            f"no tool is named `{pattern.text}`",
                            pattern.span,
                            did_you_mean(pattern.text, self.tools)
                            or "declare it in a toolset, or check the spelling",
                        )
                    )
            matched.extend(found)
        return list({t.name: t for t in matched}.values())

    def resolve(self) -> None:
        dups = self.duplicates
        settled = self.settled
        for role in [*self.roles.values(), *(d for d in dups if isinstance(d, ast.Role))]:
            if role.span.file in settled:
                continue
            for rule in role.rules:
                self.resolve_rule(rule)
        for hook in [*self.hooks.values(), *(d for d in dups if isinstance(d, ast.Hook))]:
            if hook.span.file in settled:
                continue
            lenient = hook.span.file == "<default hooks>"
            self.hook_tools.append((hook, self.resolve_patterns(hook.patterns, lenient=lenient)))
        for profile in [*self.profiles.values(), *(d for d in dups if isinstance(d, ast.Profile))]:
            self.resolve_profile(profile)
        for test in [*self.tests, *(d for d in dups if isinstance(d, ast.Test))]:
            self.resolve_test(test)

    def resolve_rule(self, rule: ast.Rule) -> None:
        tools = self.resolve_patterns(rule.patterns)
        if rule.where is not None:
            self.rule_conditions.append((rule.where, tools))
        if rule.effect == "deny":
            authored = [t.name for t in tools if not t.builtin]
            if authored:
                self.report(
                    Diagnostic(
                        "E0103",
                        f"deny rules are for built-in tools only, and this one matches "
                        f"toolset tool `{authored[0]}`",
                        rule.span,
                        "narrow the `allow` that grants it with a `where` condition instead",
                    )
                )

    def resolve_profile(self, profile: ast.Profile) -> None:
        """Each diagnostic about a listed name points at that name, wherever the list's
        lines break and whatever comments sit between its names."""
        roles = profile.roles
        for index, name in enumerate(roles):
            if name not in self.roles:
                self.report(
                    Diagnostic(
                        "E0104",
                        f"profile `{profile.name}` selects unknown role `{name}`",
                        ast.name_span(profile.role_spans, index, profile.span),
                        did_you_mean(name, self.roles) or "declare the role, or check the spelling",
                    )
                )
        for index, name in enumerate(profile.hooks):
            if name not in _RESERVED_NAMES["hook"] and name not in self.hooks:
                self.report(
                    Diagnostic(
                        "E0105",
                        f"profile `{profile.name}` installs unknown hook `{name}`",
                        ast.name_span(profile.hook_spans, index, profile.span),
                        did_you_mean(name, [*self.hooks, *_RESERVED_NAMES["hook"]])
                        or "declare the hook, or check the spelling",
                    )
                )
        if len(set(roles)) != len(roles):
            # (at the first repeated name where it is listed last, as before)
            twice = next(r for r in roles if roles.count(r) > 1)
            last = len(roles) - 1 - roles[::-1].index(twice)
            self.report(
                Diagnostic(
                    "W0115",
                    f"profile `{profile.name}` lists a role twice",
                    ast.name_span(profile.role_spans, last, profile.span),
                    "remove the repeated name",
                    severity="warning",
                )
            )

    def resolve_test(self, test: ast.Test) -> None:
        if test.profile and test.profile not in self.profiles:
            self.report(
                Diagnostic(
                    "E0106",
                    f'test "{test.name}" names unknown profile `{test.profile}`',
                    test.profile_span if test.profile_span.line else test.span,
                    did_you_mean(test.profile, self.profiles) or "declare the profile",
                )
            )
        check_test_settings(test, self.report)
        for expect in test.expects:
            tool = self.tools.get(expect.tool)
            if tool is None:
                self.report(
                    Diagnostic(
                        "E0114",
                        f"test expects a call of unknown tool `{expect.tool}`",
                        expect.tool_span if expect.tool_span.line else expect.span,
                        did_you_mean(expect.tool, self.tools) or "check the tool's name",
                    )
                )
                continue
            check_expect(tool, expect, self.report)

    # ---- stage: type -------------------------------------------------------------------
    def type_conditions(self) -> None:
        limit = self.options.parse.max_expr_nodes
        conditions = list(self.rule_conditions)
        for hook, tools in self.hook_tools:
            if hook.where is not None:
                conditions.append((hook.where, tools))
            for rewrite in hook.rewrites:
                self.type_rewrite(hook, rewrite, tools)
        for expr, tools in conditions:
            if not tools:
                continue  # its pattern names no tool: already reported, nothing to type against
            if len(ast.walk_expr(expr)) > limit:
                self.report(
                    Diagnostic(
                        "E0208",
                        f"condition has more than {limit} nodes",
                        expr.span,
                        "split it across several rules",
                    )
                )
                continue
            T.check_condition(expr, T.TypeEnv(tools, self.report))

    def check_secret_copy(
        self, hook: ast.Hook, rewrite: ast.Rewrite, tools: list[ToolSpec]
    ) -> None:
        """A rewrite reads a secret argument (`identities.import`'s `seed`, a connection's
        `credential`, a toolset's argument marked `secret`) only to set it: the log and the responses redact it by its name, so a
        copy in another argument was shown, and stored (a label, a connection's name)."""
        target = rewrite.target.parts[0]
        for node in ast.walk_expr(rewrite.value):
            if isinstance(node, ast.Path) and node.root == "args" and node.parts:
                for tool in tools:
                    if node.parts[0] in tool.sensitive and target not in tool.sensitive:
                        self.report(Diagnostic(
                            "E0207",
                            f"hook `{hook.name}` copies `{node}`, a secret of `{tool.name}`, "
                            f"into `{rewrite.target}`, which the log and responses show",
                            node.span,
                            "a rewrite may read a secret argument only to set that argument",
                        ))  # fmt: skip
                        return

    def type_rewrite(self, hook: ast.Hook, rewrite: ast.Rewrite, tools: list[ToolSpec]) -> None:
        target = rewrite.target
        if target.root != "args" or len(target.parts) != 1:
            self.report(
                Diagnostic(
                    "E0207",
                    f"a rewrite sets one argument, like `args.limit`; `{target}` is not one",
                    target.span,
                    "rewrite a top-level argument of the call: `rewrite args.NAME = VALUE`",
                )
            )
            return
        self.check_secret_copy(hook, rewrite, tools)
        env = T.TypeEnv(tools, self.report)
        declared = T.path_type(target, env)
        value = T.infer(rewrite.value, env)
        if declared is not None and value is not None and not T.value_fits(declared, value):
            self.report(
                Diagnostic(
                    "E0207",
                    f"hook `{hook.name}` sets `{target}` (`{T.show(declared)}`) to a `{T.show(value)}`",
                    rewrite.value.span,
                    f"use a value of type `{T.show(declared)}`",
                )
            )
            return
        if declared is None or not _constant(rewrite.value):
            return  # (a value read from the call is checked with the rewritten call)
        for tool in tools:
            param = tool.param(target.parts[0])
            if param is None or param.type.plain:
                continue
            found = valuefit.misfit(param.type, rewrite.value)
            if found is not None:
                self.report(
                    Diagnostic(
                        "E0207",
                        f"hook `{hook.name}` sets `{target}` of `{tool.name}` to a value "
                        f"that does not fit its type `{param.type}`",
                        found[0].span if found[0].span.line else rewrite.value.span,
                        f"use a value of type `{found[1]}`",
                    )
                )
                return


def _constant(expr: ast.Expr) -> bool:
    """Is `expr` a literal value (no path, no call): one the checker can check whole?"""
    return all(isinstance(node, ast.Lit | ast.ListLit | ast.MapLit) for node in ast.walk_expr(expr))
