"""`charter gateway`'s configuration file: TOML (`.toml`) or JSON (any other name).

    agent = "support-bot"        # the agent every session acts for, or:
    # token = "..."              # an agent token: the session acts for its agent
    # (neither: over HTTP only, each session acts for its bearer token's agent)
    pause_wait = 30              # seconds a paused call waits for its approval
    ask_rounds = 3               # times the client's user may say to wait another pause_wait
    watch = 1.0                  # seconds between looks for a new revision
    shadow = false               # decide and log, but forward every call
    report = "shadow.jsonl"      # shadow mode's report (default: stderr)
    # server = "http://127.0.0.1:8080"   # decide against a Charter server, not `--db`
    # server_token = "..."               # its token (`decide`, or `admin` to follow approvals)

    [[upstream]]                 # one or more
    toolset = "demo"             # the Charter toolset its tools are (`demo.<tool>`)
    command = ["python", "server.py"]   # started, spoken to over stdio; or:
    # url = "http://127.0.0.1:9000/mcp" # a Streamable HTTP endpoint

A file that says anything else (an unknown key, a wrong type, no upstream) is refused with
what is wrong, before anything starts. The tokens are secrets: no message names a value.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_PAUSE_WAIT = 30.0
DEFAULT_WATCH = 1.0
DEFAULT_ASK_ROUNDS = 3
MAX_ASK_ROUNDS = 100
MAX_WAIT = 86_400.0  # a day: a paused call waits at most this long
_TOOLSET = re.compile(r"[a-z][a-z0-9_-]*\Z")
_TOP = frozenset(
    {
        "agent",
        "token",
        "pause_wait",
        "ask_rounds",
        "watch",
        "shadow",
        "report",
        "upstream",
        "server",
        "server_token",
    }
)
_UPSTREAM = frozenset({"toolset", "command", "url", "env", "cwd"})


class ConfigError(Exception):
    """The configuration file is not one: the message says what and where."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


@dataclass(frozen=True)
class Upstream:
    toolset: str
    command: tuple[str, ...] = ()
    url: str | None = None
    env: Mapping[str, str] | None = None
    cwd: str | None = None


@dataclass(frozen=True)
class GatewayConfig:
    upstreams: tuple[Upstream, ...]
    agent: str | None = None
    token: str | None = None
    pause_wait: float = DEFAULT_PAUSE_WAIT
    watch: float = DEFAULT_WATCH
    shadow: bool = False
    server: str | None = None
    server_token: str | None = None
    report: str | None = None
    ask_rounds: int = DEFAULT_ASK_ROUNDS

    @property
    def names_agent(self) -> bool:
        """Whether a session without a bearer token has an agent to act for."""
        return self.agent is not None or self.token is not None

    def __repr__(self) -> str:  # (the token is a secret)
        token = "set" if self.token is not None else None
        server_token = "set" if self.server_token is not None else None
        return (
            f"GatewayConfig(upstreams={self.upstreams!r}, agent={self.agent!r}, "
            f"token={token}, pause_wait={self.pause_wait}, watch={self.watch}, "
            f"shadow={self.shadow}, server={self.server!r}, server_token={server_token}, "
            f"report={self.report!r}, ask_rounds={self.ask_rounds})"
        )


def load(path: str | Path) -> GatewayConfig:
    """Read and check the file at `path` (ConfigError when it is not a configuration)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        why = (exc.strerror or type(exc).__name__).lower()
        raise ConfigError(f"cannot read `{path}`: {why}") from None
    try:
        text = data.decode("utf-8")
        doc = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except UnicodeDecodeError:
        raise ConfigError(f"`{path}` is not UTF-8 text") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        kind = "TOML" if path.suffix == ".toml" else "JSON"
        raise ConfigError(f"`{path}` is not {kind}: {exc}") from None
    return parse(doc, str(path))


def parse(doc: Any, where: str = "the configuration") -> GatewayConfig:
    if not isinstance(doc, dict):
        raise ConfigError(f"{where} is not a table of settings")
    _known(doc, _TOP, where)
    agent = _text(doc, "agent", where)
    token = _text(doc, "token", where, secret=True)
    if agent is not None and token is not None:
        raise ConfigError(
            f"{where} gives both `agent` and `token`",
            "give `agent` (the agent's id) or `token` (an agent token), one of them",
        )
    pause_wait = _seconds(doc, "pause_wait", DEFAULT_PAUSE_WAIT, where, minimum=0.0)
    watch = _seconds(doc, "watch", DEFAULT_WATCH, where, minimum=0.05)
    ask_rounds = doc.get("ask_rounds", DEFAULT_ASK_ROUNDS)
    if (
        isinstance(ask_rounds, bool)
        or not isinstance(ask_rounds, int)
        or not 0 <= ask_rounds <= MAX_ASK_ROUNDS
    ):
        raise ConfigError(
            f"{where}: `ask_rounds` must be a whole number from 0 to {MAX_ASK_ROUNDS}"
        )
    shadow = doc.get("shadow", False)
    if not isinstance(shadow, bool):
        raise ConfigError(f"{where}: `shadow` must be true or false")
    report = _text(doc, "report", where)
    server = _text(doc, "server", where)
    server_token = _text(doc, "server_token", where, secret=True)
    if server is not None and not server.startswith(("http://", "https://")):
        raise ConfigError(f"{where}: `server` must be an http:// or https:// URL, not `{server}`")
    if (server is None) != (server_token is None):
        raise ConfigError(
            f"{where}: `server` and `server_token` go together",
            "give the Charter server's URL and a token of it, or neither (decide in-process)",
        )
    if server is not None and agent is None:
        raise ConfigError(
            f"{where}: with `server`, name the agent with `agent`",
            "an agent token names its agent in-process only",
        )
    ups = doc.get("upstream")
    if not isinstance(ups, list) or not ups:
        raise ConfigError(
            f"{where} has no upstream", "add an `[[upstream]]` table with `toolset` and `command`"
        )
    upstreams = tuple(_upstream(item, f"{where}: upstream {i + 1}") for i, item in enumerate(ups))
    seen: set[str] = set()
    for up in upstreams:
        if up.toolset in seen:
            raise ConfigError(f"{where}: toolset `{up.toolset}` has two upstreams")
        seen.add(up.toolset)
    return GatewayConfig(
        upstreams, agent, token, pause_wait, watch, shadow, server, server_token, report,
        ask_rounds,
    )  # fmt: skip


def _upstream(item: Any, where: str) -> Upstream:
    if not isinstance(item, dict):
        raise ConfigError(f"{where} is not a table")
    _known(item, _UPSTREAM, where)
    toolset = _text(item, "toolset", where)
    if toolset is None or not _TOOLSET.match(toolset):
        raise ConfigError(
            f"{where}: `toolset` must name a toolset"
            + ("" if toolset is None else f", not `{toolset}`"),
            "a lowercase name, as the policy declares it (`toolset demo { ... }`)",
        )
    command = item.get("command")
    url = _text(item, "url", where)
    if (command is None) == (url is None):
        raise ConfigError(
            f"{where}: give `command` or `url`, one of them",
            "`command`: the server's program and arguments, a list of strings; "
            "`url`: its Streamable HTTP endpoint",
        )
    if command is not None and (
        not isinstance(command, list)
        or not command
        or not all(isinstance(part, str) and part for part in command)
    ):
        raise ConfigError(f"{where}: `command` must be a list of non-empty strings")
    if url is not None and not url.startswith(("http://", "https://")):
        raise ConfigError(f"{where}: `url` must be an http:// or https:// URL, not `{url}`")
    env = item.get("env")
    if env is not None and (
        not isinstance(env, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        raise ConfigError(f"{where}: `env` must be a table of strings")
    cwd = _text(item, "cwd", where)
    return Upstream(toolset, tuple(command or ()), url, env, cwd)


def _known(doc: dict[str, Any], keys: frozenset[str], where: str) -> None:
    for key in doc:
        if key not in keys:
            raise ConfigError(
                f"{where}: unknown setting `{key}`", f"the settings: {', '.join(sorted(keys))}"
            )


def _text(doc: dict[str, Any], key: str, where: str, secret: bool = False) -> str | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        shown = "" if secret else f", not `{value}`"
        raise ConfigError(f"{where}: `{key}` must be a non-empty string{shown}")
    return value


def _seconds(doc: dict[str, Any], key: str, default: float, where: str, minimum: float) -> float:
    value = doc.get(key, default)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not minimum <= value <= MAX_WAIT
    ):
        raise ConfigError(f"{where}: `{key}` must be seconds from {minimum:g} to {MAX_WAIT:g}")
    return float(value)
