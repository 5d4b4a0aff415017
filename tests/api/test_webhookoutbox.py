"""The webhooks' outbox: which URLs it takes (and what a refusal shows of one), what a
log line shows of a URL, the backoff between attempts, and its claims: one holder of a
row at a time, whatever deliverers claim and settle in whatever order."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.records import Approval
from api.service.webhookoutbox import (
    FAILED,
    KIND,
    LEASE_MS,
    MAX_DOUBLINGS,
    PENDING,
    Backoff,
    Claimed,
    Outbox,
    WebhookConfig,
    config_from_env,
    config_text,
    now_ms,
    shown,
    url_problem,
)
from policy.secrets import Sealer
from policy.store.sqlite import SqliteStore

TAKEN = [
    "http://127.0.0.1:8080/hook",
    "https://hooks.example.com/charter?token=abc",
    "https://[::1]:9000/",
    "http://example.com",
]
REFUSED = [
    ("ftp://example.com/Pq8Zr", "starts with `http://` or `https://`"),
    ("example.com/Pq8Zr", "starts with `http://` or `https://`"),
    ("https:///Pq8Zr", "names a host"),
    ("https://example.com:99999/", "a port from 1 to 65535"),
    ("https://example.com:0/Pq8Zr", "a port from 1 to 65535"),
    ("https://example.com/a#b", "no `#` fragment"),
    ("https://user:Sekr3tPw@example.com/", "no user or password"),
    ("https://example.com/a b", "printable ASCII"),
    ("https://exämple.com/", "printable ASCII"),
    ("https://example.com/" + "a" * 2048, "at most 2048 characters"),
]


@pytest.mark.parametrize("url", TAKEN)
def test_an_http_url_with_a_host_is_taken(url: str) -> None:
    assert url_problem(url) is None


@pytest.mark.parametrize(("url", "wanted"), REFUSED)
def test_a_url_no_webhook_goes_to_is_refused_without_quoting_it(url: str, wanted: str) -> None:
    why = url_problem(url)
    assert why is not None and wanted in why
    assert "Sekr3tPw" not in why and "Pq8Zr" not in why and "example" not in why


def test_a_log_line_shows_a_urls_scheme_host_and_port_alone() -> None:
    assert shown("https://hooks.example.com/charter?token=abc") == "https://hooks.example.com"
    assert shown("http://127.0.0.1:8080/a/b") == "http://127.0.0.1:8080"
    assert shown("https://[::1]:9000/x") == "https://[::1]:9000"


@given(
    first=st.integers(1, 3_600_000),
    failed=st.integers(1, 40),
    draw=st.floats(0.0, 1.0, exclude_max=True),
)
def test_each_delay_is_in_the_upper_half_of_a_doubling_capped_at_512_times_the_first(
    first: int, failed: int, draw: float
) -> None:
    full = first * 2 ** min(failed - 1, MAX_DOUBLINGS)
    delay = Backoff(first).delay_ms(failed, lambda: draw)
    assert full // 2 <= delay <= full
    assert delay <= first * 512


def test_the_workers_read_the_config_the_command_line_made() -> None:
    config = WebhookConfig(("https://a.example.com/x", "http://b:81/"), Backoff(25, 4))
    assert config_from_env(config_text(config)) == config


# ---- claims: one holder at a time, whatever the interleaving ------------------------------

STEPS = st.lists(
    st.tuples(
        st.integers(0, 2),  # which deliverer
        # a claim; a settle of the deliverer's oldest claim; or both at once (an attempt)
        st.sampled_from(["claim", "delivered", "failed", "attempt-failed", "attempt-delivered"]),
        # how far the clock moves first (ms): often exactly to a lease's end or past it
        st.sampled_from([0, 1, LEASE_MS - 1, LEASE_MS]) | st.integers(0, 2 * LEASE_MS),
        st.integers(1, 3),  # how many rows a claim takes at most
    ),
    min_size=1,
    max_size=60,
)


def _approval(n: int) -> Approval:
    return Approval.model_validate(
        {"id": f"ap{n}", "status": "pending", "agent": "a", "tool": "t", "args": {},
         "thread": None, "turn": None, "connection": None, "revision": 1, "reasons": [],
         "management": False, "created_at": 0, "decided_at": None, "decided_by": None,
         "final": None}
    )  # fmt: skip


@pytest.fixture(scope="module")
def outbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outbox]:
    store = SqliteStore(tmp_path_factory.mktemp("outbox") / "o.db")
    config = WebhookConfig(("http://127.0.0.1:9/a", "http://127.0.0.1:9/b"), Backoff(1, 3))
    yield Outbox(store, Sealer(bytes(32)), config)
    store.close()


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=STEPS, rows=st.integers(1, 3))
def test_a_row_is_held_by_one_deliverer_at_a_time_and_settled_once(
    outbox: Outbox, steps: list[tuple[int, str, int, int]], rows: int
) -> None:
    """Deliverers that claim and settle in any order, some dying with a claim (never
    settling it), as the clock moves: a row is claimed only when due and no live claim
    holds it; a settle by a holder whose lease another claim took counts for nothing;
    a row is delivered once at most, tried at most `attempts` times, and a row
    delivered or given up on is never claimed again."""
    store = outbox.store
    with store.atomic():
        for row in list(store.scan(KIND)):
            store.delete(KIND, row.id)
        for n in range(rows):
            outbox.add("approval.opened", _approval(n))
    now = now_ms()  # (the clock the deliverers share, moved by the steps)
    held: dict[int, list[Claimed]] = {0: [], 1: [], 2: []}
    live: dict[str, Claimed] = {}  # row id -> the claim that holds it (its lease ends)
    ended: set[str] = set()  # rows delivered or given up on
    delivered: dict[str, int] = {}
    tries: dict[str, int] = {}

    def take(holder: str, most: int) -> list[Claimed]:
        claimed, later = outbox.claim(holder, now, most)
        assert len(claimed) <= most and (later is None or later >= now)
        for claim in claimed:
            assert claim.id not in ended and int(claim.row["due"]) <= now
            before = live.get(claim.id)
            assert before is None or int(before.row["lease"]) <= now, "two live claims"
            live[claim.id] = claim
        return claimed

    def settle(claim: Claimed, outcome: str) -> None:
        state = outbox.settle(claim, None if outcome == "delivered" else "HTTP 500", now)
        if live.get(claim.id) is not claim:
            assert state is None  # (another took its claim, or it settled already)
            return
        del live[claim.id]
        if outcome == "delivered":
            assert state == "delivered"
            delivered[claim.id] = delivered.get(claim.id, 0) + 1
            ended.add(claim.id)
        else:
            tries[claim.id] = tries.get(claim.id, 0) + 1
            assert state == (FAILED if tries[claim.id] == 3 else "retry")
            if state == FAILED:
                ended.add(claim.id)

    for turn, (who, step, moved, most) in enumerate(steps):
        now += moved
        if step == "claim":
            held[who] += take(f"d{who}.{turn}", most)
        elif step.startswith("attempt-"):
            for claim in take(f"d{who}.{turn}", most):
                settle(claim, step.removeprefix("attempt-"))
        elif held[who]:
            settle(held[who].pop(0), step)
    assert all(count == 1 for count in delivered.values())
    assert all(count <= 3 for count in tries.values())
    left = {row.id for row in store.scan(KIND, tag=PENDING)}
    failed = {row.id for row in store.scan(KIND, tag=FAILED)}
    assert left.isdisjoint(ended) and set(delivered).isdisjoint(left | failed)
    assert len(left) + len(failed) + len(delivered) == rows * 2
