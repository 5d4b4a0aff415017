"""The built-in catalogue and default hooks, parsed once from their DSL text."""

from __future__ import annotations

from functools import lru_cache

from grammar.parser import parse
from policy import ast
from policy.catalogue import CATALOGUE_SOURCE, DEFAULT_HOOKS_SOURCE, ToolSpec


@lru_cache(maxsize=1)
def builtin_tools() -> dict[str, ToolSpec]:
    """Every built-in tool by full name (`agents.create`, `search`, ...)."""
    source = parse(CATALOGUE_SOURCE, "<builtin>")
    tools: dict[str, ToolSpec] = {}
    for decl in source.declarations:
        assert isinstance(decl, ast.Toolset)
        for tool in decl.tools:
            name = tool.name if decl.name == "callables" else f"{decl.name}.{tool.name}"
            tools[name] = ToolSpec(name, tool.params, sensitive=ToolSpec.secrets_of(tool.params))
    return tools


@lru_cache(maxsize=1)
def default_hooks() -> tuple[ast.Hook, ...]:
    source = parse(DEFAULT_HOOKS_SOURCE, "<default hooks>")
    return tuple(d for d in source.declarations if isinstance(d, ast.Hook))


def default_hook_names() -> tuple[str, ...]:
    return tuple(h.name for h in default_hooks())
