"""The wheel, as a packager builds it and a user installs it: everything `charter` needs is
in it, and its commands run from a fresh virtualenv with the working directory outside
the checkout.

The wheel is built by pip with build isolation, from a copy of the checkout (so the
build writes nothing into it), and installed into a new virtualenv without system
site-packages by pip with `--no-deps --no-index`. Its dependencies come from this
project's virtualenv, the one `make install` made: the closure of the wheel's own
`Requires-Dist` (extras and markers evaluated, each version checked against its
specifier) is linked into the new site-packages, distribution by distribution, and
nothing else is. So a module the wheel lacks, an import of an undeclared dependency or
a requirement this environment does not meet fails here, and the dependencies are not
resolved and unpacked a second time (a fresh virtualenv with them is 154 MB, z3 59 MB
of it, and takes about 20 s more to make).
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import httpx
import pytest
from packaging.requirements import Requirement

from charter import __version__
from tests.api.conftest import free_port, wait_ready

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("charter", "grammar", "policy", "engine", "api")
LEFT_OUT = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis",
    "*.db", "*.db-*", "*.db.*",
)  # fmt: skip


@pytest.mark.slow
def test_the_wheel_installs_and_serves_outside_the_checkout(tmp_path: Path) -> None:
    wheel = _build(tmp_path)
    _check_contents(wheel)
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    _run([*pip, "install", "--quiet", "--no-deps", "--no-index", str(wheel)], tmp_path)
    _link_dependencies(wheel, python, extras=("client",))
    assert "No broken requirements" in _run([*pip, "check"], tmp_path)

    home = tmp_path / "home"  # the working directory: neither the checkout nor the venv
    workspace = home / "workspace"
    shutil.copytree(ROOT / "fixtures" / "workspace", workspace)
    charter = str(venv / "bin" / "charter")
    assert _run([charter, "--version"], home) == f"charter {__version__}\n"
    assert _run([str(python), "-m", "charter", "--version"], home) == f"charter {__version__}\n"
    # Every module is the wheel's, none the checkout's (a missing one fails to import).
    modules = ("api.cli", "api.http.app", "api.service.core", "engine.fit.check", "policy.store")
    places = _run([str(python), "-c", _WHERE, *modules], home).split()
    assert places and all(Path(p).is_relative_to(venv) for p in places), places
    assert _run([charter, "check", "workspace"], home).startswith("ok: ")
    tests = _run([charter, "test", "workspace"], home)
    assert tests.rstrip().endswith(", 0 failed"), tests
    _serve(charter, python, home)


_WHERE = (
    "import importlib, sys; print(*(importlib.import_module(m).__file__ for m in sys.argv[1:]))"
)


def _run(command: list[str], cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (command, done.stdout, done.stderr)
    return done.stdout


def _build(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=LEFT_OUT, symlinks=True)
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(source)], tmp_path)  # fmt: skip
    (wheel,) = dist.glob("charter-*.whl")
    assert wheel.name == f"charter-{__version__}-py3-none-any.whl"
    return wheel


def _check_contents(wheel: Path) -> None:
    """Each module and data file of the five packages, and nothing from tests or bench."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    wanted = {
        path.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for path in (ROOT / package).rglob("*")
        if path.suffix in (".py", ".lark", ".html", ".css", ".js") or path.name == "py.typed"
    }
    assert {f"{package}/py.typed" for package in PACKAGES} <= wanted
    assert "grammar/charter.lark" in wanted
    assert {"api/console/index.html", "api/console/main.js"} <= wanted  # (the console's)
    assert not wanted - names, sorted(wanted - names)
    top = {name.split("/")[0] for name in names}
    assert top == {*PACKAGES, f"charter-{__version__}.dist-info"}, top


def _requirements(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as archive:
        info = archive.read(f"charter-{__version__}.dist-info/METADATA").decode()
    return [Requirement(text) for text in Parser().parsestr(info).get_all("Requires-Dist") or []]


def _link_dependencies(wheel: Path, python: Path, extras: tuple[str, ...] = ()) -> None:
    """Link each distribution the wheel needs with `extras`, and only those, from this
    environment into the new one's site-packages: its packages, modules, libraries and
    dist-info."""
    site = Path(
        _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], python.parent).strip()
    )  # fmt: skip
    pending = [(req, extra) for req in _requirements(wheel) for extra in ("", *extras)]
    seen: set[str] = set()
    while pending:
        req, extra = pending.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        dist = metadata.distribution(req.name)
        assert req.specifier.contains(dist.version, prereleases=True), (str(req), dist.version)
        for wanted in ["", *req.extras]:
            key = f"{dist.metadata['Name'].lower()}[{wanted}]"
            if key in seen:
                continue
            seen.add(key)
            pending += [(Requirement(r), wanted) for r in dist.requires or []]
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for name in tops:
            target = site / name
            if not target.exists():
                target.symlink_to(Path(str(dist.locate_file(name))))


# The wheel's client (its `client` extra) against its server: a decision and a refusal.
_CLIENT = """
import sys
from charter.client import Client, ProblemError
with Client(sys.argv[1], sys.argv[2]) as charter:
    mail = {"to": "bob@example.com", "subject": "hi", "body": "hello"}
    print(charter.decide("demo-support", "mail.send", mail).effect)
    try:
        charter.list_tools("nobody")
    except ProblemError as refused:
        print(refused.code)
"""


def _serve(charter: str, python: Path, home: Path) -> None:
    """`charter serve` from the wheel: ready, and deciding with the fixtures' policy,
    asked over HTTP and with the wheel's client."""
    port = free_port()
    process = subprocess.Popen(
        [charter, "serve", "--db", "charter.db", "--workspace", "workspace",
         "--host", "127.0.0.1", "--port", str(port)],
        cwd=home, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, process, 30)
        token = (home / "charter.db.admin-token").read_text().strip()
        call = {"agent": "demo-support", "tool": "mail.send",
                "args": {"to": "bob@example.com", "subject": "hi", "body": "hello"}}  # fmt: skip
        answer = httpx.post(
            f"{url}/v1/decisions", json=call, headers={"Authorization": f"Bearer {token}"}
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["effect"] == "allow"
        said = _run([str(python), "-c", _CLIENT, url, token], home)
        assert said == "allow\nagent-not-found\n", said
        # The console's page and scripts, from the wheel's package data.
        for path in ("/console", "/console/main.js"):
            assert httpx.get(f"{url}{path}").status_code == 200, path
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=10)
    assert f"on http://127.0.0.1:{port}" in output, output
