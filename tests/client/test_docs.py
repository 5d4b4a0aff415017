"""The client's examples run as printed, against `charter serve` on fixtures/workspace
(what `make serve` runs): docs/http.md's "The Python client" as doctests, each answer
compared character for character, and the README's example with what it says it prints.
A person approves each approval that opens meanwhile, over HTTP, as the wait's example
needs."""

from __future__ import annotations

import doctest
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from io import StringIO
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import free_port, wait_ready

ROOT = Path(__file__).resolve().parents[2]
SHOWN_URL = "http://127.0.0.1:8080"  # the URL the examples show (`make serve`'s)
ADMIN_TOKEN: dict[str, Path] = {}  # a server's URL -> its admin token's file


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """`charter serve` on a fresh database, `charter.db`, and fixtures/workspace: (its
    URL, the admin token its first start wrote beside it)."""
    db = tmp_path_factory.mktemp("docs") / "charter.db"
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "serve", "--db", str(db), "--workspace",
         str(ROOT / "fixtures" / "workspace"), "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, process, 30)
        ADMIN_TOKEN[url] = Path(f"{db}.admin-token")
        yield url, ADMIN_TOKEN[url].read_text().strip()
    finally:
        process.terminate()
        process.wait(10)


@contextmanager
def a_person_approving(url: str, token: str) -> Iterator[None]:
    """Approves, over HTTP, each approval that is pending, until the block ends."""
    stop = threading.Event()

    def approve() -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as http:
            while not stop.wait(0.05):
                for item in http.get("/v1/approvals?status=pending").json()["items"]:
                    http.post(f"/v1/approvals/{item['id']}/approve")

    thread = threading.Thread(target=approve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)


def _section(doc: str, heading: str) -> str:
    text = (ROOT / doc).read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    level = heading.split(" ")[0]
    end = text.find(f"\n{level} ", start + len(heading) + 2)
    return text[start : end if end >= 0 else len(text)]


def test_the_reference_examples(serving: tuple[str, str]) -> None:
    url, token = serving
    section = _section("docs/http.md", "## The Python client")
    blocks = re.findall(r"```pycon\n(.*?)```", section, re.S)
    assert len(blocks) >= 7, "the client's examples have moved"
    text = "\n".join(blocks).replace(SHOWN_URL, url)
    test = doctest.DocTestParser().get_doctest(text, {"token": token}, "the Python client",
                                               "docs/http.md", 0)  # fmt: skip
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report = StringIO()
    with a_person_approving(url, token):
        runner.run(test, out=report.write)
    assert runner.failures == 0, report.getvalue().replace(url, SHOWN_URL)
    assert runner.tries >= 20


def test_the_readme_example(serving: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    url, token = serving
    section = _section("README.md", "### From Python")
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    said = re.findall(r"print\(.*\)\s+# (.*)", code)
    assert said, "the README's example prints nothing it shows"
    printed = StringIO()
    monkeypatch.chdir(ADMIN_TOKEN[url].parent)  # (where the example reads the token)
    with redirect_stdout(printed), a_person_approving(url, token):
        exec(code.replace(SHOWN_URL, url), {})
    assert printed.getvalue().splitlines() == said
