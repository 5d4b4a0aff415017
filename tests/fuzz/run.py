"""`make fuzz MINUTES=N`: every fuzz target of docs/review.md within N minutes of wall time,
then a report in `fuzz-report/` (report.md, report.json).

    python -m tests.fuzz.run --minutes 10 [--examples 20000] [--out fuzz-report]

Two lanes run side by side, one a core, each for the whole budget less a margin for
the report:

- the hypothesis properties: every test hypothesis drives, in one pytest process under
  `tests/fuzz/budget.py` (each its share of the time; at most `--examples` examples),
  under coverage.py (lines reached, per property and in all; `--no-coverage` for more
  examples in the same time);
- the coverage-guided targets of tests/fuzz/targets.py, one after the other under atheris
  (`tests/fuzz/atheris_main.py`), each an equal share, then schemathesis against a live
  `charter serve` (the last share).

Every target runs in a process of its own, stopped by its own time limit and killed
past it, so one that hangs or crashes costs its share and no more. A failure found is
saved as a regression that `make test` replays: an atheris input, made small
(tests/fuzz/minimize.py), in tests/fuzz/regressions/<target>/; a hypothesis property's
shrunk example in its example database, tests/fuzz/regressions/hypothesis
(tests/conftest.py); a schemathesis request in tests/fuzz/regressions/http-api/.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.fuzz.report import write_report
from tests.fuzz.targets import REGRESSIONS, ROOT, TARGETS, saved_inputs

PY = sys.executable
PACKAGES = ("grammar", "policy", "engine", "api")
REPORT_MARGIN = 20  # seconds kept for the report and stragglers' shutdown
KILL_GRACE = 15  # past its own limit, a target's process is killed
SCHEMATHESIS_CHECKS = (
    "not_a_server_error,status_code_conformance,content_type_conformance,"
    "response_headers_conformance,response_schema_conformance,refusal_writes_nothing"
)


@dataclass
class Result:
    name: str
    kind: str  # "hypothesis", "atheris" or "schemathesis"
    checks: str
    runs: int = 0
    unit: str = "examples"
    coverage: str = ""
    seconds: float = 0.0
    outcome: str = "passed"  # passed, stopped (by the budget), failed, error
    failures: list[dict[str, Any]] = field(default_factory=list)
    notes: str = ""


def _env(**more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CHARTER_SECRET_KEY"}
    env["PYTHONPATH"] = str(ROOT) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    env.update(more)
    return env


def _run(cmd: list[str], seconds: float, log: Path, env: dict[str, str]) -> int | None:
    """Run `cmd` in a session of its own, its output to `log`; killed (and None) past
    `seconds` + KILL_GRACE: first SIGTERM to its group, then SIGKILL."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            return proc.wait(timeout=max(1.0, seconds + KILL_GRACE))
        except subprocess.TimeoutExpired:
            _stop(proc)
            return None


def _stop(proc: subprocess.Popen[Any]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


# ---- hypothesis ---------------------------------------------------------------------------


def _coverage(data_file: Path) -> tuple[str, dict[str, int]]:
    """The lane's line coverage of the service's packages, and lines reached per test
    (each test's context, named by tests/fuzz/budget.py as it starts)."""
    try:
        import coverage
    except ImportError:
        return "not measured (coverage.py missing)", {}
    per_test: dict[str, int] = {}
    cov = coverage.Coverage(data_file=str(data_file))
    cov.load()
    data = cov.get_data()
    for path in data.measured_files():
        for contexts in data.contexts_by_lineno(path).values():
            for context in contexts:
                per_test[context] = per_test.get(context, 0) + 1
    try:
        with open(os.devnull, "w") as sink:
            percent = cov.report(file=sink)
    except coverage.exceptions.NoDataError:
        return "no data", per_test
    return f"{percent:.1f}% of the lines of {', '.join(PACKAGES)}", per_test


def hypothesis_lane(seconds: float, examples: int, out: Path, measure: bool) -> list[Result]:
    stats = out / "hypothesis-stats.json"
    log = out / "logs" / "hypothesis.log"
    data_file = out / "hypothesis.coverage"
    rc = out / "coveragerc"
    rc.write_text(f"[run]\nsource = {', '.join(PACKAGES)}\ndata_file = {data_file}\n")
    env = _env(
        HYPOTHESIS_PROFILE="custom",
        HYPOTHESIS_EXAMPLES=str(examples),
        CHARTER_FUZZ_SECONDS=str(max(10, int(seconds))),
        CHARTER_FUZZ_STATS=str(stats),
        CHARTER_FUZZ_SAVE="1",
        CHARTER_TEST_UPLOADS="500",
    )
    pytest = ["-m", "pytest", "-p", "tests.fuzz.budget", "-p", "no:cacheprovider", "-q",
              "-p", "no:randomly", "--tb=short", "tests"]  # fmt: skip
    head = [PY, "-m", "coverage", "run", f"--rcfile={rc}"] if measure else [PY]
    started = time.monotonic()
    code = _run(head + pytest, seconds, log, env)
    spent = time.monotonic() - started
    found: dict[str, Any] = json.loads(stats.read_text()) if stats.exists() else {}
    total, per_test = (
        _coverage(data_file) if measure and data_file.exists() else ("not measured", {})
    )
    results = []
    for nodeid, entry in found.items():
        failed = entry.get("outcome") == "failed"
        result = Result(
            name=nodeid,
            kind="hypothesis",
            checks=entry.get("doc") or "",
            runs=entry.get("examples", 0),
            unit="examples",
            coverage=f"{per_test[nodeid]} lines" if nodeid in per_test else "",
            seconds=entry.get("seconds", 0.0),
            outcome="failed"
            if failed
            else "stopped"
            if entry.get("stopped_by_budget")
            else "passed",
        )
        if entry.get("outcome") == "running":
            result.outcome = "stopped"
            result.notes = "killed at the lane's time limit in its last example"
        if failed:
            result.failures.append({
                "summary": _falsifying(entry.get("failure", "")),
                "reproduction": entry.get("failure", ""),
                "saved_as": "tests/fuzz/regressions/hypothesis (its example database: the "
                            "test replays it first)",
            })  # fmt: skip
        results.append(result)
    lane = Result(
        name="hypothesis properties (all)",
        kind="hypothesis",
        checks="every hypothesis property of tests/: docs/properties.md, docs/fit.md",
        runs=sum(r.runs for r in results),
        coverage=total,
        seconds=round(spent, 1),
        outcome="failed" if any(r.failures for r in results) else "passed",
        notes=f"pytest exit {code}"
        if code not in (0, None)
        else ("killed at its limit" if code is None else ""),
    )
    return [lane, *results]


def _falsifying(text: str) -> str:
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.strip().startswith("Falsifying example"):
            return "\n".join(lines[index : index + 12])
    return "\n".join(lines[-12:])


# ---- atheris ------------------------------------------------------------------------------

_STATUS = re.compile(r"#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+)")
_DONE = re.compile(r"Done (\d+) runs in")
_UNIT = re.compile(r"Test unit written to (\S+)")


def atheris_target(name: str, seconds: float, out: Path) -> Result:
    target = TARGETS[name]
    result = Result(name=name, kind="atheris", checks=target.checks, unit="executions")
    corpus, seeds = out / "corpus" / name, out / "seeds" / name
    crashes = out / "crashes" / name
    for folder in (corpus, seeds, crashes):
        folder.mkdir(parents=True, exist_ok=True)
    inputs = target.seeds() + [p.read_bytes() for p in saved_inputs(name)]
    for data in inputs:
        (seeds / hashlib.sha1(data).hexdigest()).write_bytes(data)
    max_len = max(4096, *(len(d) for d in inputs))
    log = out / "logs" / f"{name}.log"
    started = time.monotonic()
    until = started + seconds
    signatures: set[str] = set()
    cov = ft = 0
    while until - time.monotonic() > 8 and len(result.failures) < 3:
        left = until - time.monotonic()
        mark = log.stat().st_size if log.exists() else 0
        cmd = [PY, "-m", "tests.fuzz.atheris_main", name, f"-max_total_time={int(left - 4)}",
               "-print_final_stats=1", f"-artifact_prefix={crashes}/", "-timeout=30",
               "-rss_limit_mb=4096", f"-max_len={max_len}", str(corpus), str(seeds)]  # fmt: skip
        code = _run(cmd, left, log, _env())
        text = log.read_bytes()[mark:].decode("utf-8", "replace")
        statuses = _STATUS.findall(text)
        if statuses:
            cov, ft = int(statuses[-1][1]), int(statuses[-1][2])
        done = _DONE.findall(text)
        result.runs += int(done[-1]) if done else int(statuses[-1][0]) if statuses else 0
        if code is None:
            result.notes = "killed past its limit"
            break
        unit = _UNIT.findall(text)
        if code == 0 or not unit:
            if code != 0:
                result.outcome = "error"
                result.notes = f"exit {code} without a failing input: see logs/{name}.log"
            break
        failure = _minimized(
            name, Path(unit[-1]), min(45.0, max(5.0, until - time.monotonic())), out
        )
        if failure["signature"] in signatures:  # found again: the rest would be the same
            break
        signatures.add(failure["signature"])
        result.failures.append(failure)
    result.seconds = round(time.monotonic() - started, 1)
    result.coverage = f"{cov} edges, {ft} features (libFuzzer, in {', '.join(target.packages)})"
    if result.failures:
        result.outcome = "failed"
    return result


def _minimized(name: str, crash: Path, seconds: float, out: Path) -> dict[str, Any]:
    small = crash.with_name(crash.name + ".min")
    log = out / "logs" / f"{name}.minimize.log"
    mark = log.stat().st_size if log.exists() else 0
    _run([PY, "-m", "tests.fuzz.minimize", name, str(crash), str(small), str(seconds)],
         seconds + 30, log, _env())  # fmt: skip
    text = log.read_bytes()[mark:].decode("utf-8", "replace")
    data = small.read_bytes() if small.exists() else crash.read_bytes()
    digest = hashlib.sha1(data).hexdigest()[:16]
    saved = REGRESSIONS / name / digest
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_bytes(data)
    signature = text.splitlines()[0] if text.strip() else "unknown"
    return {
        "signature": signature,
        "summary": signature,
        "reproduction": "input (" + str(len(data)) + " bytes): " + repr(data[:2000])
                        + "\n" + text[-4000:],
        "saved_as": str(saved.relative_to(ROOT)),
    }  # fmt: skip


# ---- schemathesis -------------------------------------------------------------------------


def schemathesis_target(seconds: float, out: Path) -> Result:
    result = Result(
        name="http-api (schemathesis)",
        kind="schemathesis",
        checks="every operation of a live `charter serve`'s /openapi.json, stateful (links "
        "inferred): no 5xx; status, content type, headers and body as the document says; "
        "a refusal is catalogued problem+json and writes nothing",
        unit="test cases",
    )
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="charter-fuzz-"))
    db = work / "charter.db"
    server_log = out / "logs" / "charter-serve.log"
    cmd = [PY, "-m", "api.cli", "serve", "--db", str(db), "--workspace",
           str(ROOT / "fixtures" / "workspace"), "--host", "127.0.0.1", "--port", "0"]  # fmt: skip
    with server_log.open("wb") as errors:
        server = subprocess.Popen(
            cmd, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=errors, text=True,
            start_new_session=True,
        )  # fmt: skip
    try:
        url = _served(server, 60)
        token = Path(f"{db}.admin-token").read_text().strip()
        reports = out / "schemathesis"
        shutil.rmtree(reports, ignore_errors=True)
        left = seconds - (time.monotonic() - started)
        st = Path(PY).with_name("schemathesis")
        config = _schemathesis_config(out / "schemathesis.toml")
        run = [str(st), "--config-file", str(config), "run", f"{url}/openapi.json", "-H", f"Authorization: Bearer {token}",
               "--max-time", str(max(1, int(left - 8))), "--workers", "1",
               "--checks", SCHEMATHESIS_CHECKS, "--report", "json,ndjson",
               "--report-dir", str(reports), "--no-color"]  # fmt: skip
        env = _env(SCHEMATHESIS_HOOKS="tests.fuzz.schema_hooks", CHARTER_FUZZ_DB=str(db))
        code = _run(run, left, out / "logs" / "schemathesis.log", env)
        _read_schemathesis(result, reports, code)
    except Exception as exc:  # the server did not start: an error of the run, reported
        result.outcome = "error"
        result.notes = f"{type(exc).__name__}: {exc}"
    finally:
        _stop(server)
        if server.stdout is not None:
            server.stdout.close()
        shutil.rmtree(work, ignore_errors=True)
    tracebacks = server_log.read_text(errors="replace").count("Traceback")
    if tracebacks:
        result.notes += f" the server logged {tracebacks} traceback(s): logs/charter-serve.log"
        result.outcome = "failed"
    result.seconds = round(time.monotonic() - started, 1)
    return result


def _schemathesis_config(path: Path) -> Path:
    """schemathesis's settings: half the time, a path's `{id}` or `{name}` and a body's
    `profile`, `agent` and `tool` (a call's, in a batch too) is one that exists (the
    fixtures' workspace's declarations, the demo agent and connections the first start
    makes), so that requests reach past the 404s."""
    from engine.check import load

    ws = load(sorted((ROOT / "fixtures" / "workspace").glob("*.charter")))
    names = sorted({*ws.roles, *ws.profiles, *ws.hooks, *ws.toolsets})
    # (Not the demo agent: a path's id is deleted as often as read, and the decisions
    # name it in their bodies.)
    ids = ["demo-github", "demo-gmail", "demo-mail", *names]
    path.write_text(
        f"[dictionaries.ids]\nvalues = {json.dumps(ids)}\n"
        f"[dictionaries.profiles]\nvalues = {json.dumps(sorted(ws.profiles))}\n"
        f"[dictionaries.tools]\nvalues = {json.dumps(sorted(ws.tools))}\n"
        '[dictionaries.agents]\nvalues = ["demo-support"]\n'
        "[parameters]\n"
        '"body.agent" = { dictionary = "agents", probability = 0.5 }\n'
        '"body.tool" = { dictionary = "tools", probability = 0.5 }\n'
        '"body.calls[*].agent" = { dictionary = "agents", probability = 0.5 }\n'
        '"body.calls[*].tool" = { dictionary = "tools", probability = 0.5 }\n'
        '"path.id" = { dictionary = "ids", probability = 0.5 }\n'
        '"path.name" = { dictionary = "ids", probability = 0.5 }\n'
        '"body.profile" = { dictionary = "profiles", probability = 0.5 }\n'
    )
    return path


def _served(server: subprocess.Popen[str], seconds: float) -> str:
    import httpx

    assert server.stdout is not None
    for line in server.stdout:
        found = re.match(r"serving .* on (http://\S+) ", line)
        if found:
            url = found.group(1)
            break
    else:
        raise RuntimeError("charter serve did not start: see logs/charter-serve.log")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz").status_code == 200:
                return url
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError("charter serve was not ready in time")


def _read_schemathesis(result: Result, reports: Path, code: int | None) -> None:
    summaries = sorted(reports.glob("*.json"))
    if not summaries:
        result.outcome = "error"
        result.notes = f"no report (exit {code}): see logs/schemathesis.log"
        return
    summary = json.loads(summaries[-1].read_text())
    cases = summary.get("test_cases", {})
    ops = summary.get("operations", {})
    result.runs = cases.get("generated", 0)
    phases = ", ".join(f"{k} {v.get('status')}" for k, v in summary.get("phases", {}).items())
    result.coverage = f"{ops.get('tested', 0)}/{ops.get('total', 0)} operations; phases: {phases}"
    if summary.get("errors"):
        result.outcome = "error"
        result.notes = json.dumps(summary["errors"])[:1000]
    for events in sorted(reports.glob("*.ndjson")):
        for line in events.read_text().splitlines():
            event = json.loads(line)
            finished = event.get("ScenarioFinished")
            if finished and finished.get("status") == "failure":
                result.failures += _scenario_failures(finished["recorder"])
    if result.failures:
        result.outcome = "failed"
    if code is None:
        result.notes += " killed past its limit"


def _scenario_failures(recorder: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for case_id, checks in recorder.get("checks", {}).items():
        failed = [c for c in checks if c.get("status") == "failure"]
        if not failed:
            continue
        exchange = recorder.get("interactions", {}).get(case_id) or {}
        request = exchange.get("request", {})
        response = exchange.get("response") or {}
        body = (request.get("body") or {}).get("$base64")
        path = re.sub(r"^https?://[^/]+", "", request.get("uri", ""))
        saved = {
            "method": request.get("method"),
            "path": path,
            "content_type": (request.get("headers", {}).get("Content-Type") or [None])[0],
            "body_base64": body,
            "status": response.get("status_code"),
            "checks": sorted({c["name"] for c in failed}),
        }
        digest = hashlib.sha1(json.dumps(saved, sort_keys=True).encode()).hexdigest()[:16]
        where = REGRESSIONS / "http-api" / f"{digest}.json"
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text(json.dumps(saved, indent=1) + "\n")
        answer = (response.get("content") or {}).get("$base64")
        messages = "; ".join(
            c["failure_info"]["failure"].get("title", "") + ": "
            + c["failure_info"]["failure"].get("message", "") for c in failed
        )  # fmt: skip
        found.append({
            "summary": f"{saved['method']} {path} -> {saved['status']}: {messages}"[:600],
            "reproduction": json.dumps(saved) + "\nanswer: "
                            + (base64.b64decode(answer).decode("utf-8", "replace")[:1500] if answer else ""),
            "saved_as": str(where.relative_to(ROOT)),
        })  # fmt: skip
    return found


# ---- the run ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--examples", type=int, default=20_000)
    parser.add_argument("--out", type=Path, default=ROOT / "fuzz-report")
    parser.add_argument("--no-coverage", action="store_true")
    args = parser.parse_args(argv)
    out: Path = args.out.resolve()
    for stale in ("logs", "crashes", "seeds", "schemathesis"):
        shutil.rmtree(out / stale, ignore_errors=True)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    began = time.time()
    budget = args.minutes * 60 - REPORT_MARGIN
    if budget < 60:
        parser.error("--minutes: at least 2 (each target needs some seconds)")
    shares = len(TARGETS) + 1  # the atheris targets, then schemathesis
    lane_a: list[Result] = []

    def first_lane() -> None:
        lane_a.extend(hypothesis_lane(budget, args.examples, out, not args.no_coverage))

    thread = threading.Thread(target=first_lane)
    thread.start()
    lane_b: list[Result] = []
    lane_until = time.monotonic() + budget
    for index, name in enumerate(TARGETS):
        share = (lane_until - time.monotonic()) / (shares - index)
        print(f"== atheris {name}: {share:.0f} s", flush=True)
        lane_b.append(atheris_target(name, share, out))
    left = lane_until - time.monotonic()
    print(f"== schemathesis: {left:.0f} s", flush=True)
    lane_b.append(schemathesis_target(left, out))
    print("== hypothesis properties: finishing", flush=True)
    thread.join()
    results = lane_a + lane_b
    meta = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(began)),
        "minutes": args.minutes,
        "seconds": round(time.time() - began, 1),
        "examples_per_property": args.examples,
        "python": sys.version.split()[0],
    }
    write_report(out, meta, [asdict(r) for r in results])
    failed = [r for r in results if r.outcome in ("failed", "error")]
    print((out / "summary.txt").read_text())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
