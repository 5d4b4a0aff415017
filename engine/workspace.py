"""A checked workspace (what `engine.check` gives and everything after it reads), and
matching tool patterns against a workspace's tools."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from engine.builtins import default_hook_names
from grammar.outline import Entry
from policy import ast
from policy.catalogue import ToolSpec
from policy.diagnostics import Diagnostic


@dataclass(frozen=True)
class Workspace:
    """A checked workspace: every name resolved, every condition typed."""

    tools: Mapping[str, ToolSpec]
    toolsets: Mapping[str, ast.Toolset]
    roles: Mapping[str, ast.Role]
    hooks: Mapping[str, ast.Hook]
    profiles: Mapping[str, ast.Profile]
    tests: tuple[ast.Test, ...]
    files: tuple[ast.SourceFile, ...] = field(default=(), compare=False)
    warnings: tuple[Diagnostic, ...] = field(default=(), compare=False)
    # The CheckOptions it was checked under (engine.checker): a check that changes it
    # takes nothing of it under other limits (engine.check.check_sources).
    options: object = field(default=None, compare=False, repr=False)
    # The tools' names by namespace, as the checker indexed them (None: indexed here).
    namespaces: dict[str, list[str]] | None = field(default=None, compare=False, repr=False)
    # What a serving process loaded of a stored revision (engine/served.py) has here each
    # file's outline: it holds the roles its profiles select and no test, each file with
    # those declarations alone. Such a workspace is never a check's `base`: its files do
    # not hold what they declare.
    outlines: Mapping[str, Sequence[Entry]] | None = field(default=None, compare=False, repr=False)

    @property
    def partial(self) -> bool:
        return self.outlines is not None

    @property
    def sources(self) -> dict[str, str]:
        return {f.path: f.text for f in self.files}

    def profile_hooks(self, profile: ast.Profile) -> tuple[ast.Hook, ...]:
        """The profile's hooks in order, `default` expanded to the six approval hooks."""
        out: list[ast.Hook] = []
        for name in profile.hooks:
            if name == "none":
                return ()
            names = default_hook_names() if name == "default" else (name,)
            out.extend(self.hooks[n] for n in names if n in self.hooks)
        return tuple(dict.fromkeys(out))

    def matching_tools(self, patterns: Iterable[ast.Pattern]) -> list[ToolSpec]:
        return match_tools(self.tools, patterns, self.tools_by_namespace)

    @cached_property
    def tools_by_namespace(self) -> dict[str, list[str]]:
        return self.namespaces if self.namespaces is not None else index_namespaces(self.tools)

    @cached_property
    def secret_names(self) -> frozenset[str]:
        """Every argument name some tool keeps secret (marked `secret`: the catalogue's
        `seed` and `credential`, and the toolsets' own), which the decision log and every
        answer redact; a call denied for its shape has each of them hidden, at any depth."""
        return frozenset().union(*(tool.sensitive for tool in self.tools.values()))


def index_namespaces(tools: Mapping[str, ToolSpec]) -> dict[str, list[str]]:
    """Tool names by their first dotted segment, so `ns.*` is a look-up, not a scan of
    every tool (10,000 roles x 5,000 tools would otherwise be 50M pattern tests)."""
    index: dict[str, list[str]] = {}
    for name in tools:
        head, dot, _ = name.partition(".")
        if dot:
            index.setdefault(head, []).append(name)
    return index


def match_tools(
    tools: Mapping[str, ToolSpec],
    patterns: Iterable[ast.Pattern],
    by_namespace: Mapping[str, list[str]] | None = None,
) -> list[ToolSpec]:
    seen: dict[str, ToolSpec] = {}
    for pattern in patterns:
        kind = pattern.kind
        if kind == "exact":
            if pattern.text in tools:
                seen[pattern.text] = tools[pattern.text]
        elif kind == "namespace" and by_namespace is not None and "." not in pattern.namespace:
            for name in by_namespace.get(pattern.namespace, ()):
                seen[name] = tools[name]
        else:
            for name, tool in tools.items():
                if pattern.matches(name):
                    seen[name] = tool
    return list(seen.values())
