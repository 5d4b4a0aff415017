"""The webhooks' outbox: which URLs it takes (and what a refusal shows of one), what a
log line shows of a URL, and the backoff between attempts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.service.webhookoutbox import (
    MAX_DOUBLINGS,
    Backoff,
    WebhookConfig,
    config_from_env,
    config_text,
    shown,
    url_problem,
)

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
