"""Several `charter serve` nodes on one PostgreSQL database, each a real process on
loopback: an upload on one decides on every node within a second, a revoked token stops
at once everywhere, the decision log stays exactly-once and gap-free across nodes and
uploads, a budget holds under spending from every node, and a node killed with SIGKILL
mid-load loses nothing it answered."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import free_port, wait_ready
from tests.pgserver import PgServer

ROOT = Path(__file__).resolve().parents[2]
WORKSPACE = ROOT / "fixtures" / "workspace"
CALL = {"agent": "demo-support", "tool": "mail.send",
        "args": {"to": "bob@example.com", "subject": "hi", "body": "hello"}}  # fmt: skip


@dataclass
class Node:
    url: str
    process: subprocess.Popen[bytes]


@dataclass
class Cluster:
    db: str
    key: Path
    nodes: list[Node]
    admin: dict[str, str]

    def start(self) -> Node:
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "api.cli", "serve", "--db", self.db, "--key-file",
             str(self.key), "--workspace", str(WORKSPACE), "--port", str(port),
             "--workers", "1"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )  # fmt: skip
        node = Node(f"http://127.0.0.1:{port}", process)
        wait_ready(node.url, process, 60)
        self.nodes.append(node)
        return node


@contextmanager
def _cluster(server: PgServer, root: Path) -> Iterator[Cluster]:
    """Two nodes on a new database, the first one started first (it loads the workspace
    and seeds the demo; the second finds them)."""
    found = Cluster(server.database(), root / "charter.key", [], {})
    try:
        found.start()
        token = (root / "charter.admin-token").read_text().strip()
        found.admin = {"Authorization": f"Bearer {token}"}
        found.start()
        yield found
    finally:
        for node in found.nodes:
            node.process.kill()
            node.process.wait(20)


@pytest.fixture(scope="module")
def cluster(pg_server: PgServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One pair of nodes for the tests that leave both running (each test's own decisions,
    agents and revisions add to what the others made, and none of them minds)."""
    with _cluster(pg_server, tmp_path_factory.mktemp("nodes")) as found:
        yield found


def _files(extra: str) -> list[dict[str, str]]:
    files = [
        {"path": str(path.relative_to(WORKSPACE)), "text": path.read_text()}
        for path in sorted(WORKSPACE.rglob("*.charter"))
    ]
    return [*files, {"path": "extra.charter", "text": f"# {extra}\n"}]


def _log(url: str, headers: dict[str, str]) -> list[dict[str, Any]]:
    """Every decision of the log, in order, a page at a time."""
    rows: list[dict[str, Any]] = []
    after = 0
    with httpx.Client(base_url=url, headers=headers, timeout=30) as http:
        while True:
            page = http.get("/v1/decisions", params={"after_seq": after})
            assert page.status_code == 200, page.text
            found = page.json()["decisions"]
            if not found:
                return rows
            rows += found
            after = int(page.json()["next_after_seq"])


def test_an_upload_on_one_node_decides_on_every_node_within_a_second(cluster: Cluster) -> None:
    a, b = cluster.nodes
    with httpx.Client(headers=cluster.admin, timeout=30) as http:
        before = http.post(f"{b.url}/v1/decisions", json=CALL).json()["revision"]
        for round_ in range(3):
            put = http.put(f"{a.url}/v1/policy", json={"files": _files(f"round {round_}")})
            assert put.status_code == 201, put.text
            revision = put.json()["revision"]
            assert revision > before
            uploaded = time.monotonic()
            while True:
                seen = http.post(f"{b.url}/v1/decisions", json=CALL).json()["revision"]
                if seen == revision:
                    break
                assert time.monotonic() - uploaded < 1.0, (seen, revision)
                time.sleep(0.01)
            before = revision


def test_a_token_revoked_on_one_node_stops_at_once_on_every_node(cluster: Cluster) -> None:
    a, b = cluster.nodes
    with httpx.Client(headers=cluster.admin, timeout=30) as http:
        issued = http.post(f"{a.url}/v1/tokens", json={"scope": "decide"})
        assert issued.status_code == 201, issued.text
        token = issued.json()
        headers = {"Authorization": f"Bearer {token['token']}"}
        assert http.post(f"{b.url}/v1/decisions", json=CALL, headers=headers).status_code == 200
        revoked = http.delete(f"{a.url}/v1/tokens/{token['id']}")
        assert revoked.status_code == 204, revoked.text
        # The very next request on the other node: no second to wait.
        refused = http.post(f"{b.url}/v1/decisions", json=CALL, headers=headers)
        assert refused.status_code == 401, refused.text


def test_clients_spread_over_nodes_log_every_decision_once_and_gap_free(
    cluster: Cluster,
) -> None:
    answered: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client(number: int) -> None:
        url = cluster.nodes[number % 2].url
        with httpx.Client(base_url=url, headers=cluster.admin, timeout=30) as http:
            for _ in range(500):
                got = http.post("/v1/decisions", json=CALL)
                with lock:
                    if got.status_code == 200:
                        answered.append(int(got.json()["seq"]))
                    else:
                        errors.append(got.text)

    def uploads(stop: threading.Event) -> None:
        with httpx.Client(headers=cluster.admin, timeout=30) as http:
            for round_ in range(100):
                if stop.wait(0.5):
                    return
                node = cluster.nodes[round_ % 2]
                put = http.put(f"{node.url}/v1/policy", json={"files": _files(f"up {round_}")})
                with lock:
                    if put.status_code != 201:
                        errors.append(put.text)

    stop = threading.Event()
    uploader = threading.Thread(target=uploads, args=(stop,))
    uploader.start()
    clients = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join(240)
    stop.set()
    uploader.join(30)
    assert not errors, errors[:3]
    assert len(answered) == 8 * 500 and len(set(answered)) == len(answered)
    for node in cluster.nodes:
        seqs = [int(row["seq"]) for row in _log(node.url, cluster.admin)]
        assert seqs == list(range(1, len(seqs) + 1))  # gap-free, each once
        assert set(answered) <= set(seqs)


def test_spending_from_every_node_never_passes_the_cap(cluster: Cluster) -> None:
    a, _ = cluster.nodes
    with httpx.Client(headers=cluster.admin, timeout=30) as http:
        demo = http.get(f"{a.url}/v1/agents/demo-support").json()
        made = http.post(
            f"{a.url}/v1/agents",
            json={"name": "spender", "profile": "finance-desk", "identity": demo["identity"]},
        )
        assert made.status_code == 201, made.text
    # finance-desk: 200 USD per 24h. At 7 USD a call, 28 calls fit and the 29th does not.
    call = {**CALL, "agent": made.json()["id"], "expected_cost": "7"}
    effects: list[str] = []
    lock = threading.Lock()

    def spend(number: int) -> None:
        url = cluster.nodes[number % 2].url
        with httpx.Client(base_url=url, headers=cluster.admin, timeout=30) as http:
            for _ in range(8):
                got = http.post("/v1/decisions", json=call)
                assert got.status_code == 200, got.text
                with lock:
                    effects.append(got.json()["effect"])

    threads = [threading.Thread(target=spend, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(effects) == 64
    assert effects.count("allow") == 28, effects
    assert effects.count("deny") == 36


def test_a_node_killed_mid_load_loses_nothing_it_answered(
    pg_server: PgServer, tmp_path: Path
) -> None:
    with _cluster(pg_server, tmp_path) as cluster:
        _kill_mid_load(cluster)


def _kill_mid_load(cluster: Cluster) -> None:
    a, b = cluster.nodes
    answered: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()

    def client(url: str) -> None:
        while not stop.is_set():
            try:
                with httpx.Client(base_url=url, headers=cluster.admin, timeout=10) as http:
                    while not stop.is_set():
                        got = http.post("/v1/decisions", json=CALL)
                        if got.status_code == 200:
                            with lock:
                                answered.append(int(got.json()["seq"]))
            except httpx.HTTPError:
                return  # (the node is gone: what it answered is counted)

    threads = [threading.Thread(target=client, args=(node.url,)) for node in (a, b) * 3]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    os.kill(b.process.pid, signal.SIGKILL)
    b.process.wait(20)
    time.sleep(0.5)
    stop.set()
    for thread in threads:
        thread.join(30)
    seqs = [int(row["seq"]) for row in _log(a.url, cluster.admin)]
    assert seqs == list(range(1, len(seqs) + 1))
    assert len(answered) > 100 and set(answered) <= set(seqs)
    # The killed node comes back and serves the same log.
    again = cluster.start()
    assert [int(row["seq"]) for row in _log(again.url, cluster.admin)][: len(seqs)] == seqs
