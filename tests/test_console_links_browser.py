"""Checkpoints joined to the work, forks, and the paths a lease holds, in a real browser (Playwright
driving Chromium) at 1400 px and 400 px, over the web shop's project (support/console_project.py) with
checkpoints saved beside the progress and paths reserved after the claims. The README's screenshots
(a thread's versions, a task's held paths) go to $MCP_HARNESS_SCREENSHOT_DIR when set (docs/screenshots),
the others to the test's temporary directory. Every page must keep the Content-Security-Policy."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from support import run_cli, settings_for
from support.browser import Watched, in_thread, launched, require
from support.console import shared_server, token
from support.console_project import DONE_ORDER, build

from mcp_harness.arguments import AddTasksArgs, RecordProgressArgs, SaveCheckpointArgs, UpdateTaskArgs
from mcp_harness.models import TaskSpec
from mcp_harness.service import Harness, Identity
from mcp_harness.store.common import now
from mcp_harness.store.connection import Query

pytestmark = pytest.mark.slow

WIDTHS = {"wide": 1400, "narrow": 400}
WS = "webshop"
BOB_PATHS = ["src/payments/**", "migrations/0007_payments.sql", "tests/payments/**"]
require()


def saves_and_reservations(db: str, leases: dict[str, str]) -> None:
    """On top of the project: bob saves the payments work twice beside his progress and reserves paths
    under his lease (exclusive and shared); carol saves her emails thread right after her claim (no
    entry near: the task comes from what she held); a task that declares paths waits for bob's."""

    async def main() -> None:
        async with Harness.open(settings_for(db)) as h:
            async with h.db.write() as conn:  # the notes of the work done days ago were written then too
                for i, key in enumerate(DONE_ORDER):
                    back = (len(DONE_ORDER) - i) * 21600 - 3600  # as `build` moved the tasks' times
                    await conn.execute(
                        Query(
                            "UPDATE progress SET created_at = created_at - :back "
                            "WHERE workspace = :ws AND task_key = :key"
                        ),
                        {"ws": WS, "key": key, "back": back},
                    )
            bob, carol = Identity(WS, "bob"), Identity(WS, "carol")

            async def when(sql: str, t: float) -> None:
                async with h.db.write() as conn:
                    await conn.execute(Query(sql), {"ws": WS, "t": t})

            await h.tasks.add(
                Identity(WS, "alice"),
                AddTasksArgs(
                    tasks=[
                        TaskSpec(
                            key="refunds",
                            title="Refunds through the payment provider",
                            depends_on=["api-payments"],
                            paths=["src/payments/refunds/**", "docs/api/refunds.md"],
                            tags=["backend"],
                        ),
                    ]
                ),
            )
            token = leases["api-payments"]
            await h.tasks.update(
                bob, UpdateTaskArgs(task_key="api-payments", action="reserve", lease_token=token, paths=BOB_PATHS)
            )
            await h.tasks.update(
                bob,
                UpdateTaskArgs(
                    task_key="api-payments", action="reserve", lease_token=token, paths=["docs/api/**"], shared=True
                ),
            )
            # bob claimed api-payments 27 minutes ago and noted the capture 25 minutes ago; he saved a
            # minute later, noted the idempotency keys 4 minutes ago and saved again 40 seconds after.
            at = now()
            # the project's own saves on main (bob's, as it was built) go back an hour: far from every entry
            await when("UPDATE checkpoints SET created_at = :t WHERE workspace = :ws AND thread = 'main'", at - 3600)
            await when(
                "UPDATE task_events SET created_at = :t WHERE workspace = :ws AND task_key = 'api-payments' "
                "AND kind = 'claim'",
                at - 1620,
            )
            await when(
                "UPDATE progress SET created_at = :t WHERE workspace = :ws AND task_key = 'api-payments'", at - 1500
            )
            plan = {"goal": "payments", "done": ["capture against the sandbox"], "next": "idempotency keys"}
            v1 = await h.checkpoints.save(bob, SaveCheckpointArgs(thread="payments", state=plan, label="capture works"))
            await when(f"UPDATE checkpoints SET created_at = :t WHERE id = '{v1.checkpoint_id}'", at - 1440)
            noted = await h.progress.record(
                bob,
                RecordProgressArgs(
                    summary="Idempotency keys stored per request; retries capture once",
                    status="in_progress",
                    task_key="api-payments",
                ),
            )
            await when(f"UPDATE progress SET created_at = :t WHERE entry_id = '{noted.entry_id}'", at - 240)
            done = ["capture against the sandbox", "idempotency keys"]
            v2 = await h.checkpoints.save(
                bob, SaveCheckpointArgs(thread="payments", mode="merge", state={"done": done, "next": "refunds"})
            )
            await when(f"UPDATE checkpoints SET created_at = :t WHERE id = '{v2.checkpoint_id}'", at - 200)
            await when("UPDATE threads SET updated_at = :t WHERE workspace = :ws AND name = 'payments'", at - 200)
            await h.checkpoints.save(
                carol, SaveCheckpointArgs(thread="emails", state={"templates": ["order-confirmed"], "sent": 0})
            )

    anyio.run(main)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Iterator[tuple[str, str]]:
    db = str(tmp_path_factory.mktemp("links") / "harness.db")
    leases = in_thread(build, db, WS)
    in_thread(saves_and_reservations, db, leases)
    with shared_server(db) as url:
        yield url, db


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched() as chromium:
        yield chromium


class Tab:
    """A browser tab signed in with a token of `role`, at one width; no page may break the CSP."""

    def __init__(self, browser: Any, url: str, db: str, width: int, role: str, agent: str) -> None:
        self.url, self.db, self.width = url, db, width
        self.watched = Watched(browser, width)
        self.ctx = self.watched.ctx
        self.page = self.ctx.new_page()
        self.page.goto(f"{url}/ui/")
        self.page.fill("#token", token(db, WS, agent, role))
        self.page.click("form.stack button[type=submit]")
        self.page.wait_for_url("**/ui/board?w=*")

    def go(self, path: str) -> Any:
        self.page.goto(f"{self.url}/ui{path}")
        return self.page

    def fits(self) -> None:
        """The page is no wider than the screen (nothing to scroll sideways)."""
        assert self.page.evaluate("document.documentElement.scrollWidth") <= self.width

    def close(self) -> None:
        self.watched.close()


@pytest.fixture(params=list(WIDTHS))
def width(request: pytest.FixtureRequest) -> int:
    return WIDTHS[request.param]


@pytest.fixture
def operator(browser: Any, project: tuple[str, str], width: int) -> Iterator[Tab]:
    tab = Tab(browser, *project, width, "operator", "olga")
    yield tab
    tab.close()


def shot(page: Any, name: str, width: int, tmp_path: Path, *, readme: bool = False) -> None:
    """A full-page screenshot; the README's pictures (`readme`) go to $MCP_HARNESS_SCREENSHOT_DIR when set."""
    folder = Path(os.environ.get("MCP_HARNESS_SCREENSHOT_DIR") or tmp_path) if readme else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}-{width}.png"), full_page=True)


def test_a_version_links_to_its_task_and_progress_entry_and_back(operator: Tab, tmp_path: Path):
    page = operator.go(f"/thread?w={WS}&t=payments")
    rows = page.locator("table.versions tbody tr")
    assert rows.count() == 2
    v2, v1 = rows.nth(0).locator("td.saved-with"), rows.nth(1).locator("td.saved-with")
    assert v2.locator("a.task-link").inner_text() == "api-payments"
    assert "Idempotency keys stored per request" in v2.locator("a.entry-link").inner_text()
    assert "Capture works against the sandbox" in v1.locator("a.entry-link").inner_text()
    panel = page.locator("section.saved-with-panel")  # the state view of the latest version
    assert "api-payments" in panel.locator(".saved-task").inner_text()
    assert "named by the progress entry below" in panel.inner_text()
    assert "Idempotency keys stored per request" in panel.locator("li.entry .summary").inner_text()
    operator.fits()
    shot(page, "thread", operator.width, tmp_path, readme=True)

    panel.locator(".saved-task a.task-link").click()  # to the task, which lists its versions
    page.wait_for_url("**/ui/task?*key=api-payments*")
    saves = page.locator("section.saves-panel li")
    assert saves.evaluate_all("items => items.map(i => i.dataset.checkpoint)") == ["payments/2", "payments/1"]
    entry = page.locator("li.entry", has_text="Idempotency keys stored per request")
    assert entry.locator("a.chip.saved").inner_text() == "payments v2"
    operator.fits()
    entry.locator("a.chip.saved").click()  # and back from the entry to the version saved with it
    page.wait_for_url("**/ui/thread?*t=payments*v=2*")
    assert page.locator("table.versions tr.current").get_attribute("data-version") == "2"

    timeline = operator.go(f"/log?w={WS}&agent=bob")  # the timeline names the versions beside the entries
    assert (
        timeline.locator("li.entry", has_text="Capture works against the sandbox").locator("a.chip.saved").inner_text()
        == "payments v1"
    )
    operator.fits()

    carol = operator.go(f"/thread?w={WS}&t=emails")  # no entry near: the task is the one carol held
    panel = carol.locator("section.saved-with-panel")
    assert "emails" in panel.locator(".saved-task").inner_text()
    assert "carol held it when it saved" in panel.inner_text() and panel.locator("li.entry").count() == 0
    operator.fits()


def test_an_operator_forks_a_thread_from_a_version(operator: Tab, tmp_path: Path):
    name = f"payments-retry-{operator.width}"
    page = operator.go(f"/thread?w={WS}&t=payments&v=1")
    fork = page.locator("details.fork")
    fork.locator("summary").click()
    page.fill("#fork-name", name)
    operator.fits()
    shot(page, "fork", operator.width, tmp_path)
    fork.get_by_role("button", name="Fork payments v1").click()
    page.wait_for_url(f"**/ui/thread?*t={name}*forked=1*")
    assert "its version 1 is the state of payments v1" in page.locator("p.flash").inner_text()
    assert "forked from payments v1" in page.locator("section.state").inner_text()
    operator.fits()
    shown = run_cli("show", name, "--db", operator.db, "--workspace", WS)  # another process reads the fork
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["next"] == "idempotency keys"  # v1's state, not v2's "refunds"
    history = run_cli("history", name, "--db", operator.db, "--workspace", WS, "--json")
    assert [c["agent"] for c in json.loads(history.stdout)] == ["olga"]

    # A name that is taken, and one that is no name, are refused as any action's error is.
    for wanted, says in ((name, "already has 1 checkpoint"), ("not a name!", "thread")):
        page = operator.go(f"/thread?w={WS}&t=payments&v=1")
        page.locator("details.fork summary").click()
        page.fill("#fork-name", wanted)
        page.get_by_role("button", name="Fork payments v1").click()
        page.wait_for_load_state()
        assert page.locator("h1").inner_text() == "Not possible"
        assert says in page.locator("section.message p").first.inner_text()
        operator.fits()


def test_an_agent_sees_no_fork_form_and_forged_forks_are_refused(
    browser: Any, project: tuple[str, str], operator: Tab, width: int
):
    url, db = project
    agent = Tab(browser, url, db, width, "agent", "bob")
    try:
        page = agent.go(f"/thread?w={WS}&t=payments&v=1")
        assert page.locator("section.saved-with-panel").count() == 1  # an agent sees the links...
        assert page.locator("details.fork").count() == 0 and page.locator("text=Fork from").count() == 0
        agent.fits()
        checkpoint = page.locator("code").filter(has_text="ck_").first.inner_text()
        csrf = page.locator("input[name=csrf]").first.get_attribute("value")  # the sign-out form's
        form = {"csrf": csrf, "w": WS, "checkpoint": checkpoint, "name": "by-an-agent"}
        refused = page.request.post(f"{url}/ui/thread/fork", form=form, headers={"origin": url}, max_redirects=0)
        assert refused.status == 403 and "operator role" in refused.text()  # ...and may not fork
    finally:
        agent.close()
    page = operator.go(f"/thread?w={WS}&t=payments&v=1")
    csrf = page.locator("details.fork input[name=csrf]").get_attribute("value")
    checkpoint = page.locator("details.fork input[name=checkpoint]").get_attribute("value")
    form = {"csrf": csrf, "w": WS, "checkpoint": checkpoint, "name": "forged"}
    for data, origin in (
        ({**form, "csrf": ""}, url),
        ({k: v for k, v in form.items() if k != "csrf"}, url),
        (form, "http://evil.example"),
    ):
        response = page.request.post(f"{url}/ui/thread/fork", form=data, headers={"origin": origin}, max_redirects=0)
        assert response.status == 403
    for name in ("by-an-agent", "forged"):
        assert run_cli("history", name, "--db", db, "--workspace", WS).returncode != 0  # nothing was saved


def test_cards_and_the_task_page_show_the_paths_a_lease_holds_now(operator: Tab, tmp_path: Path):
    page = operator.go(f"/board?w={WS}")
    held = page.locator("article.card[data-key=api-payments] p.paths.held")
    codes = held.locator("code").evaluate_all("cs => cs.map(c => [c.textContent, c.className])")
    assert codes == [
        ["migrations/0007_payments.sql", "exclusive"],
        ["src/payments/**", "exclusive"],
        ["tests/payments/**", "exclusive"],
    ], codes
    assert "and 1 more" in held.inner_text()  # the shared docs/api/**: a card stays compact
    declared = page.locator("article.card[data-key=refunds] p.paths")
    assert declared.locator("code").all_inner_texts() == ["src/payments/refunds/**", "docs/api/refunds.md"]
    assert "holds" not in declared.inner_text()  # pending: what a claim would reserve
    operator.fits()
    shot(page, "board-paths", operator.width, tmp_path)

    held.locator("a.dep-more").click()
    page.wait_for_url("**/ui/task?*key=api-payments*")
    rows = page.locator("table.held-paths tbody tr")
    kinds = rows.evaluate_all("rs => rs.map(r => [r.dataset.pattern, r.querySelector('.chip').textContent])")
    assert kinds == [[p, "exclusive"] for p in sorted(BOB_PATHS)] + [["docs/api/**", "shared"]], kinds
    until = rows.first.locator("td").last.inner_text()
    assert until.endswith("UTC") and "left" in page.locator("section.paths-panel time.countdown").inner_text()
    operator.fits()
    shot(page, "task-paths", operator.width, tmp_path, readme=True)

    agents = operator.go(f"/agents?w={WS}")
    assert "src/payments/**" in agents.locator("tr[data-agent=bob] .paths.held").inner_text()
    operator.fits()
