"""A first start on a store with no file to make under another name (a server's): the
workspace loaded, then the demo seed and the admin token in one of the store's
transactions (api/cli_serve.py `prepare_on_server`, api/first_start.py
`build_on_server`). Run here on a real SQLite store opened through `open_store`, the
transaction being the store's own."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from api.cli_serve import (
    ADMIN_ISSUED,
    DEMO_AGENT,
    issue_admin_token,
    load_workspace,
    prepare_on_server,
    seed_demo,
)
from api.first_start import build_on_server
from api.service.core import Service
from policy.secrets import Sealer
from policy.store.open import open_store
from tests.api.start_runs import workspace


class Killed(Exception):
    """The start stopped before its transaction's COMMIT."""


def test_a_first_start_stopped_before_its_commit_is_finished_by_the_next(
    tmp_path: Path,
) -> None:
    """Stopped after the seed and the token's file but before the COMMIT, a first start
    leaves the policy it loaded, no demo agent, no token stored, no token file, and
    nothing said; the next start seeds the demo and issues the token, says both, and the
    token in the file is the one it printed."""
    policy = str(workspace(tmp_path))
    prefix = str(tmp_path / "node")
    token_file = Path(f"{prefix}.admin-token")
    key = Sealer(os.urandom(32))
    store = open_store(tmp_path / "x.db")
    said: list[str] = []
    try:
        service = Service(store, key)
        load_workspace(service, policy, said.append)

        def stopped(say: Callable[[str], None]) -> None:
            seed_demo(service, say)
            issue_admin_token(service, prefix, say)
            assert token_file.exists()  # (written inside the transaction)
            raise Killed

        with pytest.raises(Killed):
            build_on_server(store, token_file, stopped, said.append)
        assert said == [f"policy: revision 1 from {policy}"]  # (no token that is not stored)
        assert (store.latest_revision(), store.get("agents", DEMO_AGENT)) == (1, None)
        assert not store.get_meta(ADMIN_ISSUED) and not token_file.exists()
    finally:
        store.close()

    store = open_store(tmp_path / "x.db")
    told: list[str] = []
    try:
        prepare_on_server(Service(store, key), prefix, policy, told.append)
        assert told[0] == f"policy: revision 1 kept ({policy} has not changed since it was loaded)"
        assert any(line.startswith(f"demo agent: {DEMO_AGENT}") for line in told)
        assert store.get("agents", DEMO_AGENT) is not None and store.get_meta(ADMIN_ISSUED)
        token = token_file.read_text().strip()
        assert any(token in line for line in told)
        assert token_file.stat().st_mode & 0o777 == 0o600
        again: list[str] = []
        prepare_on_server(Service(store, key), prefix, policy, again.append)
        assert len(again) == 1 and token_file.read_text().strip() == token  # (done once)
    finally:
        store.close()
