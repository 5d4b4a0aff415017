"""`charter import mcp`: an MCP server's tool list as a toolset declaration (docs/dsl.md,
"charter import mcp"). The list is read live from a server started with `--command`
(over stdio) or reached at `--url` (Streamable HTTP), or from a saved `tools/list`
answer (`--file`); the declaration goes to stdout or `-o FILE`, and each part of a
tool's schema declared `map` for want of a DSL type is a warning on stderr."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from api.cli_args import not_utf8
from api.cli_outcome import err, out, usage
from grammar.source import MAX_FILE_BYTES
from policy.diagnostics import CharterError, render_all

_NAME_HELP = "a toolset's name is lowercase: `[a-z][a-z0-9_-]*`, as `--name github`"
_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")


def _http_url(text: str) -> bool:
    """An address a toolset's `url` may hold (E0113): http(s), a host, no white space."""
    parts = urlsplit(text)
    return parts.scheme in ("http", "https") and bool(parts.netloc) and not re.search(r"\s", text)


def _read(path: str) -> tuple[str, list[dict[str, Any]]] | str:
    """(a name from the file's, its tools), or why the file gives no tool list."""
    from api.mcpimport.toolset import tools_of

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return f"cannot read `{path}`: {(exc.strerror or str(exc)).lower()}"
    if len(data) > 16 * MAX_FILE_BYTES:
        return f"`{path}` is larger than {16 * MAX_FILE_BYTES} bytes"
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return f"`{path}` is not JSON: {str(exc)[:200]}"
    tools = tools_of(document)
    if tools is None:
        return f"`{path}` holds no tool list"
    return Path(path).stem, [dict(t) for t in tools]


def cmd_import_mcp(args: argparse.Namespace) -> int:
    from api.mcpimport.toolset import RESERVED, declaration, toolset_name

    given = [o for o in ("command", "url", "file") if getattr(args, o) is not None]
    if len(given) != 1:
        return usage(
            "give one of `--command`, `--url` and `--file`",
            'the server to start (`--command "python server.py"`), its Streamable HTTP '
            "address, or a saved `tools/list` answer",
        )
    if args.name is not None:
        if args.name in RESERVED:
            return usage(
                f"`--name` `{args.name}` is a built-in namespace",
                "built-in namespaces are the API's own tools; pick another name",
            )
        if not_utf8(args.name) is not None or not _NAME.fullmatch(args.name):
            return usage(f"`--name` {args.name!r} is not a toolset's name", _NAME_HELP)
    if args.url is not None and not _http_url(args.url):
        return usage(f"`--url` {args.url!r} is not an http(s) URL", "give the server's MCP URL")
    if args.file is not None:
        read = _read(args.file)
        if isinstance(read, str):
            return usage(read, 'save the answer of `tools/list`: `{"tools": [...]}`')
        server, tools = read
    else:
        try:
            from api.mcpimport.listing import ListingError, list_tools
        except ModuleNotFoundError as exc:
            if exc.name is None or not exc.name.startswith("mcp"):
                raise
            return usage(
                "reading a live server needs the MCP SDK, which is not installed",
                "install it (`pip install 'charter[gateway]'`), or give `--file`",
            )
        try:
            server, tools = list_tools(args.command, args.url)
        except ListingError as exc:
            where = f"`{args.url}`" if args.url is not None else f"`{args.command}`"
            return usage(
                f"cannot list the tools of {where}: {exc.message}",
                "check the command or the URL; the server's own messages are on stderr above",
            )
    name = args.name or toolset_name(server)
    try:
        imported = declaration(name, tools, args.url)
    except CharterError as exc:  # (a declaration past the size a file may have: E0014)
        err(render_all(exc.diagnostics, exc.sources))
        return 1
    for loss in imported.losses:
        err(f"warning: {loss}")
    if args.output is None:
        out(imported.text.rstrip("\n"))
    else:
        try:
            Path(args.output).write_text(imported.text, encoding="utf-8")
        except OSError as exc:
            return usage(f"cannot write `{args.output}`: {(exc.strerror or str(exc)).lower()}")
        err(f"wrote toolset `{name}` ({imported.tools} tools) to {args.output}")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("import", help="write a toolset declaration from another description")
    kinds = p.add_subparsers(dest="kind", required=True)
    m = kinds.add_parser(
        "mcp",
        help="an MCP server's tools as a toolset",
        description="Read an MCP server's tools/list (live, or saved as JSON) and write a "
        "toolset declaration: tools and arguments as the server spells them, each schema "
        "part as its DSL type, or `map` with a warning when no DSL type says it.",
    )
    source = m.add_mutually_exclusive_group()
    source.add_argument("--command", default=None, metavar="CMD",
                        help='start the server and speak MCP over stdio ("python server.py")')  # fmt: skip
    source.add_argument("--url", default=None, help="the server's Streamable HTTP URL")
    source.add_argument("--file", default=None, metavar="FILE",
                        help='a saved tools/list answer (`{"tools": [...]}`, or the JSON-RPC response)')  # fmt: skip
    m.add_argument("--name", default=None,
                   help="the toolset's name (default: from the server's name, or the file's)")  # fmt: skip
    m.add_argument("-o", "--output", default=None, metavar="FILE",
                   help="write the declaration here (default: stdout)")  # fmt: skip
    m.set_defaults(func=cmd_import_mcp)
