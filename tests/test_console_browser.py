"""The console in a real browser: Playwright driving Debian's Chromium (`/usr/bin/chromium`, installed
by .ci/run; Playwright's own browser downloads are not possible here). Every test saves a screenshot:
the board's goes to $MCP_HARNESS_SCREENSHOT_DIR when set (docs/screenshots for the README), the
others to the test's temporary directory."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.browser import Watched, in_thread, launched, require
from support.console import XSS_TITLE, agent_call, log_json, seed, shared_server, tasks_json, token, ui_process

pytestmark = pytest.mark.slow

VIEWPORT = {"width": 1440, "height": 900}
sync_api = require()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched() as chromium:
        yield chromium


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    """A browser context whose pages must never break the Content-Security-Policy (checked at the end)."""
    watched = Watched(browser, VIEWPORT["width"], VIEWPORT["height"])
    yield watched.ctx
    watched.close()


def shot(page: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)


@pytest.fixture(scope="module")
def team(tmp_path_factory) -> Iterator[tuple[str, str]]:
    """A shared HTTP server over a seeded database: its URL and the database."""
    db = str(tmp_path_factory.mktemp("browser") / "harness.db")
    with shared_server(db) as url:
        yield url, db


def sign_in_with_token(page: Any, url: str, tok: str) -> None:
    page.goto(f"{url}/ui/")
    assert page.url.endswith("/ui/login")
    page.fill("#token", tok)
    page.click("form.stack button[type=submit]")
    page.wait_for_url("**/ui/board?w=*")


def test_the_board_shows_the_seeded_tasks(context: Any, tmp_path: Path):
    db = str(tmp_path / "board.db")
    in_thread(seed, db, "shop")
    agent_call(
        db,
        "shop",
        "alice",
        "add_tasks",
        tasks=[  # schema is done: the gate waits on a person at once
            {"key": "signoff", "title": "Design sign-off for orders", "kind": "gate", "depends_on": ["schema"]},
            {"key": "copy", "title": "Checkout copy, reviewed by a person", "review": True, "depends_on": ["signoff"]},
            {"key": "legacy", "title": "Port the legacy CSV export"},
        ],
    )
    with ui_process(db, "--agent", "olivia") as (login_url, _proc):
        page = context.new_page()
        page.goto(login_url)
        page.wait_for_url("**/ui/board?w=shop")
        page.goto(login_url.split("/ui/")[0] + "/ui/task?w=shop&key=legacy")  # cancelled through its button
        page.get_by_role("button", name="Cancel", exact=True).click()
        page.fill("#cancel-reason", "nobody uses the CSV export any more")
        page.get_by_role("button", name="Cancel legacy").click()
        page.wait_for_url("**done=cancelled*")
        page.click("a:text-is('Board')")
        page.wait_for_url("**/ui/board?w=shop")
        expected = {
            "pending": ["cart", "copy", "payments", "xss"],
            "claimed": ["api"],
            "in_review": ["signoff"],
            "blocked": ["deploy"],
            "failed": ["ci"],
            "done": ["schema"],
            "cancelled": ["legacy"],
        }
        for status, keys in expected.items():
            shown = page.locator(f"section.column.s-{status} article.card").evaluate_all(
                "cards => cards.map(c => c.dataset.key)"
            )
            assert sorted(shown) == keys, (status, shown)
        card = page.locator("article.card[data-key=api]")
        assert card.locator("p.title").inner_text() == "REST endpoints for orders"
        assert "alice" in card.inner_text() and "left" in card.locator("time.countdown").inner_text()
        assert "waits on" in page.locator("article.card[data-key=cart]").inner_text().lower()
        assert "ready" in page.locator("article.card[data-key=payments]").inner_text()
        assert "libssl3" in page.locator("article.card[data-key=ci]").inner_text()
        assert "Gate: a person decides" in page.locator("article.card[data-key=signoff]").inner_text()
        assert "Waiting for an operator" in page.locator("section.column.s-in_review").inner_text()
        assert "nobody uses the CSV export" in page.locator("article.card[data-key=legacy]").inner_text()
        page.wait_for_selector("#live-dot.on")  # the live stream is open
        target = Path(os.environ.get("MCP_HARNESS_SCREENSHOT_DIR") or tmp_path) / "board.png"
        shot(page, target)


def hide(page: Any, hidden: bool) -> None:
    """Tell the page it went to the background (or came back), as a tab switch does."""
    page.evaluate(
        "h => { Object.defineProperty(document, 'hidden', {value: h, configurable: true});"
        " Object.defineProperty(document, 'visibilityState', {value: h ? 'hidden' : 'visible', configurable: true});"
        " document.dispatchEvent(new Event('visibilitychange')); }",
        hidden,
    )


def test_a_hidden_tab_lets_go_of_its_stream_and_catches_up_when_shown(context: Any, tmp_path: Path):
    """A browser opens at most 6 connections to a server and each open page's change stream holds one:
    a tab in the background gives its stream back after a grace, so another tab can open its own (here
    the server allows one stream per token, as 6 connections would), and when shown again it reconnects
    and shows what changed meanwhile."""
    db = str(tmp_path / "tabs.db")
    in_thread(seed, db, "shop")
    tok = token(db, "shop", "rita", "reader")
    with shared_server(db, max_streams_per_token=1) as url:
        first = context.new_page()
        sign_in_with_token(first, url, tok)
        first.wait_for_selector("#live-dot.on")
        first.evaluate("document.body.setAttribute('data-stream-grace', '200')")
        hide(first, True)
        first.wait_for_selector("#live-dot:not(.on)", timeout=10_000)  # it let go of its stream
        second = context.new_page()
        second.goto(f"{url}/ui/board?w=shop")
        second.wait_for_selector("#live-dot.on", timeout=10_000)  # the one stream the server allows
        second.evaluate("document.body.setAttribute('data-stream-grace', '200')")
        hide(second, True)
        second.wait_for_selector("#live-dot:not(.on)", timeout=10_000)
        got = agent_call(db, "shop", "carol", "claim_task", task_key="payments")  # a change while hidden
        assert got["task"]["key"] == "payments"
        hide(first, False)
        first.wait_for_selector("#live-dot.on", timeout=10_000)  # back: the stream again
        card = first.locator("section.column.s-claimed article.card[data-key=payments]")
        card.wait_for(timeout=10_000)  # and what changed while it was hidden, without a reload
        assert "carol" in card.inner_text()
        shot(first, tmp_path / "caught-up.png")


def test_a_claim_in_another_process_appears_without_a_reload(context: Any, team: tuple[str, str], tmp_path: Path):
    url, db = team
    ws = f"live-{secrets.token_hex(3)}"
    in_thread(seed, db, ws)
    page = context.new_page()
    sign_in_with_token(page, url, token(db, ws, "rita", "reader"))
    page.wait_for_selector("#live-dot.on")
    page.evaluate("document.body.dataset.marker = 'the same page'")
    assert page.locator("section.column.s-claimed article.card[data-key=payments]").count() == 0
    got = agent_call(db, ws, "carol", "claim_task", task_key="payments")
    assert got["task"]["key"] == "payments" and got["lease"]["attempt"] == 1  # the lease says carol holds it
    card = page.locator("section.column.s-claimed article.card[data-key=payments]")
    card.wait_for(timeout=10_000)
    assert "carol" in card.inner_text()
    assert page.evaluate("document.body.dataset.marker") == "the same page"  # no reload happened
    shot(page, tmp_path / "claimed-live.png")


def test_an_operator_reopens_a_task_and_the_database_agrees(context: Any, team: tuple[str, str], tmp_path: Path):
    url, db = team
    ws = f"ops-{secrets.token_hex(3)}"
    in_thread(seed, db, ws)
    page = context.new_page()
    sign_in_with_token(page, url, token(db, ws, "olga", "operator"))
    page.click("article.card[data-key=schema] a.key")
    page.wait_for_url("**/ui/task?*key=schema*")
    assert page.locator(".task-head .pill").inner_text() == "Done"
    page.click("summary[data-action=reopen]")
    page.fill("#reopen-reason", "the ERD is not in docs/ after all")
    page.click("details.action[open] button[type=submit]")
    page.wait_for_url("**done=reopened*")
    assert "was reopened" in page.locator(".flash").inner_text()
    assert page.locator(".task-head .pill").inner_text() == "Pending"
    shot(page, tmp_path / "reopened.png")
    assert tasks_json(db, ws)["schema"]["status"] == "pending"
    # revision 2: the harness records the reopen (and any lease it revoked), naming the person
    entry = next(e for e in log_json(db, ws) if e["task_key"] == "schema")
    assert (entry["agent"], entry["task_key"]) == ("harness", "schema")
    assert entry["summary"].startswith("olga reopened task schema")
    assert "the ERD is not in docs/ after all" in entry["summary"]


def test_an_operator_approves_a_gate_and_the_database_agrees(context: Any, team: tuple[str, str], tmp_path: Path):
    url, db = team
    ws = f"gate-{secrets.token_hex(3)}"
    in_thread(seed, db, ws)
    agent_call(
        db,
        ws,
        "alice",
        "add_tasks",
        tasks=[
            {"key": "signoff", "title": "Design sign-off for orders", "kind": "gate", "depends_on": ["schema"]},
            {"key": "build", "title": "Build the order flow", "depends_on": ["signoff"]},
        ],
    )
    assert tasks_json(db, ws)["signoff"]["status"] == "in_review"  # schema is done: the gate waits on a person
    page = context.new_page()
    sign_in_with_token(page, url, token(db, ws, "olga", "operator"))
    card = page.locator("section.column.s-in_review article.card[data-key=signoff]")
    card.wait_for(timeout=10_000)
    card.locator("a.key").click()
    page.wait_for_url("**/ui/task?*key=signoff*")
    assert page.locator(".task-head .pill").inner_text() == "In review"
    assert page.locator("summary[data-action]").evaluate_all("els => els.map(e => e.dataset.action)") == [
        "approve",
        "reject",
        "cancel",
    ]
    page.click("summary[data-action=approve]")
    page.fill("#approve-comment", "ERD and flows look right")
    shot(page, tmp_path / "approve-form.png")
    page.click("details.action[open] button[type=submit]")
    page.wait_for_url("**done=approved*")
    assert page.locator(".task-head .pill").inner_text() == "Done"
    assert tasks_json(db, ws)["signoff"]["status"] == "done"
    entry = next(e for e in log_json(db, ws) if e["task_key"] == "signoff")
    assert entry["agent"] == "harness" and entry["summary"].startswith("olga approved task signoff")
    assert "ERD and flows look right" in entry["summary"]
    got = agent_call(db, ws, "bob", "claim_task", task_key="build")
    assert got["task"]["key"] == "build"  # the gate's dependent is claimable now
    page.locator("ol.events li", has_text="approve").wait_for(timeout=5_000)  # the events panel, live
    shot(page, tmp_path / "approved.png")


def test_a_live_refresh_waits_while_a_person_types_a_reason(context: Any, team: tuple[str, str], tmp_path: Path):
    """An open action form keeps what was typed when another process changes the task; closing the
    form catches the page up (the change shows without a reload)."""
    url, db = team
    ws = f"typing-{secrets.token_hex(3)}"
    in_thread(seed, db, ws)
    page = context.new_page()
    sign_in_with_token(page, url, token(db, ws, "olga", "operator"))
    page.goto(f"{url}/ui/task?w={ws}&key=schema")
    page.locator("#live-dot.on").wait_for(timeout=10_000)
    page.evaluate("document.body.dataset.marker = 'the same page'")
    page.click("summary[data-action=reopen]")
    page.fill("#reopen-reason", "half-typed reason")
    agent_call(db, ws, "dave", "record_progress", summary="schema reviewed by dave", task_key="schema")
    page.wait_for_timeout(2_500)  # the change feed has fired by now (within 2 s)
    assert page.input_value("#reopen-reason") == "half-typed reason"
    assert page.locator("text=schema reviewed by dave").count() == 0
    page.click("summary[data-action=reopen]")  # close the form: the held refresh runs
    page.locator("text=schema reviewed by dave").wait_for(timeout=5_000)
    assert page.evaluate("document.body.dataset.marker") == "the same page"
    shot(page, tmp_path / "caught-up.png")


def test_a_reader_sees_no_action_and_forged_posts_are_refused(
    browser: Any, context: Any, team: tuple[str, str], tmp_path: Path
):
    url, db = team
    ws = f"forge-{secrets.token_hex(3)}"
    in_thread(seed, db, ws)
    reader = context.new_page()
    sign_in_with_token(reader, url, token(db, ws, "rita", "reader"))
    reader.goto(f"{url}/ui/task?w={ws}&key=schema")
    assert reader.locator("details.action").count() == 0 and reader.locator("text=Reopen").count() == 0
    shot(reader, tmp_path / "reader-task.png")
    csrf = reader.locator("input[name=csrf]").first.get_attribute("value")
    refused = reader.request.post(
        f"{url}/ui/task/reopen",
        headers={"origin": url},
        max_redirects=0,
        form={"csrf": csrf, "w": ws, "key": "schema", "reason": "reader tries"},
    )
    assert refused.status == 403

    operator_ctx = browser.new_context(viewport=VIEWPORT)
    try:
        operator = operator_ctx.new_page()
        sign_in_with_token(operator, url, token(db, ws, "olga", "operator"))
        operator.goto(f"{url}/ui/task?w={ws}&key=schema")
        csrf = operator.locator("input[name=csrf]").first.get_attribute("value")
        form = {"csrf": csrf, "w": ws, "key": "schema", "reason": "forged"}
        for data, origin in (({**form, "csrf": ""}, url), (form, "http://evil.example")):
            response = operator.request.post(
                f"{url}/ui/task/reopen", form=data, headers={"origin": origin}, max_redirects=0
            )
            assert response.status == 403
        # A page on another site that posts the form (with the right CSRF token, as if it had stolen
        # it): the browser sends no SameSite=Strict cookie with it, so nobody is signed in.
        evil = operator_ctx.new_page()
        hidden = "".join(f'<input type="hidden" name="{k}" value="{v}">' for k, v in form.items())
        evil.route(
            "http://evil.example/",
            lambda route: route.fulfill(
                content_type="text/html",
                body=f'<form id="f" method="post" action="{url}/ui/task/reopen">{hidden}<button>go</button></form>',
            ),
        )
        evil.goto("http://evil.example/")
        evil.click("#f button")
        evil.wait_for_load_state()
        assert "/ui/login" in evil.url or evil.locator("text=Not possible").count() == 1
        shot(evil, tmp_path / "forged.png")
    finally:
        operator_ctx.close()
    assert tasks_json(db, ws)["schema"]["status"] == "done"


def test_a_script_in_a_title_is_shown_as_text(context: Any, team: tuple[str, str], tmp_path: Path):
    url, db = team
    ws = f"xss-{secrets.token_hex(3)}"
    in_thread(seed, db, ws)
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    sign_in_with_token(page, url, token(db, ws, "rita", "reader"))
    card = page.locator("article.card[data-key=xss]")
    assert card.locator("p.title").inner_text() == XSS_TITLE
    assert card.locator("img, script").count() == 0
    for path in (f"/ui/task?w={ws}&key=xss", f"/ui/graph?w={ws}"):
        page.goto(url + path)
        page.wait_for_load_state()
        assert page.locator("main img, main script").count() == 0
    page.goto(f"{url}/ui/task?w={ws}&key=xss")
    assert page.locator(".task-head h1").inner_text().endswith(XSS_TITLE)
    assert page.evaluate("typeof window.pwned") == "undefined" and dialogs == []
    shot(page, tmp_path / "xss-task.png")


def test_a_used_login_code_cannot_be_used_again(browser: Any, context: Any, tmp_path: Path):
    db = str(tmp_path / "code.db")
    in_thread(seed, db, "shop")
    with ui_process(db, "--agent", "olivia") as (login_url, _proc):
        first = context.new_page()
        first.goto(login_url)
        first.wait_for_url("**/ui/board?w=shop")
        assert "olivia" in first.locator(".who").inner_text()
        other = browser.new_context(viewport=VIEWPORT)
        try:
            second = other.new_page()
            response = second.goto(login_url)
            assert response.status == 403 and "already used" in second.content()
            shot(second, tmp_path / "used-code.png")
            second.goto(login_url.split("/ui/")[0] + "/ui/board?w=shop")
            assert second.url.endswith("/ui/login")  # still not signed in
        finally:
            other.close()
        first.reload()
        assert first.locator("section.column").count() == 7  # the first browser is still signed in


def test_action_buttons_are_buttons_and_approve_and_release_raise_no_console_error(
    context: Any, team: tuple[str, str], tmp_path: Path
):
    """The buttons are announced as buttons (role="button", aria-expanded kept in step) and open from the
    keyboard; an approve and a release, with live refreshes between, log no console error (CSP included)."""
    url, db = team
    ws = f"keys-{secrets.token_hex(3)}"
    in_thread(seed, db, ws)
    agent_call(
        db,
        ws,
        "alice",
        "add_tasks",
        tasks=[{"key": "signoff", "title": "Design sign-off", "kind": "gate", "depends_on": ["schema"]}],
    )
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    sign_in_with_token(page, url, token(db, ws, "olga", "operator"))
    page.goto(f"{url}/ui/task?w={ws}&key=signoff")
    page.locator("#live-dot.on").wait_for(timeout=10_000)
    reject = page.get_by_role("button", name="Reject", exact=True)
    assert reject.get_attribute("aria-expanded") == "false"
    assert "next agent to claim" not in page.locator("details.action:has([data-action=reject])").inner_text()
    reject.press("Enter")  # focus and key in one step: a live refresh landing between them would take the focus
    page.locator("#reject-comment").wait_for(state="visible")
    sync_api.expect(reject).to_have_attribute("aria-expanded", "true")  # set on `toggle`, a moment later
    reject.press(" ")  # Space closes it again
    page.locator("#reject-comment").wait_for(state="hidden")
    sync_api.expect(reject).to_have_attribute("aria-expanded", "false")
    agent_call(db, ws, "dave", "record_progress", summary="a change while the page is open", task_key="signoff")
    page.locator("text=a change while the page is open").wait_for(timeout=10_000)  # a live refresh happened
    approve = page.get_by_role("button", name="Approve", exact=True)
    approve.focus()
    page.keyboard.press("Space")
    page.fill("#approve-comment", "looks right")
    page.get_by_role("button", name="Approve signoff").click()
    page.wait_for_url("**done=approved*")
    page.goto(f"{url}/ui/task?w={ws}&key=api")  # claimed by alice in the seed
    page.locator("#live-dot.on").wait_for(timeout=10_000)
    page.get_by_role("button", name="Release", exact=True).click()
    page.fill("#release-reason", "alice is away today")  # a person's release says why
    page.get_by_role("button", name="Release api").click()
    page.wait_for_url("**done=released*")
    page.locator("#live-dot.on").wait_for(timeout=10_000)
    agent_call(db, ws, "carol", "claim_task", task_key="api")
    page.locator(".task-head .pill", has_text="Claimed").wait_for(timeout=10_000)  # live again after the release
    page.goto(f"{url}/ui/board?w={ws}")
    page.locator("#live-dot.on").wait_for(timeout=10_000)
    shot(page, tmp_path / "after-flows.png")
    assert tasks_json(db, ws)["signoff"]["status"] == "done"
    assert errors == []


@pytest.mark.parametrize("width", [1024, 900, 600, 400])
def test_the_board_wraps_on_narrow_screens_instead_of_scrolling_sideways(
    browser: Any, team: tuple[str, str], tmp_path: Path, width: int
):
    url, db = team
    ws = f"narrow-{secrets.token_hex(3)}"
    in_thread(seed, db, ws)
    ctx = browser.new_context(viewport={"width": width, "height": 900})
    try:
        page = ctx.new_page()
        sign_in_with_token(page, url, token(db, ws, "rita", "reader"))
        sizes = page.evaluate("""() => ({
            page: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
            board: [document.querySelector('.board').scrollWidth, document.querySelector('.board').clientWidth],
            right: Math.max(...[...document.querySelectorAll('section.column')]
                .map(c => c.getBoundingClientRect().right)),
        })""")
        shot(page, tmp_path / f"board-{width}.png")
        assert sizes["page"][0] <= sizes["page"][1] and sizes["board"][0] <= sizes["board"][1], sizes
        assert sizes["right"] <= width, sizes  # every column (Blocked and Failed too) is on screen
        for status in ("blocked", "failed"):
            box = page.locator(f"section.column.s-{status}").bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width and box["width"] >= 180, (status, box)
    finally:
        ctx.close()
