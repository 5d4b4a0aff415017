"""`charter gateway`: an MCP proxy in front of MCP servers, Charter deciding every tool call
(api/gateway; docs/operations.md, "The MCP gateway")."""

from __future__ import annotations

import argparse
import os
from typing import Any

from api.cli_outcome import usage
from api.cli_serve_checks import database_path, host_name, port_number, store_refused
from api.gateway.config import ConfigError, load
from api.node_files import KEY_FILE_FLAG, node_files
from policy.store.open import StoreUrlError, parse


def cmd_gateway(args: argparse.Namespace) -> int:
    try:
        config = load(args.config)
    except ConfigError as exc:
        return usage(exc.message, exc.hint)
    if not config.names_agent and args.port is None:
        return usage(
            f"`{args.config}` names no agent",
            "give `agent` (the agent's id) or `token` (an agent token); over HTTP "
            "(`--port`), sessions may instead act for their bearer token's agent",
        )
    if config.server is not None and args.db is not None:
        return usage(
            "give `--db` or a `server` in the configuration, not both",
            "decisions are made in-process on the database, or by the server",
        )
    db = args.db or "charter.db"
    if config.server is None:
        try:
            target = parse(db)
            node_files(target, args.key_file)  # (a PostgreSQL --db needs --key-file)
        except StoreUrlError as exc:
            return store_refused(exc)
        if target.path is not None and not os.path.exists(target.path):
            return usage(
                f"no database at `{target.path}`",
                "name the database `charter serve --db` serves (the policy, the agents)",
            )
    try:
        import anyio

        from api.gateway.run import decider_for, serve
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith("mcp"):
            raise
        return usage(
            "the gateway needs the MCP SDK, which is not installed",
            "install it: `pip install 'charter[gateway]'`",
        )
    decider = decider_for(config, db, args.key_file)
    try:
        anyio.run(serve, config, decider, args.host, args.port)
    except ConfigError as exc:
        return usage(exc.message, exc.hint)
    except KeyboardInterrupt:
        pass
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "gateway",
        help="serve MCP tools through Charter: each call decided, logged, then forwarded",
        description="An MCP proxy: the upstream servers of --config, whose tools the agent "
        "sees and calls as Charter decides (over stdio, or Streamable HTTP with --port).",
    )
    p.add_argument("--config", required=True, metavar="FILE",
                   help="the gateway's configuration: TOML (`.toml`) or JSON (the agent, "
                   "the upstream servers and their toolsets)")  # fmt: skip
    p.add_argument("--db", type=database_path, default=None,
                   help="the database `charter serve --db` serves: decisions are made and "
                   "logged in-process against it (default: charter.db; none with a "
                   "`server` in the configuration)")  # fmt: skip
    p.add_argument(KEY_FILE_FLAG, default=None, metavar="PATH",
                   help="the file of the key that seals secrets, as `charter serve` is given "
                   "it (default: `<db>.key`; required for a PostgreSQL --db)")  # fmt: skip
    p.add_argument("--host", type=host_name, default="127.0.0.1",
                   help="with --port: the address to serve MCP on (default: 127.0.0.1)")  # fmt: skip
    p.add_argument("--port", type=port_number, default=None,
                   help="serve MCP over Streamable HTTP on this port (at `/mcp`); "
                   "without it, over stdio")  # fmt: skip
    p.set_defaults(func=cmd_gateway)
