"""An MCP server's tool list (a `tools/list` result) as a Charter toolset declaration.

Each tool becomes a `tool` line: its name and its arguments' names as the server spells
them (quoted where they are no NAME), each argument's type from its schema
(`api.mcpimport.schema`), required as the schema's `required` says, else with the
schema's `default` when that is a value of the argument's type, else marked `?`. A tool's
description's first line, and each part declared `map` for want of a DSL type, are
comments above its line. The text is the formatter's (`charter fmt` leaves it as it is),
and it checks: a tool no tool line can name (an empty name, one ending in `*`) or one
listed twice is left out, as is an argument with an empty name, each with a `Loss`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from api.mcpimport.schema import Converter, Loss
from engine import valuefit
from grammar import fmt
from grammar.literals import MAX_NUMBER_DIGITS
from grammar.parser import parse
from grammar.source import MAX_NAME_CHARS
from policy import ast
from policy.catalogue import BUILTIN_NAMESPACES

_DESCRIPTION = 100  # characters of a description's first line kept in its comment


@dataclass(frozen=True, slots=True)
class Imported:
    """The declaration's text (canonical), and what it could not say."""

    text: str
    tools: int
    losses: tuple[Loss, ...]


RESERVED = frozenset((*BUILTIN_NAMESPACES, "callables", "tool"))  # (E0108)


def toolset_name(server: str) -> str:
    """A toolset name from a server's name (`GitHub MCP` -> `github-mcp`), or `mcp`; a
    built-in namespace's name gets `-mcp` after it (`Memory` -> `memory-mcp`)."""
    name = re.sub(r"[^a-z0-9_-]+", "-", server.lower()).strip("-_")
    name = re.sub(r"^[^a-z]+", "", name)[:60].rstrip("-_")
    return f"{name}-mcp" if name in RESERVED else name or "mcp"


def _literal(value: Any) -> ast.Expr | None:
    """A JSON value as a DSL literal, or None when it is none (a float that is not
    finite, a number of more than `MAX_NUMBER_DIGITS` digits written out, a key that is
    empty)."""
    if value is None:
        return ast.Lit("null", None)
    if isinstance(value, bool):
        return ast.Lit("bool", value)
    if isinstance(value, int):
        return ast.Lit("int", value) if len(str(abs(value))) <= MAX_NUMBER_DIGITS else None
    if isinstance(value, float):
        number = Decimal(repr(value))
        if not number.is_finite() or len(fmt.decimal(abs(number))) > MAX_NUMBER_DIGITS:
            return None  # (a number the DSL writes with more digits than it reads: E0019)
        return ast.Lit("decimal", number)
    if isinstance(value, str):
        return ast.Lit("str", value)
    if isinstance(value, list):
        items = [_literal(v) for v in value]
        return None if any(i is None for i in items) else ast.ListLit(tuple(items))  # type: ignore[arg-type]
    if isinstance(value, Mapping):
        entries = [(k, _literal(v)) for k, v in value.items()]
        if any(not isinstance(k, str) or not k or v is None for k, v in entries):
            return None
        return ast.MapLit(tuple(entries))  # type: ignore[arg-type]
    return None


def _default(schema: Any, ref: ast.TypeRef) -> ast.Expr | None:
    """The schema's `default`, when it is a value of `ref`."""
    if not isinstance(schema, Mapping) or "default" not in schema:
        return None
    value = _literal(schema["default"])
    return value if value is not None and valuefit.misfit(ref, value) is None else None


def _params(tool: str, schema: Any, converter: Converter) -> list[ast.Param]:
    if not isinstance(schema, Mapping):
        return []
    listed = schema.get("required")
    required = {n for n in listed if isinstance(n, str)} if isinstance(listed, list) else set()
    unread = [k for k in ("$ref", "allOf", "anyOf", "oneOf") if k in schema]
    if unread:
        why = f"its schema's `{unread[0]}` is not read: only its `properties` are declared"
        converter.losses.append(Loss(tool, "", why))
    if schema.get("additionalProperties", False) not in (False, None):
        why = "it takes arguments its schema does not list: a call giving one is refused"
        converter.losses.append(Loss(tool, "", why))
    props = schema.get("properties")
    out: list[ast.Param] = []
    for name, sub in props.items() if isinstance(props, Mapping) else ():
        if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS:
            why = "its name is empty" if not name else "its name is too long"
            converter.losses.append(Loss(tool, ast.name_text(str(name)), why, left_out=True))
            continue
        ref = converter.convert(sub, ast.name_text(name))
        if name in required:
            out.append(ast.Param(name, ref))
            continue
        default = _default(sub, ref)
        out.append(ast.Param(name, ref, default, optional=default is None))
    return out


def _comment(text: str) -> str:
    line = " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""
    line = "".join(c if c.isprintable() else " " for c in line)
    return line if len(line) <= _DESCRIPTION else line[: _DESCRIPTION - 3] + "..."


def declaration(name: str, tools: Sequence[Mapping[str, Any]], url: str | None = None) -> Imported:
    """The toolset `name` declaring `tools` (each a `tools/list` entry: `name`,
    `description`, `inputSchema`)."""
    lines = [f"toolset {name} {{"]
    if url is not None:
        lines.append(f"  url {fmt.string(url)}")
    losses: list[Loss] = []
    seen: set[str] = set()
    count = 0
    for tool in tools:
        tool_name = tool.get("name")
        why = _unnamable(tool_name, MAX_NAME_CHARS - len(name) - 1)
        if why is not None:
            losses.append(Loss(str(tool_name), "", f"left out: {why}"))
            continue
        assert isinstance(tool_name, str)
        if tool_name in seen:
            losses.append(Loss(tool_name, "", "listed twice: the first is kept"))
            continue
        seen.add(tool_name)
        schema = tool.get("inputSchema", tool.get("input_schema"))
        converter = Converter(tool_name, schema if isinstance(schema, Mapping) else {})
        params = _params(tool_name, schema, converter)
        description = tool.get("description")
        if isinstance(description, str) and _comment(description):
            lines.append(f"  # {_comment(description)}")
        for loss in converter.losses:
            if not loss.path:
                lines.append(f"  # {_comment(loss.why)}")
            elif loss.left_out:
                lines.append(f"  # argument `{_comment(loss.path)}` left out: {_comment(loss.why)}")
            else:
                lines.append(f"  # `{_comment(loss.path)}` is `map`: {_comment(loss.why)}")
        text = ", ".join(_param_text(p) for p in params)
        lines.append(f"  tool {fmt.name(tool_name)}({text})")
        losses.extend(converter.losses)
        count += 1
    lines.append("}")
    source = parse("\n".join(lines) + "\n", f"{name}.charter")
    return Imported(fmt.format_file(source), count, tuple(losses))


def _unnamable(name: Any, longest: int) -> str | None:
    """Why no tool line can name a tool `name` (at most `longest` characters: a tool's
    full name, toolset and all, is at most `MAX_NAME_CHARS`), or None."""
    if not isinstance(name, str) or not name:
        return "its name is empty"
    if name.endswith("*"):
        return "its name ends in `*`, which a pattern reads as a wildcard"
    if len(name) > longest:
        return f"its full name would be longer than {MAX_NAME_CHARS} characters"
    return None


def _param_text(param: ast.Param) -> str:
    text = f"{fmt.name(param.name)}{'?' if param.optional else ''}: {fmt.type_text(param.type)}"
    return text + (f" = {fmt.expr_text(param.default)}" if param.default is not None else "")


def tools_of(document: Any) -> list[Mapping[str, Any]] | None:
    """The tools of a saved `tools/list` answer: its `result` (a JSON-RPC response), the
    result itself (`{"tools": [...]}`), or a bare list of tools; None for anything else."""
    if isinstance(document, Mapping) and isinstance(document.get("result"), Mapping):
        document = document["result"]
    if isinstance(document, Mapping):
        document = document.get("tools")
    if isinstance(document, list) and all(isinstance(t, Mapping) for t in document):
        return list(document)
    return None
