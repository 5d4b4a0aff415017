"""The console in a real Chromium (Debian's `chromium`, driven by Playwright) against a
real server on loopback: sign in, an agent's call that pauses appears on the approvals
page without a reload, a person approves it and the agent's waiting long poll gets the
final decision, the log's filter finds it and it opens to its trace, a thread's call
shows the thread's `max_cost` on its card, the policy playground shows a typo's
diagnostic at its line and decides a call of its draft, an upload the checker refuses
shows its diagnostic under its line and a good one its new revision and diff, and
another origin's requests are refused.

One browser for the module. The screenshots of each page go to a temporary folder, or
to docs/console/ (what the README shows) under `CHARTER_SCREENSHOTS=1`
(`make screenshots`)."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.http.app import create_app
from api.http.console import CSP
from api.http.session import COOKIE
from tests.api.conftest import Harness, LiveServer, expect, make_harness

playwright_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Without the background-networking flags, Chromium's own requests on a closed network
# hold up its start; the rest keep a headless run quiet and quick.
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
ROOT = Path(__file__).resolve().parents[2]
WAIT_MS = 10_000

if not Path(CHROMIUM).exists():
    if os.geteuid() == 0:  # (CI: `make install` installs it as root; its absence is a bug)
        raise RuntimeError(f"no Chromium at {CHROMIUM}: run `make postgres` as root")
    pytest.skip(
        "no Chromium (install Debian's `chromium`: `make install` does as root)",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get("CHARTER_SCREENSHOTS") == "1":
        folder = ROOT / "docs" / "console"
        folder.mkdir(exist_ok=True)
        return folder
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Harness, str]]:
    harness = make_harness(tmp_path_factory.mktemp("console"))
    with LiveServer(create_app(harness.service)) as url:
        yield harness, url
    harness.service.store.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


def _signed_in(browser: Any, url: str, token: str) -> Any:
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(f"{url}/console")
    page.fill("#token", token)
    page.click("#sign-in-form button[type=submit]")
    page.wait_for_selector("#nav:not([hidden])")
    return page


def _pause(
    url: str, token: str, amount: int, cost: str | None = None, thread: str | None = None
) -> dict[str, Any]:
    call: dict[str, Any] = {
        "agent": "a1", "tool": "billing.refund", "args": {"amount": amount, "reason": "x"}
    }  # fmt: skip
    if cost is not None:
        call["expected_cost"] = cost
    if thread is not None:
        call["thread"] = thread
    answer = httpx.post(
        f"{url}/v1/decisions", json=call, headers={"Authorization": f"Bearer {token}"}
    )
    assert answer.status_code == 200, answer.text
    decision: dict[str, Any] = answer.json()
    assert decision["effect"] == "pause" and decision["approval_id"], decision
    return decision


def test_a_paused_call_is_approved_in_the_console_and_found_in_the_log(
    world: tuple[Harness, str], browser: Any, shots: Path
) -> None:
    harness, url = world
    csp_errors: list[str] = []
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.on("console", lambda m: csp_errors.append(m.text) if "Content Security" in m.text else 0)

    # Sign in: a bad token is refused plainly; the admin's opens the approvals page.
    answer = page.goto(f"{url}/console")
    assert answer is not None and answer.headers["content-security-policy"] == CSP
    page.wait_for_selector("#sign-in:not([hidden])")
    page.fill("#token", "chr_not-a-token")
    page.click("#sign-in-form button[type=submit]")
    page.wait_for_selector("#sign-in-error:has-text('not valid')")
    page.fill("#token", "")
    page.screenshot(path=str(shots / "sign-in.png"))
    page.fill("#token", harness.admin)
    page.click("#sign-in-form button[type=submit]")
    page.wait_for_selector("#stream-status.live")
    # The token is in no readable place: not the page, not the scripts' cookies.
    assert page.evaluate("document.cookie") == ""
    assert harness.admin not in page.content()
    cookie = next(c for c in context.cookies() if c["name"] == COOKIE)
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert harness.admin not in cookie["value"]

    # The agent's call pauses, and its card appears without a reload while the agent
    # waits on its approval.
    decision = _pause(url, harness.agent_token, 80, cost="0.4")
    approval_id = decision["approval_id"]
    waited: dict[str, Any] = {}

    def wait_for_decision() -> None:
        answer = httpx.get(
            f"{url}/v1/approvals/{approval_id}?wait=20", headers=harness.auth(harness.agent_token),
            timeout=30,
        )  # fmt: skip
        waited.update(answer.json())

    waiter = threading.Thread(target=wait_for_decision)
    waiter.start()
    card = page.locator(f"#pending article[data-id='{approval_id}']")
    card.wait_for()
    assert "billing.refund" in card.inner_text() and "approve-big" in card.inner_text()
    assert '"amount": 80' in card.locator("pre.args").inner_text()
    # beside what the call would spend, what the agent has left (its profile's 10 USD a day)
    assert card.locator("dd.cost").inner_text() == "0.4 USD"
    card.locator("dd.remaining").wait_for()
    assert card.locator("dd.remaining").inner_text() == "10 USD of 10 USD (24h)"
    page.screenshot(path=str(shots / "approvals.png"), full_page=True)

    # A person approves it with the keyboard: the re-check's decision shows on the card,
    # and the agent's long poll answers with it.
    card.locator("button.approve").focus()
    page.keyboard.press("Enter")
    done = page.locator(f"#decided article[data-id='{approval_id}'] .outcome")
    done.wait_for()
    assert "allow" in done.inner_text()
    waiter.join(30)
    assert waited["status"] == "approved" and waited["final"]["effect"] == "allow", waited

    # The log's filter finds the paused call, and it opens to its reasons.
    page.click("#nav a[data-page=log]")
    page.wait_for_selector("#log-summary:has-text('match')")
    page.fill("#f-agent", "a1")
    page.fill("#f-tool", "billing.*")
    page.select_option("#f-effect", "pause")
    page.click("#f-search")
    page.wait_for_selector("#log-summary:has-text('1 decision matches')")  # (the paused call alone)
    # The chart counts what the search found: one pause, in one bar.
    chart = page.locator("#log-chart")
    assert "1 pause" in (chart.get_attribute("aria-label") or "")
    assert page.locator("#log-chart rect.bar.pause").count() == 1
    assert page.locator("#log-chart rect.bar.allow").count() == 0
    row = page.locator(f"#log-rows tr[data-seq='{decision['seq']}']")
    assert row.count() == 1 and page.locator("#log-rows tr").count() == 1
    row.locator("button.open").click()
    page.wait_for_selector("#log-detail:has-text('a human approves refunds over 50')")
    # Its trace, made again on the revision it was decided on: the hook that paused it.
    trace = page.locator("#log-trace")
    trace.wait_for()
    assert "hook `approve-big` (pause) where args.amount > 50 -> true" in trace.inner_text()
    assert page.inner_text("#log-trace-verdict") == "The policy decides pause, as logged."
    page.screenshot(path=str(shots / "log.png"), full_page=True)
    # Following, a call logged since shows without a search.
    page.check("#f-follow")
    _pause(url, harness.agent_token, 60)
    page.wait_for_selector("#log-summary:has-text('2 decisions match')")
    page.uncheck("#f-follow")
    page.select_option("#f-effect", "deny")
    page.click("#f-search")
    page.wait_for_selector("#log-summary:has-text('0 decisions match')")

    # The agents page lists the agent's tools, its budget with what it spent per window,
    # and its threads with theirs: a refund charged to a thread of its own (the day's
    # 1.65 USD is it and the approved refund's 0.4), and the thread's history.
    thread = _refunded_in_thread(url, harness, "refund order 7", "5", 10, "1.25")
    page.click("#nav a[data-page=agents]")
    page.click("#agent-list button:has-text('a1')")
    page.wait_for_selector("#agent-tools:has-text('billing.refund')")
    day = page.locator("#agent-spending tr[data-window='24h']")
    assert [c.strip() for c in day.locator("td").all_inner_texts()] == [
        "24h",
        "1.65 USD",
        "10 USD",
        "8.35 USD",
    ]
    row = page.locator(f"#agent-threads tr[data-thread='{thread['id']}']")
    row.wait_for()
    assert "open" in row.inner_text() and "refund order 7" in row.inner_text()
    assert row.locator("td.spent").inner_text() == "1.25 USD of 5 USD"
    # Its history: the thread made, then the refund decided and charged in it.
    row.locator("button.history").click()
    call = page.locator("#thread-events tr[data-event='call']")
    call.wait_for()
    assert "billing.refund: allow" in call.inner_text() and "1.25 USD" in call.inner_text()
    made = page.locator("#thread-events tr[data-event='created']").inner_text()
    assert "max cost 5 USD" in made
    page.screenshot(path=str(shots / "agents.png"))
    assert csp_errors == []

    # Signing out ends the session: the cookie then acts on nothing of the API.
    page.click("#sign-out")
    page.wait_for_selector("#sign-in:not([hidden])")
    jar = {COOKIE: cookie["value"]}
    expect(httpx.get(f"{url}/v1/agents", cookies=jar), 401, "unauthorized")
    context.close()


def _refunded_in_thread(
    url: str, harness: Harness, prompt: str, max_cost: str, amount: int, cost: str
) -> dict[str, Any]:
    """A thread of `a1` capped at `max_cost` USD, with an allowed refund of `amount`
    charged `cost` USD in it: the thread."""
    thread: dict[str, Any] = httpx.post(
        f"{url}/v1/threads", json={"agent": "a1", "prompt": prompt, "max_cost": max_cost},
        headers=harness.auth(),
    ).json()  # fmt: skip
    charged = {"agent": "a1", "tool": "billing.refund", "args": {"amount": amount, "reason": "x"},
               "thread": thread["id"], "expected_cost": cost}  # fmt: skip
    answer = httpx.post(f"{url}/v1/decisions", json=charged, headers=harness.auth(harness.decide))
    assert answer.json()["effect"] == "allow", answer.text
    return thread


def test_an_approval_card_of_a_thread_call_shows_the_threads_max_cost(
    world: tuple[Harness, str], browser: Any, shots: Path
) -> None:
    """Beside the agent's budget, a paused call of a thread shows the thread's own cap
    (`max_cost`) and what the thread has spent."""
    harness, url = world
    thread = _refunded_in_thread(url, harness, "refund order 9", "3", 5, "0.75")
    approval_id = _pause(url, harness.agent_token, 95, cost="1.5", thread=thread["id"])[
        "approval_id"
    ]
    page = _signed_in(browser, url, harness.admin)
    card = page.locator(f"#pending article[data-id='{approval_id}']")
    card.locator("dd.thread-cost").wait_for()
    assert card.locator("dd.cost").inner_text() == "1.5 USD"
    assert card.locator("dd.thread-cost").inner_text() == (
        "3 USD: the thread has spent 0.75 USD, 2.25 USD left"
    )
    card.locator("dd.remaining").wait_for()
    card.screenshot(path=str(shots / "approval-thread.png"))
    page.context.close()


TESTED = """
test "refunds" {
  profile support
  expect allow billing.refund { amount: 10 }
  expect pause billing.refund { amount: 60 }
}
"""


def test_the_policy_playground_checks_decides_and_tests_a_draft(
    world: tuple[Harness, str], browser: Any, shots: Path
) -> None:
    """A typo's diagnostic at its line moves the caret there; a call is decided with its
    trace, the tests run, a fit is checked; the live policy stays the revision it was."""
    harness, url = world
    revision = httpx.get(f"{url}/v1/policy", headers=harness.auth()).json()["revision"]
    page = _signed_in(browser, url, harness.admin)
    csp_errors: list[str] = []
    page.on("console", lambda m: csp_errors.append(m.text) if "Content Security" in m.text else 0)
    page.click("#nav a[data-page=policy]")
    page.wait_for_selector("#pg-status:has-text('The draft checks')")
    text = page.input_value("#pg-editor")
    line = text.split("\n").index("  roles mailer, refunder, manager, vault-reader") + 1

    # A typo, typed: its error appears at its line, and choosing it (with the keyboard)
    # puts the caret there.
    page.focus("#pg-editor")
    page.keyboard.press("Control+Home")
    page.fill("#pg-editor", text.replace("roles mailer, refunder", "roles mailer, refundr"))
    found = page.locator("#pg-diagnostics li.error button.diagnostic").first
    found.wait_for()
    assert f"policy.charter:{line}:" in found.inner_text() and "refundr" in found.inner_text()
    found.focus()
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "pg-editor"
    assert page.inner_text("#pg-caret").startswith(f"Line {line}, column ")

    # Mended, with a test block: a call decided with its trace, and the tests run.
    page.fill("#pg-editor", text + TESTED)
    page.wait_for_selector("#pg-status:has-text('The draft checks')")
    page.fill("#pg-profile", "support")
    page.fill("#pg-tool", "billing.refund")
    page.fill("#pg-args", '{"amount": 60}')
    page.click("#pg-decide button[type=submit]")
    page.wait_for_selector("#pg-trace")
    assert "pause" in page.inner_text("#pg-decision .effect")
    assert "hook `approve-big`" in page.inner_text("#pg-trace")
    page.click("#pg-run-tests")
    page.wait_for_selector("#pg-tests-summary:has-text('2 passed, 0 failed')")
    assert "Coverage: " in page.inner_text("#pg-coverage-summary")
    page.fill("#pg-caller", "narrow")
    page.fill("#pg-role", "refunder")
    page.click("#pg-fit button[type=submit]")
    page.wait_for_selector("#pg-fit-result:has-text('does not fit')")
    page.screenshot(path=str(shots / "playground.png"), full_page=True)
    assert csp_errors == []
    assert httpx.get(f"{url}/v1/policy", headers=harness.auth()).json()["revision"] == revision
    page.context.close()


def test_an_agent_cannot_approve_its_own_call(world: tuple[Harness, str], browser: Any) -> None:
    harness, url = world
    page = _signed_in(browser, url, harness.agent_token)
    assert page.inner_text("#who") == "agent a1"
    approval_id = _pause(url, harness.agent_token, 90)["approval_id"]
    card = page.locator(f"#pending article[data-id='{approval_id}']")
    card.locator("button.approve").click()
    refused = card.locator(".outcome.refused")
    refused.wait_for()
    assert "self-approval" in refused.inner_text()
    approval = httpx.get(f"{url}/v1/approvals/{approval_id}", headers=harness.auth()).json()
    assert approval["status"] == "pending"
    page.context.close()


def test_a_call_decided_elsewhere_is_shown_as_decided(
    world: tuple[Harness, str], browser: Any
) -> None:
    """The page's stream held back (it says `ready`, then nothing): the approval is
    rejected through the API meanwhile, and approving it on the page shows the conflict
    and the decision made elsewhere."""
    harness, url = world
    context = browser.new_context()
    context.route(
        f"{url}/v1/approvals/events",
        lambda route: route.fulfill(
            content_type="text/event-stream", body="retry: 60000\n\nevent: ready\nid: 0\ndata: {}\n\n"
        ),
    )  # fmt: skip
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(f"{url}/console")
    page.fill("#token", harness.admin)
    page.click("#sign-in-form button[type=submit]")
    approval_id = _pause(url, harness.agent_token, 75)["approval_id"]
    page.reload()  # (lists the pending approvals again: the stream tells nothing)
    card = page.locator(f"article[data-id='{approval_id}']")
    card.wait_for()
    rejected = httpx.post(
        f"{url}/v1/approvals/{approval_id}/reject", json={"reason": "done elsewhere"},
        headers=harness.auth(),
    )  # fmt: skip
    assert rejected.status_code == 200, rejected.text
    card.locator("button.approve").click()
    page.wait_for_selector(f"#decided article[data-id='{approval_id}']")
    text = card.inner_text()
    assert "Already decided elsewhere" in text and "approval-not-pending" in text
    assert "Rejected by" in text and "done elsewhere" in text
    context.close()


def test_csrf_and_other_origins_are_refused(world: tuple[Harness, str], browser: Any) -> None:
    harness, url = world
    page = _signed_in(browser, url, harness.admin)
    approval_id = _pause(url, harness.agent_token, 70)["approval_id"]
    reject = f"/v1/approvals/{approval_id}/reject"
    # From the console's own page, without the CSRF token or with a wrong one.
    for header in ({}, {"X-Charter-CSRF": "wrong"}):
        answer = page.evaluate(
            """async ([path, headers]) => {
                const r = await fetch(path, {method: "POST", body: "{}",
                  headers: {"Content-Type": "application/json", ...headers}});
                return [r.status, r.headers.get("content-type"), await r.json()];
            }""",
            [reject, header],
        )
        assert answer[0] == 403 and answer[1] == "application/problem+json", answer
        assert answer[2]["code"] == "csrf-refused"
    # The session's own cookie and CSRF token, sent from another origin.
    cookie = next(c["value"] for c in page.context.cookies() if c["name"] == COOKIE)
    csrf = page.evaluate("fetch('/console/session').then(r => r.json()).then(b => b.csrf)")
    sent = httpx.post(
        f"{url}{reject}", json={"reason": "no"}, cookies={COOKIE: cookie},
        headers={"X-Charter-CSRF": csrf, "Origin": "http://evil.test"},
    )  # fmt: skip
    expect(sent, 403, "csrf-refused")
    # A form another site posts to the API: the browser sends it without the cookie.
    posted: list[int] = []
    evil = page.context.new_page()
    evil.route(
        "http://evil.test/",
        lambda route: route.fulfill(
            content_type="text/html",
            body=f'<form method="post" action="{url}{reject}" enctype="text/plain">'
            '<input name="a" value="b"></form><script>document.forms[0].submit()</script>',
        ),
    )  # fmt: skip
    evil.on("response", lambda r: posted.append(r.status) if r.url.endswith("/reject") else 0)
    evil.goto("http://evil.test/")
    evil.wait_for_load_state()
    evil.wait_for_timeout(200)
    assert posted and posted[0] in (401, 403), posted
    approval = httpx.get(f"{url}/v1/approvals/{approval_id}", headers=harness.auth()).json()
    assert approval["status"] == "pending"
    # With both, from its own page, the same request goes through.
    answer = page.evaluate(
        """async ([path, csrf]) => {
            const r = await fetch(path, {method: "POST", body: JSON.stringify({reason: "no"}),
              headers: {"Content-Type": "application/json", "X-Charter-CSRF": csrf}});
            return r.status;
        }""",
        [reject, csrf],
    )
    assert answer == 200
    page.context.close()


def test_the_console_answers_carry_a_strict_policy(world: tuple[Harness, str]) -> None:
    _, url = world
    for path in ("/console", "/console/main.js", "/console/console.css"):
        answer = httpx.get(f"{url}{path}")
        assert answer.status_code == 200
        policy = answer.headers["content-security-policy"]
        assert policy.startswith("default-src 'self';") and "unsafe" not in policy
        assert "frame-ancestors 'none'" in policy
        assert answer.headers["x-content-type-options"] == "nosniff"
    expect(httpx.get(f"{url}/console/app.py"), 404, "route-not-found")
    # A sign-in from another origin is refused before the token is looked at.
    sent = httpx.post(
        f"{url}/console/session", json={"token": "x"}, headers={"Origin": "http://evil.test"}
    )
    expect(sent, 403, "csrf-refused")


def test_the_scripts_build_no_markup_from_text() -> None:
    """What a server or an agent sent (a draft's text, a diagnostic, a call's arguments)
    reaches the page as text nodes: no script parses HTML, none sets an inline style,
    which the Content-Security-Policy would refuse anyway."""
    folder = ROOT / "api" / "console"
    for script in sorted(folder.glob("*.js")):
        source = script.read_text(encoding="utf-8")
        for parsed in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", ".style"):
            assert parsed not in source, f"{script.name} uses `{parsed}`"
    assert "style=" not in (folder / "index.html").read_text(encoding="utf-8")


def test_the_revisions_page_shows_a_revisions_diff(
    world: tuple[Harness, str], browser: Any, shots: Path
) -> None:
    """After an upload, the newest revision's diff against the one before names what
    widened (a role added to a profile) and what narrowed (a budget set), per profile."""
    harness, url = world
    admin = harness.auth()
    files = httpx.get(f"{url}/v1/policy", headers=admin).json()["files"]
    text = files[0]["text"]
    changed = text.replace(
        "profile narrow {\n  roles mailer\n", "profile narrow {\n  roles mailer, refunder\n"
    ).replace(
        "profile wide {\n  roles mailer, refunder\n",
        "profile wide {\n  roles mailer, refunder\n  budget 3 usd per 24h\n",
    )
    assert changed.count("refunder") == text.count("refunder") + 1 and "3 usd" in changed
    files[0]["text"] = changed
    body = {"files": files, "note": "narrow refunds; a budget for wide"}
    uploaded = httpx.put(f"{url}/v1/policy", json=body, headers=admin)
    assert uploaded.status_code == 201, uploaded.text
    newest = uploaded.json()["revision"]

    page = _signed_in(browser, url, harness.admin)
    csp_errors: list[str] = []
    page.on("console", lambda m: csp_errors.append(m.text) if "Content Security" in m.text else 0)
    page.click("#nav a[data-page=revisions]")
    row = page.locator(f"#rev-list tr[data-revision='{newest}']")
    row.wait_for()
    assert "narrow refunds" in row.inner_text()
    row.locator("button.open").click()
    page.wait_for_selector("#rev-diff-summary")
    assert page.inner_text("#rev-diff h2") == f"Revision {newest} against revision {newest - 1}"
    assert page.inner_text("#rev-diff-summary") == "1 wider, 1 narrower, 0 undecided"
    wider = page.locator("section.profile-diff[data-profile='narrow'] li.change.wider")
    assert "billing.refund" in wider.inner_text() and "refunder" in wider.inner_text()
    narrower = page.locator("section.profile-diff[data-profile='wide'] li.change.narrower")
    assert narrower.get_attribute("data-kind") == "budget" and "3 usd" in narrower.inner_text()
    page.screenshot(path=str(shots / "revisions.png"), full_page=True)
    assert csp_errors == []
    page.context.close()


def test_an_upload_shows_the_checkers_diagnostics_at_their_lines(
    world: tuple[Harness, str], browser: Any, shots: Path
) -> None:
    """A file with a typo is refused, its error shown under its line of the source sent;
    the same policy, mended and pasted, becomes the next revision, shown with its diff,
    and the playground's draft; the playground's edited draft uploads as the next; an
    edited draft is kept when other text is uploaded."""
    harness, url = world
    admin = harness.auth()
    policy = httpx.get(f"{url}/v1/policy", headers=admin).json()
    revision, text = policy["revision"], policy["files"][0]["text"]
    roles = "  roles mailer, refunder, manager, vault-reader"
    line = text.split("\n").index(roles) + 1
    page = _signed_in(browser, url, harness.admin)
    csp_errors: list[str] = []
    page.on("console", lambda m: csp_errors.append(m.text) if "Content Security" in m.text else 0)
    page.click("#nav a[data-page=policy]")
    page.wait_for_selector("#up-form")

    typo = text.replace(roles, roles.replace("refunder", "refundr"))
    page.set_input_files(
        "#up-files",
        {"name": "policy.charter", "mimeType": "text/plain", "buffer": typo.encode()},
    )  # fmt: skip
    page.wait_for_selector("#up-picked:has-text('1 file chosen')")
    page.click("#up-send")
    page.wait_for_selector("#up-status:has-text('Refused')")
    assert f"stays at revision {revision}" in page.inner_text("#up-status")
    marked = page.locator(f"#up-source li.line.error[data-line='{line}']")
    assert marked.count() == 1 and "refundr" in marked.inner_text()
    under = page.locator(f"#up-source li.at.error[data-line='{line}']")
    assert "refundr" in under.inner_text() and f"policy.charter:{line}:" in under.inner_text()
    column = int(under.inner_text().split(f"policy.charter:{line}:")[1].split()[0])
    assert under.locator("code.caret").inner_text() == " " * (column - 1) + "^"
    assert roles.replace("refunder", "refundr").index("refundr") == column - 1
    # Choosing it in the list (with the keyboard) takes the reader to its line.
    page.locator("#up-diagnostics li.error button.diagnostic").first.focus()
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.dataset.line") == str(line)
    page.locator("#upload").screenshot(path=str(shots / "upload.png"))
    assert httpx.get(f"{url}/v1/policy", headers=admin).json()["revision"] == revision

    # Mended and pasted, with refunds over 1000 not granted: the next revision, and
    # its diff (what narrowed).
    page.set_input_files("#up-files", [])
    capped = text.replace(
        "role refunder {\n  allow billing.refund\n",
        "role refunder {\n  allow billing.refund where args.amount <= 1000\n",
    )  # fmt: skip
    assert capped != text
    page.fill("#up-text", capped)
    page.fill("#up-note", "refunds over 1000 are denied")
    page.click("#up-send")
    page.wait_for_selector("#up-status:has-text('uploaded')")
    assert page.inner_text("#up-status") == f"Revision {revision + 1} uploaded: policy.charter."
    page.wait_for_selector("#up-diff #rev-diff-summary")
    assert page.inner_text("#up-diff h2") == f"Revision {revision + 1} against revision {revision}"
    narrower = page.locator(
        "#up-diff section.profile-diff[data-profile='support'] li.change.narrower"
    )
    assert "billing.refund" in narrower.first.inner_text()
    latest = httpx.get(f"{url}/v1/policy", headers=admin).json()
    assert latest["revision"] == revision + 1 and latest["files"][0]["text"] == capped
    assert page.locator("#up-source li.line.error").count() == 0
    # The playground, not edited, holds the new revision.
    assert page.inner_text("#up-playground") == (
        f"The playground above holds revision {revision + 1}."
    )
    page.wait_for_selector("#pg-status:has-text('The draft checks')")
    assert page.input_value("#pg-editor") == capped

    # The playground's draft, edited, uploaded: the next revision, still in the playground.
    edited = capped + "\n# reviewed\n"
    page.fill("#pg-editor", edited)
    page.wait_for_selector("#pg-status:has-text('The draft checks')")
    page.fill("#up-note", "a comment")
    page.click("#up-draft")
    page.wait_for_selector(f"#up-status:has-text('Revision {revision + 2} uploaded')")
    page.wait_for_selector("#up-playground")
    assert f"holds revision {revision + 2}" in page.inner_text("#up-playground")
    latest = httpx.get(f"{url}/v1/policy", headers=admin).json()
    assert latest["revision"] == revision + 2 and latest["files"][0]["text"] == edited
    assert page.input_value("#pg-editor") == edited

    # Edited and not sent, while other text is uploaded: the playground keeps the edits.
    page.fill("#pg-editor", edited + "# mine\n")
    page.fill("#up-text", capped)
    page.click("#up-send")
    page.wait_for_selector(f"#up-status:has-text('Revision {revision + 3} uploaded')")
    page.wait_for_selector("#up-playground")
    assert "keeps the draft you edited" in page.inner_text("#up-playground")
    assert page.input_value("#pg-editor") == edited + "# mine\n"
    assert csp_errors == []
    page.context.close()
