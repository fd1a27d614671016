"""The console over real HTTP (no browser): sign-in, roles, CSRF and Origin checks, the Host check,
security headers, escaping, the live event stream, and /metrics."""

from __future__ import annotations

import html
import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from html.parser import HTMLParser
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from support import run_cli
from support.console import (
    XSS_TITLE,
    agent_call,
    agent_call_error,
    log_json,
    seed,
    shared_server,
    signed_in,
    tasks_json,
    token,
    ui_process,
)

from mcp_harness.console.app import CSP

#: every test here starts processes: the CLI for tokens and seeding, a shared server
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("console") / "harness.db")


@pytest.fixture(scope="module")
def url(db: str) -> Iterator[str]:
    with shared_server(db) as served:
        yield served


@pytest.fixture
def ws(db: str) -> str:
    name = f"shop-{secrets.token_hex(3)}"
    seed(db, name)
    return name


class Tags(HTMLParser):
    """What the page really contains (not what its text says): inline scripts, styles and handlers."""

    def __init__(self) -> None:
        super().__init__()
        self.inline: list[str] = []
        self.script_sources: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = dict(attrs)
        if tag == "script":
            if "src" in names:
                self.script_sources.append(names["src"] or "")
            else:
                self.inline.append("<script>")
        if tag == "style":
            self.inline.append("<style>")
        self.inline += [f"{tag} {name}=" for name in names if name == "style" or name.startswith("on")]


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


def test_without_signing_in_only_the_sign_in_page_is_shown(url: str, ws: str):
    with httpx2.Client(base_url=url, follow_redirects=False, timeout=30) as client:
        for path in (
            "/ui/",
            f"/ui/board?w={ws}",
            f"/ui/task?w={ws}&key=schema",
            f"/ui/events?w={ws}",
            f"/ui/log?w={ws}",
            f"/ui/agents?w={ws}",
        ):
            response = client.get(path)
            assert response.status_code == 303 and response.headers["location"] == "/ui/login", path
        page = client.get("/ui/login")
        assert page.status_code == 200 and 'name="token"' in page.text and "schema" not in page.text


def test_a_bad_token_does_not_sign_in(url: str):
    with httpx2.Client(base_url=url, timeout=30) as client:
        response = client.post("/ui/login", data={"token": "mcph_nope"}, headers={"origin": url})
        assert response.status_code == 401 and "not valid" in response.text
        assert not response.cookies


def test_a_token_sees_its_own_workspace_only(url: str, db: str, ws: str):
    with signed_in(url, token(db, ws, "rita", "reader")) as client:
        assert client.get("/ui/").headers["location"] == f"/ui/board?w={ws}"
        assert client.get(f"/ui/board?w={ws}").status_code == 200
        assert client.get("/ui/board?w=someone-else").status_code == 403


def test_pages_are_escaped_and_carry_a_csp_that_forbids_inline_script(url: str, db: str, ws: str):
    with signed_in(url, token(db, ws, "rita", "reader")) as client:
        for path in (
            f"/ui/board?w={ws}",
            f"/ui/task?w={ws}&key=xss",
            f"/ui/graph?w={ws}",
            f"/ui/log?w={ws}",
            f"/ui/threads?w={ws}",
            f"/ui/agents?w={ws}",
        ):
            page = client.get(path)
            assert page.status_code == 200, path
            assert page.headers["content-security-policy"] == CSP
            assert "'unsafe-inline'" not in CSP and "script-src 'self'" in CSP
            assert "<script>window.pwned" not in page.text and 'onerror="window' not in page.text
            tags = Tags()
            tags.feed(page.text)
            assert tags.inline == [], path
            assert tags.script_sources and all(src.startswith("/ui/static/") for src in tags.script_sources)
        board = client.get(f"/ui/board?w={ws}").text
        assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in board
        assert XSS_TITLE not in board


def test_a_reader_sees_no_action_and_cannot_act(url: str, db: str, ws: str):
    with signed_in(url, token(db, ws, "rita", "reader")) as client:
        page = client.get(f"/ui/task?w={ws}&key=schema").text
        assert "Reopen" not in page and "/ui/task/reopen" not in page and "data-action=" not in page
        response = client.post(
            "/ui/task/reopen",
            headers={"origin": url},
            data={"csrf": csrf_of(page), "w": ws, "key": "schema", "reason": "try"},
        )
        assert response.status_code == 403 and "operator" in response.text
    assert tasks_json(db, ws)["schema"]["status"] == "done"


def test_forged_posts_are_refused_and_a_real_one_reopens(url: str, db: str, ws: str):
    with signed_in(url, token(db, ws, "olga", "operator")) as client:
        page = client.get(f"/ui/task?w={ws}&key=schema").text
        assert 'action="/ui/task/reopen"' in page
        form = {"csrf": csrf_of(page), "w": ws, "key": "schema", "reason": "the ERD is missing"}
        forged = [
            ({**form, "csrf": ""}, {"origin": url}),  # no CSRF token
            ({**form, "csrf": "x" * 64}, {"origin": url}),  # a wrong one
            (form, {"origin": "http://evil.example"}),  # another origin
            (form, {}),  # no origin at all
        ]
        for data, headers in forged:
            response = client.post("/ui/task/reopen", data=data, headers=headers)
            assert response.status_code == 403, (data, headers)
        assert tasks_json(db, ws)["schema"]["status"] == "done"
        response = client.post("/ui/task/reopen", data=form, headers={"origin": url})
        assert response.status_code == 303 and "done=reopened" in response.headers["location"]
    assert tasks_json(db, ws)["schema"]["status"] == "pending"
    entry = next(e for e in log_json(db, ws) if e["task_key"] == "schema")  # revision 2: the harness's entry
    assert entry["agent"] == "harness" and entry["summary"].startswith("olga reopened task schema")
    assert "the ERD is missing" in entry["summary"]


def test_the_task_page_shows_its_events_and_the_actions_its_status_allows(url: str, db: str, ws: str):
    with signed_in(url, token(db, ws, "olga", "operator")) as client:
        failed = client.get(f"/ui/task?w={ws}&key=ci").text
        events = failed[failed.index("<h2>Events</h2>") :]
        assert events.index("claim") < events.index("fail") and "the ARM runner image lacks libssl3" in events
        assert re.findall(r'data-action="(\w+)"', failed) == ["reopen", "cancel"]
        claimed = client.get(f"/ui/task?w={ws}&key=api").text
        assert re.findall(r'data-action="(\w+)"', claimed) == ["release", "cancel"]
        assert "Why take api back from alice?" in claimed and 'name="reason"' in claimed
        fresh = client.get(f"/ui/task?w={ws}&key=xss").text
        assert "no transitions yet" in fresh
        response = client.post(
            "/ui/task/explode", headers={"origin": url}, data={"csrf": csrf_of(fresh), "w": ws, "key": "xss"}
        )
        assert response.status_code == 404 and "no console action 'explode'" in html.unescape(response.text)
        response = client.post(
            "/ui/task/cancel",
            headers={"origin": url},
            data={"csrf": csrf_of(fresh), "w": ws, "key": "xss", "reason": "  "},
        )
        assert response.status_code == 400 and "cancel needs a reason" in response.text
    assert tasks_json(db, ws)["xss"]["status"] == "pending"


def test_an_operator_releases_retries_rejects_and_cancels(url: str, db: str, ws: str):
    """Each button's POST does what the contract's operator action does, in the person's name."""
    agent_call(db, ws, "alice", "add_tasks", tasks=[{"key": "copy", "title": "Checkout copy", "review": True}])
    lease = agent_call(db, ws, "alice", "claim_task", task_key="copy")["lease"]
    agent_call(
        db,
        ws,
        "alice",
        "update_task",
        task_key="copy",
        action="complete",
        lease_token=lease["token"],
        verification="read it aloud",
    )
    held = agent_call(db, ws, "alice", "claim_task", task_key="xss")["lease"]
    with signed_in(url, token(db, ws, "olga", "operator")) as client:

        def act(action: str, key: str, **fields: str) -> httpx2.Response:
            page = client.get(f"/ui/task?w={ws}&key={key}").text
            assert f'data-action="{action}"' in page, (action, key)
            return client.post(
                f"/ui/task/{action}",
                headers={"origin": url},
                data={"csrf": csrf_of(page), "w": ws, "key": key, **fields},
            )

        assert act("release", "xss").status_code == 400  # a person's release says why
        assert act("release", "xss", reason="stuck").headers["location"].endswith("done=released")
        refused = agent_call_error(
            db, ws, "alice", "update_task", task_key="xss", action="heartbeat", lease_token=held["token"]
        )
        assert refused.startswith("[lease_lost]") and "an operator ('olga') released it" in refused, refused
        assert act("reject", "copy").status_code == 400  # a reject needs its comment
        assert act("reject", "copy", comment="too long; half the words").status_code == 303
        assert act("cancel", "payments", reason="payments move to the next release").status_code == 303
    rows = tasks_json(db, ws)
    assert (rows["xss"]["status"], rows["copy"]["status"], rows["payments"]["status"]) == (
        "pending",
        "pending",
        "cancelled",
    )
    summaries = [e["summary"] for e in log_json(db, ws) if e["agent"] == "harness"]
    assert any(s.startswith("operator olga released task xss (held by alice)") for s in summaries), summaries
    assert any(s.startswith("olga rejected task copy: too long; half the words") for s in summaries)
    assert any(s.startswith("olga cancelled task payments: payments move") for s in summaries)
    claimed = agent_call(db, ws, "bob", "claim_task", task_key="copy")
    assert claimed["task"]["review_comment"] == "too long; half the words"  # reaches the next claimer


def test_a_revoked_token_is_signed_out_at_once(url: str, db: str, ws: str):
    tok = token(db, ws, "rita", "reader")
    with signed_in(url, tok) as client:
        assert client.get(f"/ui/board?w={ws}").status_code == 200
        assert run_cli("token", "revoke", tok, "--db", db).returncode == 0
        assert client.get(f"/ui/board?w={ws}").headers["location"] == "/ui/login"


def test_a_host_this_server_does_not_answer_to_is_refused(url: str):
    response = httpx2.get(f"{url}/ui/login", headers={"host": "evil.example"}, timeout=30)
    assert response.status_code == 421


def test_the_event_stream_says_change_when_another_process_commits(url: str, db: str, ws: str):
    with signed_in(url, token(db, ws, "rita", "reader")) as client:
        with client.stream("GET", f"/ui/events?w={ws}", timeout=60) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            events = 0
            lines = stream.iter_lines()
            for line in lines:
                if line.startswith("event: change"):
                    events += 1
                    if events == 1:  # the first says "look again" as the stream opens
                        agent_call(db, ws, "bob", "record_progress", summary="from another process")
                    else:
                        break
            assert events == 2


def test_metrics_are_open_on_loopback_and_count_tool_calls(url: str, db: str, ws: str):
    text = httpx2.get(f"{url}/metrics", timeout=30).text
    assert f'mcp_harness_tasks{{status="failed",workspace="{ws}"}} 1.0' in text
    assert f'mcp_harness_tasks{{status="claimed",workspace="{ws}"}} 1.0' in text
    assert "mcp_harness_claim_waits_total" in text and "mcp_harness_leases_expired" in text
    tok = token(db, ws, "m", "agent")

    async def calls() -> None:
        headers = {"Authorization": f"Bearer {tok}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http), read_timeout_seconds=30) as client,
        ):
            assert not (await client.call_tool("list_tasks", {})).is_error
            assert (await client.call_tool("claim_task", {"task_key": "no-such-task"})).is_error

    anyio.run(calls)
    text = httpx2.get(f"{url}/metrics", timeout=30).text
    assert re.search(r'mcp_harness_tool_calls_total\{code="ok",tool="list_tasks"\} [1-9]', text)
    assert re.search(r'mcp_harness_tool_calls_total\{code="not_found",tool="claim_task"\} [1-9]', text)
    assert re.search(r'mcp_harness_tool_call_seconds_count\{tool="list_tasks"\} [1-9]', text)


def test_metrics_need_a_token_when_not_on_loopback(tmp_path: Path):
    db = str(tmp_path / "exposed.db")
    seed(db, "w")
    seed(db, "other")
    tok = token(db, "w", "scraper", "reader")
    secret = secrets.token_urlsafe(24)
    with shared_server(db, bind_as="10.1.2.3", metrics_token=secret) as url:
        port = url.rsplit(":", 1)[1]
        host = {"host": f"10.1.2.3:{port}"}
        assert httpx2.get(f"{url}/metrics", headers=host, timeout=30).status_code == 401
        bad = httpx2.get(f"{url}/metrics", headers={**host, "authorization": "Bearer mcph_nope"}, timeout=30)
        assert bad.status_code == 401
        good = httpx2.get(f"{url}/metrics", headers={**host, "authorization": f"Bearer {tok}"}, timeout=30)
        assert good.status_code == 200 and 'workspace="w"' in good.text and 'workspace="other"' not in good.text
        scraper = httpx2.get(f"{url}/metrics", headers={**host, "authorization": f"Bearer {secret}"}, timeout=30)
        assert scraper.status_code == 200 and 'workspace="w"' in scraper.text and 'workspace="other"' in scraper.text
        evil = {"host": f"evil.example:{port}", "authorization": f"Bearer {secret}"}
        assert httpx2.get(f"{url}/metrics", headers=evil, timeout=30).status_code == 421


def test_metrics_behind_a_proxy_on_a_loopback_bind_need_a_token(tmp_path: Path):
    """The README's way to expose the server: a loopback bind behind a reverse proxy. What the proxy
    relays (its Host name, its X-Forwarded-* headers) is not a scrape on this machine."""
    db = str(tmp_path / "proxied.db")
    seed(db, "w")
    with shared_server(db, allowed_hosts=["harness.example.com"]) as url:
        assert httpx2.get(f"{url}/metrics", timeout=30).status_code == 200  # on this machine: open
        relayed = [
            {"host": "harness.example.com"},
            {"x-forwarded-for": "203.0.113.9"},
            {"forwarded": "for=203.0.113.9"},
            {"host": "harness.example.com", "x-real-ip": "203.0.113.9"},
        ]
        for headers in relayed:
            assert httpx2.get(f"{url}/metrics", headers=headers, timeout=30).status_code == 401, headers


def test_metrics_answer_only_hosts_of_this_server_and_a_token_sees_its_own_workspace(url: str, db: str, ws: str):
    port = url.rsplit(":", 1)[1]
    for evil in (f"evil.example:{port}", "evil.example"):  # DNS rebinding: a name the attacker controls
        assert httpx2.get(f"{url}/metrics", headers={"host": evil}, timeout=30).status_code == 421
    other = f"{ws}-other"
    seed(db, other)
    every = httpx2.get(f"{url}/metrics", timeout=30).text  # loopback, no token: every workspace
    assert f'workspace="{ws}"' in every and f'workspace="{other}"' in every
    for role in ("reader", "agent", "operator"):
        mine = httpx2.get(f"{url}/metrics", headers={"authorization": f"Bearer {token(db, ws, 'm', role)}"}, timeout=30)
        assert mine.status_code == 200 and f'workspace="{ws}"' in mine.text, role
        assert f'workspace="{other}"' not in mine.text, role


@pytest.mark.slow
def test_ui_prints_a_login_url_whose_code_works_once(tmp_path: Path):
    db = str(tmp_path / "ui.db")
    seed(db, "shop")
    seed(db, "lab")
    with ui_process(db, "--agent", "olivia") as (login_url, _proc):
        base = login_url.split("/ui/")[0]
        with httpx2.Client(base_url=base, follow_redirects=False, timeout=30) as first:
            response = first.get(login_url)
            assert response.status_code == 303
            cookie = response.headers["set-cookie"].lower()
            assert "httponly" in cookie and "samesite=strict" in cookie
            picker = first.get("/ui/")  # two workspaces, and this session may see every one
            assert picker.status_code == 200 and "/ui/board?w=lab" in picker.text and "/ui/board?w=shop" in picker.text
            board = first.get("/ui/board?w=shop")
            assert board.status_code == 200 and "olivia" in board.text and "operator" in board.text
            assert first.get(login_url).status_code == 403  # used: even by the browser that used it
            port = base.rsplit(":", 1)[1]
            assert first.get("/metrics").status_code == 200
            assert first.get("/metrics", headers={"host": f"evil.example:{port}"}).status_code == 421
        with httpx2.Client(base_url=base, follow_redirects=False, timeout=30) as second:
            again = second.get(login_url)
            assert again.status_code == 403 and "already used" in again.text and not again.cookies
            assert second.get("/ui/board?w=shop").headers["location"] == "/ui/login"
            assert second.get("/metrics").status_code == 200  # loopback: open


def test_a_link_without_w_reads_the_workspace_ui_was_started_for(tmp_path: Path):
    db = str(tmp_path / "ui.db")
    seed(db, "shop")
    seed(db, "lab")
    with ui_process(db, "--agent", "olivia", "--workspace", "lab") as (login_url, _proc):
        base = login_url.split("/ui/")[0]
        with httpx2.Client(base_url=base, follow_redirects=False, timeout=30) as browser:
            assert browser.get(login_url).status_code == 303
            page = browser.get("/ui/task?key=cart")  # a link a person shared, without `w=`
            assert page.status_code == 200 and "Cart page" in page.text  # the task, not a drop to the board


def card_of(board: str, key: str) -> str:
    """One card's HTML on the board."""
    start = board.index(f'data-key="{key}"')
    return board[start : board.index("</article>", start)]


def test_a_cancelled_dependency_is_not_waited_on_and_its_card_gives_the_reason(url: str, db: str, ws: str):
    """The board agrees with list_tasks' `ready` (contract revision 2); the cancel reason replaces the old error."""
    plan = [
        {"key": "readme", "title": "README", "max_attempts": 2},
        {"key": "docs", "title": "Docs", "depends_on": ["readme"]},
    ]
    agent_call(db, ws, "alice", "add_tasks", tasks=plan)
    lease = agent_call(db, ws, "alice", "claim_task", task_key="readme")["lease"]
    agent_call(
        db,
        ws,
        "alice",
        "update_task",
        task_key="readme",
        action="fail",
        lease_token=lease["token"],
        error="the old error",
    )
    with signed_in(url, token(db, ws, "olga", "operator")) as client:
        page = client.get(f"/ui/task?w={ws}&key=readme").text
        form = {"csrf": csrf_of(page), "w": ws, "key": "readme", "reason": "the wiki has it"}
        response = client.post("/ui/task/cancel", headers={"origin": url}, data=form)
        assert response.status_code == 303
        listed = {t["key"]: t for t in agent_call(db, ws, "bob", "list_tasks")["tasks"]}
        assert listed["docs"]["ready"] is True
        board = client.get(f"/ui/board?w={ws}").text
        docs = card_of(board, "docs")
        assert "waits on" not in docs and 'class="chip ready"' in docs
        readme = card_of(board, "readme")
        assert "the wiki has it" in readme and "the old error" not in readme
        task = client.get(f"/ui/task?w={ws}&key=docs").text
        assert "cancelled: not waited on" in task and "Nothing holds it back" in task
        assert "Waits on 1 of 1: api" in client.get(f"/ui/task?w={ws}&key=cart").text  # api is claimed


def test_gates_and_review_tasks_are_marked_and_in_review_asks_for_an_operator(url: str, db: str, ws: str):
    plan = [
        {"key": "copy", "title": "Checkout copy", "review": True},
        {"key": "go", "title": "Go live?", "kind": "gate", "depends_on": ["copy"]},
    ]
    agent_call(db, ws, "alice", "add_tasks", tasks=plan)
    with signed_in(url, token(db, ws, "olga", "operator")) as client:
        board = client.get(f"/ui/board?w={ws}").text
        assert "Gate: a person decides" in card_of(board, "go") and "Review" in card_of(board, "copy")
        assert "Gate: a person decides" not in card_of(board, "copy") and ">Review<" not in card_of(board, "api")
        assert "Waiting for an operator" not in board  # nothing in review yet
        graph = client.get(f"/ui/graph?w={ws}").text
        drawn = json.loads(html.unescape(re.search(r"data-graph='([^']*)'", graph).group(1)))  # the browser draws it
        nodes = {n["key"]: n for n in drawn["nodes"]}
        assert (nodes["go"]["kind"], nodes["go"]["status"]) == ("gate", "pending") and "Gate: a person decides" in graph
        assert nodes["copy"]["review"] is True and ["go", "copy"] in drawn["edges"]
        lease = agent_call(db, ws, "alice", "claim_task", task_key="copy")["lease"]
        agent_call(
            db,
            ws,
            "alice",
            "update_task",
            task_key="copy",
            action="complete",
            lease_token=lease["token"],
            verification="read aloud",
        )
        board = client.get(f"/ui/board?w={ws}").text
        review = board[board.index('aria-label="In review"') : board.index('aria-label="Blocked"')]
        assert "Waiting for an operator: open the task to approve or reject." in review and 'data-key="copy"' in review
        reject_prompt = "The next agent to claim it reads this."
        page = client.get(f"/ui/task?w={ws}&key=copy").text
        assert ">Review<" in page and reject_prompt in page and "Attempts</dt><dd>1 of 3" in page
        page = client.get(f"/ui/task?w={ws}&key=go").text  # still waits on copy
        assert "Gate: a person decides" in page and "Attempts" not in page and "<h2>Decision</h2>" in page
        form = {"csrf": csrf_of(page), "w": ws, "key": "copy", "comment": "fine"}
        assert client.post("/ui/task/approve", headers={"origin": url}, data=form).status_code == 303
        page = client.get(f"/ui/task?w={ws}&key=go").text
        assert 'class="pill s-in_review"' in page and re.findall(r'data-action="(\w+)"', page)[:2] == [
            "approve",
            "reject",
        ]
        assert reject_prompt not in page and "A rejected gate fails" in page and "Attempts" not in page


def test_every_status_has_a_colour_and_a_place_in_the_graph_legend(url: str, db: str, ws: str):
    from mcp_harness.console.app import LABELS

    css = (Path(__file__).parent.parent / "mcp_harness" / "console" / "static" / "console.css").read_text()
    with signed_in(url, token(db, ws, "rita", "reader")) as client:
        graph = client.get(f"/ui/graph?w={ws}").text
        legend = graph[graph.index('class="legend"') : graph.index("</p>", graph.index('class="legend"'))]
        board = client.get(f"/ui/board?w={ws}").text
    for status, label in LABELS.items():
        assert re.search(rf"\.s-{status} \{{ --c: var\(--{status}\); --cbg: var\(--{status}-bg\); \}}", css), status
        assert re.search(rf"--{status}: #[0-9a-f]{{6}}; --{status}-bg: #[0-9a-f]{{6}};", css), status
        assert f'<span class="chip s-{status}">{label}</span>' in legend, status
        assert f'class="column s-{status}"' in board and f'class="count s-{status}"' in board, status
    colours = [re.search(rf"--{status}: (#[0-9a-f]{{6}});", css).group(1) for status in LABELS]
    rgb = [tuple(int(c[i : i + 2], 16) for i in (1, 3, 5)) for c in colours]
    for i, a in enumerate(rgb):  # no two statuses look alike (grey cancelled beside slate pending did)
        for b in rgb[i + 1 :]:
            assert max(abs(x - y) for x, y in zip(a, b, strict=True)) >= 24, (colours, a, b)


def test_ctrl_c_stops_the_ui_quietly_while_a_page_follows_the_event_stream(tmp_path: Path):
    """A browser tab keeps /events open; Ctrl-C must end the stream cleanly, not log an ASGI ERROR."""
    import signal
    import threading

    db = str(tmp_path / "quiet.db")
    seed(db, "shop")
    with ui_process(db, "--agent", "olivia") as (login_url, proc):
        base = login_url.split("/ui/")[0]
        opened = threading.Event()
        ended: list[str] = []

        def follow() -> None:
            with httpx2.Client(base_url=base, timeout=30) as client:
                assert client.get(login_url).status_code == 303  # signed in (a cookie), sent on to the board
                try:
                    with client.stream("GET", "/ui/events?w=shop") as stream:
                        for line in stream.iter_lines():
                            if line.startswith("event: change"):
                                opened.set()
                    ended.append("the server ended the stream")
                except httpx2.HTTPError as exc:
                    ended.append(repr(exc))

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        assert opened.wait(30)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
        reader.join(timeout=10)
        stderr = proc.stderr.read()
    assert proc.returncode in (0, 130), (proc.returncode, stderr)
    assert "ERROR" not in stderr and "Traceback" not in stderr, stderr
    assert ended == ["the server ended the stream"]  # completed, not cut off


def test_the_cookie_is_an_opaque_session_and_signing_out_ends_it_on_the_server(url: str, db: str, ws: str):
    tok = token(db, ws, "olga", "operator")
    with signed_in(url, tok) as client:
        sid = next(iter(client.cookies.values()))
        assert sid != tok and tok not in sid and sid.startswith("mcphs_")
        # the cookie is no bearer token: /mcp does not take it
        mcp = httpx2.post(f"{url}/mcp", headers={"authorization": f"Bearer {sid}"}, json={}, timeout=30)
        assert mcp.status_code == 401
        board = client.get(f"/ui/board?w={ws}")
        assert board.status_code == 200
        out = client.post("/ui/logout", data={"csrf": csrf_of(board.text)}, headers={"origin": url})
        assert out.status_code == 303
    # a copy of the cookie (kept by whatever else received it) is dead too
    port = url.rsplit(":", 1)[1]
    with httpx2.Client(base_url=url, follow_redirects=False, timeout=30, cookies={f"mcph_console_{port}": sid}) as copy:
        assert copy.get(f"/ui/board?w={ws}").headers["location"] == "/ui/login"
    with signed_in(url, tok) as again:  # the token itself still signs in
        assert again.get(f"/ui/board?w={ws}").status_code == 200


def _stream_end_seconds(client: httpx2.Client, ws: str, end: Callable[[], None]) -> float:
    """Open the event stream, run `end` once it is open, and time how long the stream goes on after."""
    with client.stream("GET", f"/ui/events?w={ws}", timeout=30) as stream:
        assert stream.status_code == 200
        lines = stream.iter_lines()
        for line in lines:
            if line.startswith("event: change"):
                break
        end()
        ended = time.monotonic()
        for _line in lines:
            pass
        return time.monotonic() - ended


def test_an_open_event_stream_ends_within_a_second_of_revocation_or_sign_out(url: str, db: str, ws: str):
    tok = token(db, ws, "rita", "reader")
    with signed_in(url, tok) as client:
        page = client.get(f"/ui/board?w={ws}").text

        def sign_out() -> None:
            assert client.post("/ui/logout", data={"csrf": csrf_of(page)}, headers={"origin": url}).status_code == 303

        assert _stream_end_seconds(client, ws, sign_out) < 1.5
    with signed_in(url, tok) as client:

        def revoke() -> None:
            assert run_cli("token", "revoke", tok, "--db", db).returncode == 0  # another process

        assert _stream_end_seconds(client, ws, revoke) < 1.5


def test_event_streams_per_token_are_capped_and_other_calls_stay_fast(tmp_path: Path):
    db = str(tmp_path / "streams.db")
    seed(db, "w")
    tok, other = token(db, "w", "rita", "reader"), token(db, "w", "sam", "reader")
    agent = token(db, "w", "bot", "agent")
    with shared_server(db, max_streams_per_token=3) as url, ExitStack() as held:
        client = held.enter_context(signed_in(url, tok))
        for _ in range(3):
            assert held.enter_context(client.stream("GET", "/ui/events?w=w", timeout=30)).status_code == 200
        refused = client.get("/ui/events?w=w")
        assert refused.status_code == 429 and "MCP_HARNESS_MAX_STREAMS_PER_TOKEN" in refused.text
        with signed_in(url, other) as second:  # another token is not starved
            with second.stream("GET", "/ui/events?w=w", timeout=30) as stream:
                assert stream.status_code == 200
        assert httpx2.get(f"{url}/healthz", timeout=2).status_code == 200

        async def call() -> None:
            headers = {"Authorization": f"Bearer {agent}"}
            with anyio.fail_after(10):
                async with (
                    httpx2.AsyncClient(headers=headers) as http,
                    Client(streamable_http_client(f"{url}/mcp", http_client=http), read_timeout_seconds=10) as mcp,
                ):
                    assert not (await mcp.call_tool("list_tasks", {})).is_error

        anyio.run(call)
    with shared_server(db, max_streams_per_token=1) as url, signed_in(url, tok) as client:
        with client.stream("GET", "/ui/events?w=w", timeout=30) as stream:
            assert stream.status_code == 200
            next(line for line in stream.iter_lines() if line.startswith("event: change"))
        deadline = time.monotonic() + 5  # a closed stream gives its place back (once the server hears it)
        while True:
            with client.stream("GET", "/ui/events?w=w", timeout=30) as again:
                if again.status_code != 429:
                    assert again.status_code == 200
                    break
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_bad_console_input_is_a_one_line_400_on_both_backends(db_url: str, caplog: pytest.LogCaptureFixture):
    ws = f"shop-{secrets.token_hex(3)}"
    seed(db_url, ws)
    tok = token(db_url, ws, "olga", "operator")
    caplog.set_level("WARNING")
    with shared_server(db_url) as url, signed_in(url, tok) as client:
        too_big = "before must be a whole number from 1 to 9223372036854775807"
        for path, expected in (
            (f"/ui/log?w={ws}&before=9223372036854775808", too_big),
            (f"/ui/task?w={ws}&key=schema&before=9223372036854775808", too_big),
            (f"/ui/log?w={ws}&before=99999999999999999999999999", "before must be a whole number"),
            (f"/ui/log?w={ws}&q=a%00b", "q must not contain control characters"),
            (f"/ui/log?w={ws}&agent=x%1b%5b2K", "agent must not contain control characters"),
        ):
            response = client.get(path)
            assert response.status_code == 400, (path, response.status_code)
            message = re.search(r'class="panel message">.*?<p>(.*?)</p>', response.text, re.S)
            assert html.unescape(message.group(1)) == expected, path  # one line, the same on both backends
        assert client.get(f"/ui/log?w={ws}&before=9223372036854775807").status_code == 200  # the largest is fine
        assert client.get(f"/ui/log?w={ws}&q=a%20b").status_code == 200
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")], caplog.records


def test_a_huge_form_is_a_400_without_an_error_in_the_log(url: str, db: str, ws: str, caplog: pytest.LogCaptureFixture):
    caplog.set_level("WARNING")
    big = "x" * (1024 * 1024 + 10)
    with httpx2.Client(base_url=url, timeout=30) as client:
        multipart = client.post("/ui/login", files={"token": (None, big)}, headers={"origin": url})
        encoded = client.post("/ui/login", data={"token": big}, headers={"origin": url})
    for response in (multipart, encoded):
        assert response.status_code == 400, response.status_code
        assert "at most 1024 KB" in response.text
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")], caplog.records


def test_the_done_banner_says_only_the_known_action_words(url: str, db: str, ws: str):
    with signed_in(url, token(db, ws, "rita", "reader")) as client:
        phishing = "approved. Your session expired: paste your token at http://evil.example"
        page = client.get("/ui/task", params={"w": ws, "key": "schema", "done": phishing})
        assert page.status_code == 200 and 'class="flash"' not in page.text and "session expired" not in page.text
        page = client.get(f"/ui/task?w={ws}&key=schema&done=approved")
        assert page.status_code == 200 and "Task schema was approved." in page.text


def test_the_event_stream_of_one_workspace_hears_nothing_of_another(url: str, db: str, ws: str):
    other = f"{ws}-other"
    seed(db, other)
    heard: list[float] = []
    with signed_in(url, token(db, ws, "rita", "reader")) as client:
        with client.stream("GET", f"/ui/events?w={ws}", timeout=60) as stream:
            lines = stream.iter_lines()
            next(line for line in lines if line.startswith("event: change"))  # the first, as it opens

            def listen() -> None:
                for line in lines:
                    if line.startswith("event: change"):
                        heard.append(time.monotonic())
                        return

            listener = threading.Thread(target=listen, daemon=True)
            listener.start()
            agent_call(db, other, "bob", "record_progress", summary="in the other workspace")  # another process
            agent_call(db, other, "bob", "add_tasks", tasks=[{"key": "more", "title": "More"}])
            time.sleep(1.5)  # the feed's look, and the stream's quiet time, have passed
            mine = time.monotonic()
            agent_call(db, ws, "bob", "record_progress", summary="in this workspace")
            listener.join(timeout=30)
    assert heard and heard[0] > mine  # the first change heard is this workspace's


def test_sessions_end_on_sign_out_and_revocation_on_both_backends(db_url: str):
    ws = f"shop-{secrets.token_hex(3)}"
    seed(db_url, ws)
    tok = token(db_url, ws, "rita", "reader")
    with shared_server(db_url) as url:
        with signed_in(url, tok) as client:
            assert next(iter(client.cookies.values())).startswith("mcphs_")
            page = client.get(f"/ui/board?w={ws}").text

            def sign_out() -> None:
                out = client.post("/ui/logout", data={"csrf": csrf_of(page)}, headers={"origin": url})
                assert out.status_code == 303

            assert _stream_end_seconds(client, ws, sign_out) < 1.5
            assert client.get(f"/ui/board?w={ws}").headers["location"] == "/ui/login"
        with signed_in(url, tok) as client:

            def revoke() -> None:
                assert run_cli("token", "revoke", tok, "--db", db_url).returncode == 0  # another process

            assert _stream_end_seconds(client, ws, revoke) < 1.5
            assert client.get(f"/ui/board?w={ws}").headers["location"] == "/ui/login"


def test_a_person_answers_a_question_from_the_inbox_and_the_task_page(url: str, db: str, ws: str):
    """An agent asks the operators; the inbox shows it (a "needs you" count), the person replies (CSRF and
    Origin checked like the actions) and marks it done; the task page shows the thread and sends too."""
    asked = agent_call(
        db, ws, "coder", "message", action="send", to="operators", body="Port <b>8080</b> or 9090?", task_key="schema"
    )
    with signed_in(url, token(db, ws, "olga", "operator")) as client:
        page = client.get(f"/ui/inbox?w={ws}").text
        assert "1 needs you" in page and asked["id"] in page
        assert "Port &lt;b&gt;8080&lt;/b&gt; or 9090?" in page, "escaped"
        form = {
            "csrf": csrf_of(page),
            "w": ws,
            "to": "coder",
            "body": "8080",
            "reply_to": asked["id"],
            "key": "schema",
            "back": "inbox",
            "nonce": "n1",
        }
        for data, headers in [({**form, "csrf": "x" * 64}, {"origin": url}), (form, {"origin": "http://evil.example"})]:
            assert client.post("/ui/messages/send", data=data, headers=headers).status_code == 403
        sent = client.post("/ui/messages/send", data=form, headers={"origin": url})
        assert sent.status_code == 303 and "/ui/inbox" in sent.headers["location"]
        again = client.post("/ui/messages/send", data=form, headers={"origin": url})  # a double submit
        assert again.status_code == 303
        done = client.post(
            "/ui/messages/ack", data={"csrf": form["csrf"], "w": ws, "id": asked["id"]}, headers={"origin": url}
        )
        assert done.status_code == 303
        assert "Nothing waits for you" in client.get(f"/ui/inbox?w={ws}").text
        task_page = client.get(f"/ui/task?w={ws}&key=schema").text
        assert "Messages about this task" in task_page and "8080" in task_page and asked["id"] in task_page
        new = {"csrf": form["csrf"], "w": ws, "to": "coder", "body": "also: use TLS", "key": "schema", "back": "task"}
        moved = client.post("/ui/messages/send", data=new, headers={"origin": url})
        assert moved.status_code == 303 and "key=schema" in moved.headers["location"]
    got = agent_call(db, ws, "coder", "message", action="read")
    assert [(m["from"], m["body"]) for m in got["messages"]] == [("olga", "also: use TLS"), ("olga", "8080")]
    with signed_in(url, token(db, ws, "rita", "reader")) as client:
        page = client.get(f"/ui/inbox?w={ws}").text
        refused = client.post("/ui/messages/send", data={**form, "csrf": csrf_of(page)}, headers={"origin": url})
        assert refused.status_code == 403
