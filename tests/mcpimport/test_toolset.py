"""A tool list as a toolset declaration (api/mcpimport/toolset.py): what is required,
defaulted or optional, comments, and what is left out and said so."""

from __future__ import annotations

from typing import Any

from api.mcpimport.toolset import declaration, tools_of, toolset_name
from engine.check import check_sources
from grammar.fmt import format_file
from grammar.parser import parse


def _import(*tools: dict[str, Any]) -> tuple[str, list[str]]:
    imported = declaration("t", list(tools))
    text = imported.text
    assert format_file(parse(text, "t.charter")) == text
    check_sources([("t.charter", text)])  # (raises on any error)
    return text, [str(loss) for loss in imported.losses]


def _schema(required: list[str] | None = None, **props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required or []}


def _props(props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def test_required_defaulted_and_optional_arguments() -> None:
    text, losses = _import(
        {
            "name": "listRepos",
            "inputSchema": _schema(
                ["orgName"],
                orgName={"type": "string"},
                perPage={"type": "integer", "default": 30},
                sort={"enum": ["created", "updated"], "default": "pushed"},  # (off the enum)
                ratio={"type": "number", "default": 0.5},
                since={"type": "string"},
                huge={"type": "number", "default": 1e300},  # (300 digits: no literal)
                big={"type": "integer", "default": 10**120},
            ),
        }
    )
    assert text == (
        "toolset t {\n"
        '  tool listRepos(orgName: str, perPage: int = 30, sort?: enum["created", "updated"], '
        "ratio: decimal = 0.5, since?: str, huge?: decimal, big?: int)\n"
        "}\n"
    )
    assert losses == []


def test_what_no_line_can_say_is_left_out_and_said() -> None:
    empty_named = _props({"": {"type": "string"}, "a": {"type": "string"}})
    text, losses = _import(
        {"name": "", "inputSchema": _schema()},
        {"name": "all*", "inputSchema": _schema()},
        {"name": "ok", "description": "  First line\u202e.\nSecond.", "inputSchema": empty_named},
        {"name": "ok", "inputSchema": _schema()},
        {"name": "open", "inputSchema": {"type": "object", "additionalProperties": True}},
        {"name": "union", "inputSchema": {"anyOf": [_schema(a={"type": "string"})]}},
    )
    assert text == (
        "toolset t {\n"
        "  # First line .\n"
        '  # argument `""` left out: its name is empty\n'
        "  tool ok(a?: str)\n"
        "  # it takes arguments its schema does not list: a call giving one is refused\n"
        "  tool open()\n"
        "  # its schema's `anyOf` is not read: only its `properties` are declared\n"
        "  tool union()\n"
        "}\n"
    )
    assert losses == [
        "tool ``: left out: its name is empty",
        "tool `all*`: left out: its name ends in `*`, which a pattern reads as a wildcard",
        'tool `ok`: argument `""` is left out: its name is empty',
        "tool `ok`: listed twice: the first is kept",
        "tool `open`: it takes arguments its schema does not list: a call giving one is refused",
        "tool `union`: its schema's `anyOf` is not read: only its `properties` are declared",
    ]


def test_toolset_names_from_server_names() -> None:
    assert toolset_name("GitHub MCP Server") == "github-mcp-server"
    assert toolset_name("  42 things!") == "things"
    assert toolset_name("日本") == "mcp"
    assert toolset_name("Memory") == "memory-mcp"  # (a built-in namespace: E0108)


def test_the_shapes_a_saved_list_comes_in() -> None:
    tool = {"name": "a"}
    assert tools_of({"tools": [tool]}) == [tool]
    assert tools_of({"jsonrpc": "2.0", "id": 1, "result": {"tools": [tool]}}) == [tool]
    assert tools_of([tool]) == [tool]
    assert tools_of({"tools": "a"}) is None
    assert tools_of("a") is None
