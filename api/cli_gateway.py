"""`charter gateway`: an MCP proxy in front of MCP servers, Charter deciding every tool call
(api/gateway; docs/operations.md, "The MCP gateway")."""

from __future__ import annotations

import argparse
import os
from typing import Any

from api.cli_outcome import usage
from api.cli_serve_checks import database_path
from api.gateway.config import ConfigError, load
from policy.store.open import StoreUrlError, parse


def cmd_gateway(args: argparse.Namespace) -> int:
    try:
        config = load(args.config)
    except ConfigError as exc:
        return usage(exc.message, exc.hint)
    try:
        target = parse(args.db)
    except StoreUrlError as exc:
        return usage(str(exc))
    if target.path is not None and not os.path.exists(target.path):
        return usage(
            f"no database at `{target.path}`",
            "name the database `charter serve --db` serves, where the policy and the agents are",
        )
    try:
        import anyio

        from api.gateway.run import local_decider, serve_stdio
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith("mcp"):
            raise
        return usage(
            "the gateway needs the MCP SDK, which is not installed",
            "install it: `pip install 'charter[gateway]'`",
        )
    decider = local_decider(args.db)
    try:
        anyio.run(serve_stdio, config, decider)
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
        "sees and calls as Charter decides (over stdio).",
    )
    p.add_argument("--config", required=True, metavar="FILE",
                   help="the gateway's configuration: TOML (`.toml`) or JSON (the agent, "
                   "the upstream servers and their toolsets)")  # fmt: skip
    p.add_argument("--db", type=database_path, default="charter.db",
                   help="the database `charter serve --db` serves: decisions are made and "
                   "logged in-process against it")  # fmt: skip
    p.set_defaults(func=cmd_gateway)
