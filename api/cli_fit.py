"""`charter fit`, `charter tools` and `charter diff`: the fit check, tool listing and
semantic diff on the command line (registered into `charter` by api.cli).

Exit codes: 0 fits / listed / nothing widened; 1 does not fit, anything widened, or the
policy has errors; 2 the command line itself was wrong. With `--format json` each is one
JSON document on stdout (api.cli_outcome).
"""

from __future__ import annotations

import argparse
from typing import Any

from api import cli_outcome
from api.cli_outcome import out as _out
from api.service.encoding import dumps_text
from engine.check import load
from engine.compile import compile_workspace
from engine.diff import DIRECTIONS, DiffResult, diff_workspaces
from engine.fit import FitResult, fit_role, fit_source, fit_workspace_profile
from engine.listing import list_tools
from engine.workspace import Workspace
from grammar.parser import parse
from grammar.source import read_file
from policy import ast
from policy.diagnostics import CharterError


def _fail(exc: CharterError, fmt: str) -> int:
    return cli_outcome.diagnostics(exc.diagnostics, exc.sources, fmt)


def _load(path: str) -> Workspace:
    return load([path])


def _call_text(call: dict[str, Any]) -> list[str]:
    lines = [f"{call['tool']} {dumps_text(call['args'], indent=False, sort_keys=True)}"]
    for part in ("context", "agent", "thread"):
        if call.get(part) is not None:
            lines.append(f"  {part}: {dumps_text(call[part], indent=False, sort_keys=True)}")
    return lines


def _print_where(location: str | None, call: dict[str, Any] | None) -> None:
    """The lines under a violation or a change: where it is, and its counterexample."""
    if location:
        _out(f"  at {location}")
    if call:
        first, *rest = _call_text(call)
        _out(f"  counterexample: {first}")
        for line in rest:
            _out("  " + line)


def print_fit(result: FitResult) -> None:
    if result.fits:
        _out("fits")
        return
    count = len(result.violations)
    _out(f"does not fit: {count} violation{'s' if count != 1 else ''}")
    for v in result.violations:
        _out(f"{v.kind}: {v.message}")
        _print_where(v.location, v.shown_counterexample())


def cmd_fit(args: argparse.Namespace) -> int:
    try:
        ws = _load(args.workspace)
        snap = compile_workspace(ws)
        if args.role:
            result = fit_role(ws, args.caller, ws, args.role, timeout_ms=args.timeout_ms)
        elif args.profile:
            result = fit_workspace_profile(
                ws, args.caller, ws, args.profile, timeout_ms=args.timeout_ms
            )
        else:
            text = read_file(args.file)  # (as `charter check` reads it: E0014, E0015)
            decls = parse(text, args.file).declarations
            kind = "profile" if any(isinstance(d, ast.Profile) for d in decls) else "role"
            result = fit_source(
                snap, args.caller, text, kind=kind, timeout_ms=args.timeout_ms, path=args.file
            )
    except CharterError as exc:
        return _fail(exc, args.format)
    except OSError as exc:
        reason = (exc.strerror or type(exc).__name__).lower()
        return cli_outcome.usage(f"cannot read `{args.file}`: {reason}", fmt=args.format)
    if args.format == "json":
        _out(dumps_text(result.to_json()))
    else:
        print_fit(result)
    return 0 if result.fits else 1


def cmd_tools(args: argparse.Namespace) -> int:
    try:
        snap = compile_workspace(_load(args.workspace))
        listing = list_tools(snap, args.profile)
    except CharterError as exc:
        return _fail(exc, args.format)
    if args.format == "json":
        _out(dumps_text([t.to_json() for t in listing]))
        return 0
    denied = 0
    for item in listing:
        if item.status == "deny" and not args.all:
            denied += 1
            continue
        line = f"{item.status:<7}{item.tool}"
        if item.condition is not None:
            line += f" where {item.condition}"
            if not item.exact:
                line += "  (each allow on its own: an erroring one does not grant)"
        _out(line)
        for hook in item.hooks:
            when = f" where {hook.condition}" if hook.condition else ""
            _out(f"         hook `{hook.name}` {hook.kind}{when}")
    if denied:
        _out(f"({denied} other tools denied; --all lists them)")
    return 0


def print_diff(result: DiffResult) -> None:
    if not result.changes:
        _out("no access changed")
        return
    for change in result.changes:
        _out(f"{change.direction}: profile `{change.profile}`: {change.message}")
        _print_where(change.location, change.shown_counterexample())
    count = {d: sum(c.direction == d for c in result.changes) for d in DIRECTIONS}
    _out(f"{count['wider']} wider, {count['narrower']} narrower, {count['unknown']} undecided")


def cmd_diff(args: argparse.Namespace) -> int:
    try:
        old, new = _load(args.old), _load(args.new)
    except CharterError as exc:
        return _fail(exc, args.format)
    result = diff_workspaces(old, new, timeout_ms=args.timeout_ms)
    if args.format == "json":
        _out(dumps_text(result.to_json()))
    else:
        print_diff(result)
    return 1 if result.widened else 0


MAX_TIMEOUT_MS = 3_600_000  # an hour


def timeout_ms(text: str) -> int:
    """The solver's time for a check, 1 ms to an hour: a negative or zero one was taken,
    and every check then ended as a timeout, reported as a widening."""
    if text.isascii() and text.isdigit() and len(text) <= 7 and 1 <= int(text) <= MAX_TIMEOUT_MS:
        return int(text)
    raise argparse.ArgumentTypeError(
        f"`{text}` is not a timeout: give milliseconds, from 1 to {MAX_TIMEOUT_MS}"
    )


def register(sub: Any) -> None:
    p = sub.add_parser("fit", help="does a role or profile fit inside a caller's access?")
    p.add_argument("--workspace", required=True)
    p.add_argument("--caller", required=True, help="the caller's profile")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--role", help="a role of the workspace")
    which.add_argument("--profile", help="a profile of the workspace")
    which.add_argument("--file", help="DSL text of a new role or profile")
    p.add_argument("--timeout-ms", type=timeout_ms, default=2000)
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=cmd_fit)

    p = sub.add_parser("tools", help="list what a profile may call: allow, narrow, deny")
    p.add_argument("--workspace", required=True)
    p.add_argument("--profile", required=True)
    p.add_argument("--all", action="store_true", help="also list denied tools")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=cmd_tools)

    p = sub.add_parser("diff", help="what of each profile's access got wider or narrower")
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--timeout-ms", type=timeout_ms, default=10_000)
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=cmd_diff)


__all__ = ["argparse", "register"]
