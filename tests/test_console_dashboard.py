"""The console as an operations dashboard, over real HTTP: what needs a person (on every page and per
workspace), who is alive, what is stuck, how fast the work goes."""

from __future__ import annotations

import re
import secrets
import sqlite3
import time
from collections.abc import Iterator

import anyio
import httpx2
import pytest
from support import settings_for
from support.console import agent_call, seed, shared_server, signed_in, token, ui_process

from mcp_harness.arguments import UpdateTaskArgs
from mcp_harness.service import Harness, Identity

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("dashboard") / "harness.db")


@pytest.fixture(scope="module")
def url(db: str) -> Iterator[str]:
    with shared_server(db) as served:
        yield served


@pytest.fixture
def ws(db: str) -> str:
    name = f"shop-{secrets.token_hex(3)}"
    seed(db, name)
    return name


def needs_of(html: str) -> dict[str, int]:
    """The "needs you" bar's counts by label."""
    bar = re.search(r'<nav id="needs".*?</nav>', html, re.S)
    assert bar, "the page has a needs-you bar"
    return {label.strip(): int(n) for n, label in re.findall(r"<b>(\d+)</b>([^<]+)</a>", bar.group(0))}


def test_every_workspace_page_says_what_needs_a_person(url: str, db: str, ws: str):
    agent_call(
        db,
        ws,
        "alice",
        "add_tasks",
        tasks=[
            {"key": "signoff", "title": "Design sign-off", "kind": "gate", "depends_on": ["schema"]},
        ],
    )
    with signed_in(url, token(db, ws, "olga", "operator")) as client:
        for path in ("/board", "/agents", "/log", "/graph", "/threads"):
            page = client.get(f"/ui{path}?w={ws}")
            assert page.status_code == 200
            assert needs_of(page.text) == {
                "messages to you": 0,
                "in review": 0,
                "gate waiting": 1,
                "overdue leases": 0,
                "silent holders": 0,
                "failed": 1,
                "blocked": 1,
            }, path
        task = client.get(f"/ui/task?w={ws}&key=api").text
        assert needs_of(task)["failed"] == 1
        assert f'href="/ui/board?w={ws}&amp;col=failed"' in task  # each count leads to what it counts
        failed = client.get(f"/ui/board?w={ws}&col=failed").text
        assert 'data-key="ci"' in failed and 'data-key="api"' not in failed
        # the bar alone, as a live refresh fetches it
        fragment = client.get(f"/ui/needs?w={ws}", headers={"hx-request": "true"})
        assert fragment.status_code == 200 and fragment.text.lstrip().startswith('<nav id="needs"')


def test_the_picker_shows_what_needs_a_person_in_each_workspace(tmp_path):
    db = str(tmp_path / "two.db")
    seed(db, "shop")
    agent_call(db, "calm", "alice", "add_tasks", tasks=[{"key": "one", "title": "Nothing wrong here"}])
    with (
        ui_process(db, "--agent", "olivia") as (login_url, _proc),
        httpx2.Client(base_url=login_url.split("/ui/")[0], follow_redirects=False, timeout=30) as client,
    ):
        assert client.get(login_url).status_code == 303
        picker = client.get("/ui/")
        assert picker.status_code == 200, picker.text
        found = re.findall(r'<li><a class="ws-name" href="/ui/board\?w=(\w+)">\w+</a>(.*?)</li>', picker.text, re.S)
        rows = dict(found)
        assert set(rows) == {"calm", "shop"}
        assert "<b>1</b> failed" in rows["shop"] and "<b>1</b> blocked" in rows["shop"]
        assert "<b>0</b> failed" in rows["calm"] and 'class="needs inline calm"' in rows["calm"]


def test_agents_show_last_contact_what_they_do_or_why_idle_and_silent_holders(tmp_path, monkeypatch):
    monkeypatch.setenv("MCP_HARNESS_SILENT_AFTER", "4")
    db = str(tmp_path / "alive.db")
    seed(db, "shop")  # alice claimed api (30 min lease) and then made no call at all
    with shared_server(db) as served, signed_in(served, token(db, "shop", "olga", "operator")) as client:
        got = agent_call(db, "shop", "bob", "claim_task", task_key="payments", lease_seconds=600)
        assert got["task"]["key"] == "payments"
        idle = agent_call(db, "shop", "carol", "claim_task", tags=["nothing-has-this-tag"])
        assert idle["task"] is None
        time.sleep(4.5)  # alice is silent now; bob heartbeats just before the page is read
        agent_call(
            db, "shop", "bob", "update_task", task_key="payments", action="heartbeat", lease_token=got["lease"]["token"]
        )
        page = client.get("/ui/agents?w=shop").text
        rows = {agent: state for state, agent in re.findall(r'<tr class="agent-(\w+)" data-agent="(\w+)"', page)}
        assert rows["alice"] == "silent" and rows["bob"] == "working" and rows["carol"] == "idle", rows
        carol = re.search(r'data-agent="carol".*?</tr>', page, re.S).group(0)
        assert "idle: nothing to claim" in carol and "claim_task" in carol
        bob = re.search(r'data-agent="bob".*?</tr>', page, re.S).group(0)
        assert "payments" in bob and "update_task" in bob and "left" in bob  # its task and lease clock
        silent = re.search(r'<section class="panel alert silent-holders">.*?</section>', page, re.S).group(0)
        assert "api" in silent and "alice" in silent and "payments" not in silent
        assert needs_of(page)["silent holder"] == 1
        # bob finishes its work: it is idle since it completed payments (not "its last claim got a task")
        agent_call(
            db,
            "shop",
            "bob",
            "update_task",
            task_key="payments",
            action="complete",
            lease_token=got["lease"]["token"],
            verification="captured twice, charged once",
        )
        page = client.get("/ui/agents?w=shop").text
        bob = re.search(r'data-agent="bob".*?</tr>', page, re.S).group(0)
        assert 'idle since it completed <a href="/ui/task?w=shop&amp;key=payments">payments</a>' in bob, bob
        assert "last claim got a task" not in page


def test_stuck_ranks_what_others_wait_on_and_a_blocked_task_links_to_the_root_of_its_block(url: str, db: str, ws: str):
    agent_call(
        db,
        ws,
        "alice",
        "add_tasks",
        tasks=[  # ci failed: deploy is blocked, and so are these
            {"key": "release", "title": "Release 1.0", "depends_on": ["deploy"]},
            {"key": "arm", "title": "ARM packages", "depends_on": ["ci"]},
            {"key": "notes", "title": "Release notes", "depends_on": ["ci"]},
            {"key": "signoff", "title": "Launch sign-off", "kind": "gate", "depends_on": ["schema"]},
            {"key": "launch", "title": "Launch", "depends_on": ["signoff"]},
        ],
    )
    with signed_in(url, token(db, ws, "olga", "operator")) as client:
        page = client.get(f"/ui/stuck?w={ws}").text
        order = re.findall(r'<li class="blocker s-(\w+)" data-key="(\w+)"', page)
        assert order[0] == ("failed", "ci"), order  # four tasks wait on it: three directly, release through deploy
        assert {key for _, key in order} == {"ci", "api", "signoff"}, order  # deploy waits itself: no root
        ci = re.search(r'data-key="ci".*?</li>', page, re.S).group(0)
        assert "<b>4</b> wait on it" in ci and "Reopen ci" in ci and "libssl3" in ci
        gate = re.search(r'data-key="signoff".*?</li>', page, re.S).group(0)
        assert "gate waiting for a person" in gate and "Approve or reject signoff" in gate
        api = re.search(r'data-key="api".*?</li>', page, re.S).group(0)
        assert "held by alice" in api and "lease" in api
        release = client.get(f"/ui/task?w={ws}&key=release").text
        root = re.search(r'<section class="panel root-of-wait.*?</section>', release, re.S).group(0)
        assert f'href="/ui/task?w={ws}&amp;key=ci">ci</a>' in root and "through" in root and "deploy" in root
        assert "reopen it" in root
        ready = client.get(f"/ui/task?w={ws}&key=payments").text
        assert "root-of-wait" not in ready  # nothing holds a ready task back


def test_the_task_table_filters_sorts_groups_and_pages(url: str, db: str, ws: str):
    with signed_in(url, token(db, ws, "olga", "reader")) as client:
        page = client.get(f"/ui/tasks?w={ws}&sort=priority&desc=1").text
        keys = re.findall(r'<tr data-key="([\w-]+)"', page)
        assert keys[:2] == ["schema", "api"] and len(keys) == 7  # priority 5, then 3
        assert '<option value="alice">alice</option>' in page  # the owner filter offers the agents
        alice = client.get(f"/ui/tasks?w={ws}&owner=alice").text
        assert re.findall(r'<tr data-key="([\w-]+)"', alice) == ["schema", "api"]
        blocked = client.get(f"/ui/tasks?w={ws}&status=blocked").text
        assert re.findall(r'<tr data-key="([\w-]+)"', blocked) == ["deploy"]
        tagged = client.get(f"/ui/tasks?w={ws}&tag=db").text
        assert re.findall(r'<tr data-key="([\w-]+)"', tagged) == ["schema"]
        grouped = client.get(f"/ui/tasks?w={ws}&group=status").text
        groups = re.findall(r'<tr class="group"><th colspan="7">([\w ]+) <span class="n">(\d+)</span>', grouped)
        assert ("Pending", "3") in groups and ("Failed", "1") in groups and ("Done", "1") in groups
        assert client.get(f"/ui/tasks?w={ws}&sort=nonsense").status_code == 400
        assert client.get(f"/ui/tasks?w={ws}&group=nonsense").status_code == 400


def test_the_timeline_shows_task_events_beside_progress_with_filters_as_choices(url: str, db: str, ws: str):
    with signed_in(url, token(db, ws, "olga", "reader")) as client:
        both = client.get(f"/ui/log?w={ws}").text
        kinds = re.findall(r'<li class="entry task-event ev-(\w+)"', both)
        assert {"claim", "complete", "fail"} <= set(kinds), kinds
        assert "libssl3" in both and "Schema done" in both  # the failure's error beside the progress entries
        assert '<option value="bob">bob</option>' in both  # the agent filter offers the agents
        events = client.get(f"/ui/log?w={ws}&show=events").text
        assert "task-event" in events and "Schema done" not in events
        progress = client.get(f"/ui/log?w={ws}&show=progress").text
        assert "task-event" not in progress and "Schema done" in progress
        bob = client.get(f"/ui/log?w={ws}&agent=bob").text
        assert set(re.findall(r'<li class="entry task-event ev-(\w+)"', bob)) == {"claim", "fail"}
        assert client.get(f"/ui/log?w={ws}&show=nonsense").status_code == 400


def test_a_gone_holder_a_retry_backoff_and_a_question_each_say_what_to_do(tmp_path, monkeypatch):
    """An operator trial: a killed agent past its lease read as WORKING, a task in retry backoff as
    "ready, nobody claimed it", a waiting task named its holder without the action, and a question to
    the operators was missing from the bar."""
    monkeypatch.setenv("MCP_HARNESS_SILENT_AFTER", "2")
    db = str(tmp_path / "trial.db")
    seed(db, "shop")
    agent_call(
        db,
        "shop",
        "alice",
        "add_tasks",
        tasks=[
            {"key": "release-notes", "title": "Release notes"},
            {"key": "release-signoff", "title": "Release sign-off", "kind": "gate", "depends_on": ["release-notes"]},
            {"key": "publish", "title": "Publish", "depends_on": ["release-signoff"]},
            {"key": "flaky", "title": "Flaky import", "max_attempts": 3},
            {"key": "after-flaky", "title": "Uses the import", "depends_on": ["flaky"]},
        ],
    )
    agent_call(db, "shop", "dave", "claim_task", task_key="release-notes", lease_seconds=10)  # then killed
    agent_call(db, "shop", "erin", "message", action="send", to="operators", body="May I skip the slow import?")
    time.sleep(10.5)  # dave's lease ran out and he made no call since
    got = agent_call(db, "shop", "erin", "claim_task", task_key="flaky")  # fails: a retry backoff of about 5 s
    agent_call(
        db,
        "shop",
        "erin",
        "update_task",
        task_key="flaky",
        action="fail",
        lease_token=got["lease"]["token"],
        error="the import timed out",
        retry=True,
    )
    with sqlite3.connect(db) as conn:  # a longer backoff (as a later attempt gets), so the page sees it running
        conn.execute("UPDATE tasks SET available_at = available_at + 120 WHERE key = 'flaky'")
    with shared_server(db) as served, signed_in(served, token(db, "shop", "olga", "operator")) as client:
        agents = client.get("/ui/agents?w=shop").text
        rows = {agent: state for state, agent in re.findall(r'<tr class="agent-(\w+)" data-agent="(\w+)"', agents)}
        assert rows["dave"] == "overdue", rows
        needs = needs_of(agents)
        assert needs["overdue lease"] == 1 and needs["message to you"] == 1, needs

        stuck = client.get("/ui/stuck?w=shop").text
        flaky = re.search(r'data-key="flaky".*?</li>', stuck, re.S).group(0)
        assert re.search(r"claimable in (1m 5\d|2m \d)s", flaky) and "ready, but no agent" not in flaky, flaky
        assert 'action="/ui/task/retry_now"' in flaky and 'name="csrf"' in flaky and "the import timed out" in flaky
        notes = re.search(r'data-key="release-notes".*?</li>', stuck, re.S).group(0)
        assert 'action="/ui/task/release"' in notes and 'name="reason"' in notes, notes

        flaky_page = client.get("/ui/task?w=shop&key=flaky").text  # the fail event's delay, with its unit
        assert re.search(r'<span class="label">retry in</span> \d+ s</span>', flaky_page), flaky_page
        inbox = client.get("/ui/inbox?w=shop").text
        assert "1 needs you" in inbox and "Show every message, read ones too" in inbox
        with httpx2.Client(base_url=served, timeout=30) as anonymous:  # the sign-in page says what an operator does
            assert "release, reopen, cancel and retry tasks" in anonymous.get("/ui/login").text

        publish = client.get("/ui/task?w=shop&key=publish").text
        root = re.search(r'<section class="panel root-of-wait.*?</section>', publish, re.S).group(0)
        assert "<b>dave</b> has been silent" in root and "the lease ran out" in root, root
        assert "Then release-signoff waits for your approval." in root
        assert 'action="/ui/task/release"' in root and 'value="release-notes"' in root

    with shared_server(db) as served, signed_in(served, token(db, "shop", "vic", "reader")) as client:
        stuck = client.get("/ui/stuck?w=shop").text  # a reader gets the way to the task, no form
        assert "Open to release release-notes" in stuck and 'action="/ui/task/' not in stuck


def test_the_timeline_filters_by_anyone_who_acted_by_event_kind_and_finds_an_event_by_its_reason(
    url: str, db: str, ws: str
):
    async def reopen() -> None:
        async with Harness.open(settings_for(db)) as h:
            await h.tasks.update(
                Identity(ws, "olga", "operator"),
                UpdateTaskArgs(task_key="ci", action="reopen", reason="the runner image was rebuilt with libssl3"),
            )

    anyio.run(reopen)
    with signed_in(url, token(db, ws, "olga", "reader")) as client:
        page = client.get(f"/ui/log?w={ws}").text
        assert '<option value="olga">olga</option>' in page  # the operator who acted is a choice
        assert '<option value="deploy">' in page  # the task filter offers the keys
        assert '<option value="reopen">reopen</option>' in page
        reopens = client.get(f"/ui/log?w={ws}&kind=reopen").text
        assert set(re.findall(r'<li class="entry task-event ev-(\w+)"', reopens)) == {"reopen"}
        found = client.get(f"/ui/log?w={ws}&q=rebuilt").text  # a word of the reopen's reason
        assert set(re.findall(r'<li class="entry task-event ev-(\w+)"', found)) == {"reopen"}, found
        assert client.get(f"/ui/log?w={ws}&kind=nonsense").status_code == 400
