"""The `charter` command: check, fmt, test, decide and explain (plus the service's verbs).

Exit codes: 0 success; 1 the policy has errors, a test failed or formatting differs;
2 the command line itself was wrong; 3 an internal error (a bug: a one-line message, never
a traceback; `CHARTER_DEBUG=1` shows the traceback). With `--format json` each of these
is one JSON document on stdout (api.cli_outcome).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from api import cli_outcome
from api.cli_args import json_object, text_option, tool_option, usage_error
from api.cli_outcome import err as _err
from api.cli_outcome import out as _out
from api.service.encoding import dumps_text
from api.service.redaction import hidden_for, redact
from charter import __version__
from engine.check import load
from engine.compile import Snapshot, compile_workspace
from engine.coverage import Coverage, coverage
from engine.decision import Decision, Request
from engine.explain import explain
from engine.lints import lint
from engine.testing import ExpectResult, run_tests
from engine.workspace import Workspace
from grammar.fmt import format_file
from grammar.parser import parse
from grammar.source import MAX_FILE_BYTES, read_sources, too_large
from policy.diagnostics import CharterError, Diagnostic, did_you_mean, render_all, to_json


def _out_exact(text: str) -> None:
    """Text that must arrive as written (a formatted file): UTF-8 bytes, whatever the
    terminal's encoding, when the stream has a byte layer."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(text)
        return
    sys.stdout.flush()
    buffer.write(text.encode("utf-8"))
    buffer.flush()


def _safe_streams() -> None:
    """Messages never fail to print: a character the terminal's encoding lacks is
    written as a backslash escape instead of raising UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


def write_atomically(path: Path, text: str) -> None:
    """Replace a file's contents, or leave it untouched: the text is encoded first, then
    written to a temporary file beside the target, which is renamed over it."""
    data = text.encode("utf-8")
    target = path.resolve()  # through a symlink: replace the file, keep the link
    mode = target.stat().st_mode & 0o7777
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


WARNINGS_PER_CODE = 20  # warnings of one code shown as text, unless all are asked for


def _load(
    paths: Sequence[str], fmt: str = "text", lints: bool = False, per_code: int | None = None
) -> tuple[Workspace, list[Diagnostic]] | None:
    """The workspace and its warnings (the checker's, then with `lints` the lints',
    engine/lints.py), or None once its diagnostics are reported (as JSON: the array of
    them, api.cli_outcome). The warnings go to stderr as text (with `per_code`, that
    many of each code, the rest counted); with `fmt` json they are the caller's to put
    in its document, every one."""
    try:
        workspace = load(paths)
    except CharterError as exc:
        cli_outcome.diagnostics(exc.diagnostics, exc.sources, fmt)
        return None
    warnings = [*workspace.warnings, *(lint(workspace) if lints else ())]
    warnings.sort(key=Diagnostic.sort_key)
    if warnings and fmt != "json":
        _err(render_all(warnings, workspace.sources, per_code))
        if per_code is not None and max(Counter(w.code for w in warnings).values()) > per_code:
            _err(f"= help: `--all-warnings` shows every warning ({per_code} of each code here)")
    return workspace, warnings


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def cmd_check(args: argparse.Namespace) -> int:
    per_code = None if args.all_warnings else WARNINGS_PER_CODE
    loaded = _load(args.paths, args.format, lints=args.lint, per_code=per_code)
    if loaded is None:
        return 1
    workspace, warnings = loaded
    if args.format == "json":
        _out(to_json(warnings))
    else:
        _out(
            "ok: "
            + ", ".join(
                _count(len(items), noun)
                for items, noun in (
                    (workspace.files, "file"),
                    (workspace.toolsets, "toolset"),
                    (workspace.roles, "role"),
                    (workspace.hooks, "hook"),
                    (workspace.profiles, "profile"),
                    (workspace.tests, "test"),
                )
            )
        )
    return 0


def cmd_fmt(args: argparse.Namespace) -> int:
    read = read_sources(args.paths)  # (bytes as they are: a `\r\n` file is not canonical)
    errors: list[Diagnostic] = [*read.errors]  # an unreadable file stops only itself
    status = 0
    for path, text in read.files:
        try:
            formatted = format_file(parse(text, path))
        except CharterError as exc:
            errors.extend(exc.diagnostics)
            continue
        if len(formatted.encode("utf-8")) > MAX_FILE_BYTES:  # (laid out, a file grows)
            message = (
                f"formatted, the file would be larger than the limit of {MAX_FILE_BYTES} bytes"
            )
            errors.append(replace(too_large(path, MAX_FILE_BYTES), message=message))
            continue
        if args.check:
            if formatted != text:
                _out(f"would reformat {path}")
                status = 1
        elif args.write:
            if formatted != text:
                try:
                    write_atomically(Path(path), formatted)
                except OSError as exc:
                    _err(f"charter: cannot write `{path}`: {exc.strerror or exc}")
                    status = 1
                    continue
                _out(f"reformatted {path}")
        else:
            _out_exact(formatted)
    if errors:
        _err(render_all(errors, read.shown))
        return 1
    return status


def cmd_test(args: argparse.Namespace) -> int:
    loaded = _load(args.paths, args.format)
    if loaded is None:
        return 1
    workspace, warnings = loaded
    snapshot = compile_workspace(workspace)
    results = run_tests(snapshot)
    passed = sum(r.passed for r in results)
    failed = len(results) - passed
    if args.format == "json":
        # (the warnings the text form prints on stderr: `check --format json`'s objects)
        shown = [_shown_result(snapshot, r) for r in results]
        document: dict[str, Any] = {"passed": passed, "failed": failed, "results": shown}
        if args.coverage:
            document["coverage"] = coverage(workspace, results).to_json()
        _out(dumps_text({**document, "warnings": [d.to_json() for d in warnings]}))
        return 1 if failed else 0
    for result in results:
        if result.passed:
            continue
        expect = result.expect
        _out(f'FAIL {expect.span}: test "{result.test}": expect {expect.effect} {expect.tool}')
        _out(f"  {result.failure}")
        for reason in result.decision.reasons:
            where = f" at {reason.location}" if reason.location else ""
            _out(f"  because {reason.message}{where}")
        for error in result.decision.errors:
            _out(f"  condition error at {error.location}: {error.message}")
        for miss in result.decision.near_misses:
            who = f"role `{miss.role}`" if miss.role else miss.message
            _out(f"  near miss: an allow of {who} at {miss.location} (its condition did not hold)")
    _out(f"{passed} passed, {failed} failed")
    if args.coverage:
        _print_coverage(coverage(workspace, results))
    return 1 if failed else 0


def _print_coverage(found: Coverage) -> None:
    _out(
        f"coverage: {found.rules_reached} of {found.rules} rules, "
        f"{found.hooks_reached} of {found.hooks} hooks decided a test's call"
    )
    for part in found.unreached:
        owner = f" (role `{part.name}`)" if part.kind == "rule" else ""
        _out(f"  not reached: {part.location}: {part.text}{owner}")


def _shown_result(snapshot: Snapshot, result: ExpectResult) -> dict[str, Any]:
    """A test's result as `test --format json` prints it: its call's secret arguments
    `[redacted]`, as `decide` prints them."""
    document = result.to_json()
    hidden = hidden_for(snapshot, result.expect.tool, result.decision)
    document["decision"]["args"] = redact(hidden, result.decision.args)
    return document


def _request(args: argparse.Namespace) -> tuple[Snapshot, Request] | None:
    loaded = _load([args.workspace])
    if loaded is None:
        return None
    workspace = loaded[0]
    profile, tool = text_option(args.profile, "profile"), tool_option(args.tool)
    if profile not in workspace.profiles:
        hint = did_you_mean(profile, workspace.profiles) or (
            "profiles: " + ", ".join(sorted(workspace.profiles))
        )
        usage_error(f"no profile `{profile}` in the workspace", hint)
    request = Request(
        profile, tool, json_object(args.args, "args"), json_object(args.context, "context")
    )
    return compile_workspace(workspace), request


def _secrets(snapshot: Snapshot, request: Request, decision: Decision) -> frozenset[str]:
    """The argument names shown `[redacted]`, as the service shows them in `decision`
    (api.service.redaction): what is printed goes where a decision goes, a CI log, a
    ticket, so a seed or a credential given in `--args` is not printed back."""
    return hidden_for(snapshot, request.tool, decision)


def cmd_decide(args: argparse.Namespace) -> int:
    loaded = _request(args)
    if loaded is None:
        return 1
    snapshot, request = loaded
    decision = snapshot.decide(request)
    hidden = _secrets(snapshot, request, decision)
    shown = {**decision.to_json(), "args": redact(hidden, decision.args)}
    _out(dumps_text(shown))
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    loaded = _request(args)
    if loaded is None:
        return 1
    snapshot, request = loaded
    hidden = _secrets(snapshot, request, snapshot.decide(request))
    _, text = explain(*loaded, show=lambda value: dumps_text(redact(hidden, value), indent=False))
    _out(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="charter", description="Charter policy tools")
    parser.add_argument("--version", action="version", version=f"charter {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("check", help="check a workspace for errors")
    p.add_argument("paths", nargs="+")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument(
        "--no-lint",
        dest="lint",
        action="store_false",
        help="skip the lints (W03xx; the solver's take up to 5 s on a large policy)",
    )
    p.add_argument(
        "--all-warnings",
        action="store_true",
        help=f"show every warning (as text: the first {WARNINGS_PER_CODE} of each code, "
        "the rest counted)",
    )
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("fmt", help="print files in canonical form")
    p.add_argument("paths", nargs="+")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if any file would change")
    mode.add_argument("--write", action="store_true", help="rewrite files in place")
    p.set_defaults(func=cmd_fmt)

    p = sub.add_parser("test", help="run the workspace's test blocks")
    p.add_argument("paths", nargs="+")
    p.add_argument(
        "--coverage", action="store_true", help="report the rules and hooks no test reached"
    )
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_test)

    for name, func, text in (
        ("decide", cmd_decide, "decide one call (JSON)"),
        ("explain", cmd_explain, "decide one call, as a readable trace"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("--workspace", required=True)
        p.add_argument("--profile", required=True)
        p.add_argument("--tool", required=True)
        p.add_argument("--args", default="{}", help="the call's arguments as JSON")
        p.add_argument("--context", default=None, help="caller-supplied context as JSON")
        p.set_defaults(func=func)

    _extend(sub)
    return parser


def _extend(sub: Any) -> None:
    """Verbs that live in their own modules register here (fit, tools, diff, serve, bundle,
    log, receipt, webhooks, gateway, import)."""
    import importlib

    for module in (
        "api.cli_fit",
        "api.cli_serve",
        "api.cli_db",
        "api.cli_bundle",
        "api.cli_log",
        "api.cli_webhooks",
        "api.cli_gateway",
        "api.cli_import",
    ):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        mod.register(sub)


def main(argv: Sequence[str] | None = None) -> int:
    _safe_streams()
    parser = build_parser()
    args = parser.parse_args(argv)  # (its own usage errors: text on stderr, exit 2)
    fmt = getattr(args, "format", "text")
    try:
        code: int = args.func(args)
    except CharterError as exc:  # pragma: no cover - each verb renders its own
        return cli_outcome.diagnostics(exc.diagnostics, exc.sources, fmt)
    except BrokenPipeError:
        # The reader went away (`charter tools ... | head`): nothing more is wanted. Point
        # stdout at /dev/null so the interpreter's flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        if os.environ.get("CHARTER_DEBUG") == "1":
            raise
        return cli_outcome.internal(exc, fmt)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
