"""The console's Sessions page over real HTTP (a shared server in a thread): live runners and sessions,
ended ones with their outcome, costs shown as reported ("unknown", never 0, when none was), agent-written
text escaped, and the operator's stop (CSRF and Origin checked, readers refused). The records are written
as a runner writes them, through `harness.runs`; no runner runs."""

from __future__ import annotations

import re
import secrets
import uuid
from collections.abc import Iterator

import anyio
import pytest
from support import settings_for
from support.console import shared_server, signed_in, token

from mcp_harness.service import Harness, Identity

pytestmark = pytest.mark.slow  # the CLI makes the tokens

HOSTILE = '<img src=x onerror=alert(1)> done, "quoted" & <b>bold</b>'


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("sessions") / "harness.db")


@pytest.fixture(scope="module")
def url(db: str) -> Iterator[str]:
    with shared_server(db) as served:
        yield served


def runs(db: str, workspace: str) -> dict[str, str]:
    """A live runner with two sessions running (one with a reported cost and a last tool call, one
        without) and two ended ones (one with hostile last words and task key, one whose cost is unknown). The
    records name tasks by key only, as the runner writes them; no task need exist for the page."""
    ids = {name: str(uuid.uuid4()) for name in ("busy", "fresh", "done", "crashed")}

    async def main() -> None:
        async with Harness.open(settings_for(db)) as h:
            runner = f"runner-{secrets.token_hex(3)}"
            await h.runs.register(workspace, runner, "build-box", 4242)
            await h.runs.runner_seen(runner, "waiting_on_review")
            for slot, (name, key) in enumerate(
                [("busy", "api"), ("fresh", "ui"), ("done", "<b>docs</b>"), ("crashed", "ci")], start=1
            ):
                await h.runs.start_session(
                    workspace,
                    ids[name],
                    runner=runner,
                    slot=slot,
                    agent=f"claude-code:{name}",
                    task_key=key,
                    kind="work",
                    transcript=None,
                )
            await h.runs.session_seen(ids["busy"], 7, 0.1234, "mcp__harness__record_progress <script>x</script>")
            await h.runs.end_session(
                ids["done"], "completed", exit_code=0, turns=12, cost=0.5, last_tool=None, last_words=HOSTILE
            )
            await h.runs.end_session(
                ids["crashed"], "crashed", exit_code=137, turns=3, cost=None, last_tool=None, last_words=None
            )

    anyio.run(main)
    return ids


def stop_asked(db: str, workspace: str, session: str) -> str | None:
    async def main() -> str | None:
        async with Harness.open(settings_for(db)) as h:
            return (await h.runs.get(Identity(workspace, "x"), session)).stop_requested_by

    return anyio.run(main)


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


def row(page: str, session: str) -> str:
    """The table row of one session."""
    return re.search(rf'<tr data-session="{session}">(.*?)</tr>', page, re.S).group(1)


def test_the_sessions_page_shows_runners_live_and_ended_sessions_escaped(url: str, db: str):
    ws = f"ws-{secrets.token_hex(3)}"
    ids = runs(db, ws)
    with signed_in(url, token(db, ws, "rita", "reader")) as client:
        board = client.get(f"/ui/board?w={ws}").text
        assert f'href="/ui/sessions?w={ws}"' in board  # in the navigation
        response = client.get(f"/ui/sessions?w={ws}")
        assert response.status_code == 200
        page = response.text
    runners = re.search(r'<table class="grid runners">(.*?)</table>', page, re.S).group(1)
    assert "build-box" in runners and "4242" in runners and "waiting_on_review" in runners
    busy, fresh = row(page, ids["busy"]), row(page, ids["fresh"])
    assert 'class="elapsed"' in busy and ">api</a>" in busy and "claude-code:busy" in busy and ">7<" in busy
    assert "$0.1234" in busy
    assert "mcp__harness__record_progress &lt;script&gt;x&lt;/script&gt;" in busy and "<script>x" not in page
    assert "unknown" in fresh and "$0.0000" not in fresh  # no cost reported yet: never shown as 0
    done, crashed = row(page, ids["done"]), row(page, ids["crashed"])
    assert "completed" in done and "$0.5000" in done and ">12<" in done
    assert "&lt;img src=x onerror=alert(1)&gt;" in done and "<img src=x" not in page
    assert "&lt;b&gt;docs&lt;/b&gt;" in done and "<b>docs</b>" not in page  # the task key too
    assert "crashed" in crashed and "unknown" in crashed and "$0" not in crashed
    assert "completed</span> 1 ($0.5000)" in page  # the outcomes so far
    # a reader sees no stop button
    assert "/ui/sessions/stop" not in page and 'data-action="stop"' not in page


def test_an_operator_stops_a_running_session_and_forged_or_reader_stops_are_refused(url: str, db: str):
    ws = f"ws-{secrets.token_hex(3)}"
    ids = runs(db, ws)
    with signed_in(url, token(db, ws, "rita", "reader")) as reader:
        page = reader.get(f"/ui/sessions?w={ws}").text
        refused = reader.post(
            "/ui/sessions/stop", headers={"origin": url}, data={"csrf": csrf_of(page), "w": ws, "id": ids["busy"]}
        )
        assert refused.status_code == 403 and "operator" in refused.text
    assert stop_asked(db, ws, ids["busy"]) is None
    with signed_in(url, token(db, ws, "olga", "operator")) as client:
        page = client.get(f"/ui/sessions?w={ws}").text
        assert page.count('action="/ui/sessions/stop"') == 2  # the two running sessions, not the ended ones
        form = {"csrf": csrf_of(page), "w": ws, "id": ids["busy"]}
        forged = [
            ({**form, "csrf": ""}, {"origin": url}),  # no CSRF token
            ({**form, "csrf": "x" * 64}, {"origin": url}),  # a wrong one
            (form, {"origin": "http://evil.example"}),  # another origin
            (form, {}),  # no origin at all
        ]
        for data, headers in forged:
            response = client.post("/ui/sessions/stop", data=data, headers=headers)
            assert response.status_code == 403, (data, headers)
        assert stop_asked(db, ws, ids["busy"]) is None
        response = client.post("/ui/sessions/stop", data=form, headers={"origin": url})
        assert response.status_code == 303 and response.headers["location"] == f"/ui/sessions?w={ws}&stopped=1"
        assert stop_asked(db, ws, ids["busy"]) == "olga"
        after = client.get(response.headers["location"]).text
        assert "Stop asked" in after and "stop asked by olga" in row(after, ids["busy"])
        assert after.count('action="/ui/sessions/stop"') == 1
        ended = client.post("/ui/sessions/stop", data={**form, "id": ids["done"]}, headers={"origin": url})
        assert ended.status_code == 400 and "ended already" in ended.text
        unknown = client.post("/ui/sessions/stop", data={**form, "id": "nope"}, headers={"origin": url})
        assert unknown.status_code == 404
        other = f"ws-{secrets.token_hex(3)}"  # a token of one workspace acts in that workspace only
        elsewhere = client.post("/ui/sessions/stop", data={**form, "w": other}, headers={"origin": url})
        assert elsewhere.status_code == 403
