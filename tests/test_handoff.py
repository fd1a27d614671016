"""Handoff (contract revision 3, issue 25 items 1b, 2, 3, 6): what the next holder of a task must know
reaches it. A claim's task and each `my_tasks` entry carry `context` (the task's newest notes, the
harness's paired with who caused them, and its dependencies' results) within 2,000 bytes; `release` takes
a reason; a connection's end ends its leases (`TaskService.end_leases` with the connection's tokens);
the last attempt's `lease_lost` names the way out; only a person revives a cancelled task. Through the
official MCP client on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager

import pytest
from mcp import Client
from support import call, fail, settings_for

from mcp_harness import clock
from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, UpdateTaskArgs
from mcp_harness.mcp.server import create_server
from mcp_harness.service import Harness, Identity
from mcp_harness.tasks.context import MAX_BYTES, task_context

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def connect(url: str, workspace: str, agent: str, role: str = "agent"):
    server = create_server(settings_for(url), Identity(workspace, agent, role))
    async with Client(server, raise_exceptions=False) as client:
        yield client


def size(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


async def complete(client, key: str, token: str, **kw) -> dict:
    return await call(
        client,
        "update_task",
        task_key=key,
        action="complete",
        lease_token=token,
        verification=kw.pop("verification", "pytest -q passed"),
        **kw,
    )


async def test_a_claim_carries_the_release_reason_and_the_dependency_result(db_url, workspace):
    async with connect(db_url, workspace, "ann") as ann, connect(db_url, workspace, "bob") as bob:
        await call(
            ann,
            "add_tasks",
            tasks=[{"key": "api", "title": "API"}, {"key": "ui", "title": "UI", "depends_on": ["api"]}],
        )
        first = await call(ann, "claim_task")
        assert "context" not in first["task"]  # nothing to say yet: omitted
        await complete(ann, "api", first["lease"]["token"], result={"commit": "bbe720c", "port": 8080})
        got = await call(ann, "claim_task")
        assert got["task"]["context"]["dependencies"] == [
            {
                "key": "api",
                "status": "done",
                "result": {"commit": "bbe720c", "port": 8080},
                "verification": "pytest -q passed",
            }
        ]
        await call(ann, "record_progress", summary="layout half done", task_key="ui")
        await call(
            ann,
            "update_task",
            task_key="ui",
            action="release",
            lease_token=got["lease"]["token"],
            reason="out of time; the form still needs validation",
        )

        taken = await call(bob, "claim_task")
        context = taken["task"]["context"]
        assert context["dependencies"][0]["result"] == {"commit": "bbe720c", "port": 8080}
        newest = context["notes"][0]
        assert newest["by"] == "ann" and "out of time; the form still needs validation" in newest["text"]
        assert set(newest) == {"seq", "at", "by", "text"} and newest["at"].endswith("Z")
        assert context["notes"][1]["by"] == "ann" and context["notes"][1]["text"] == "layout half done"
        assert [n["seq"] for n in context["notes"]] == sorted((n["seq"] for n in context["notes"]), reverse=True)

        # the holder's restore_state shows the same context on its my_tasks entry
        restored = await call(bob, "restore_state")
        assert restored["my_tasks"][0]["context"] == context


async def test_an_operator_release_needs_a_reason_that_reaches_the_next_claimer(db_url, workspace):
    async with connect(db_url, workspace, "ann") as ann, connect(db_url, workspace, "olga", "operator") as olga:
        await call(ann, "add_tasks", tasks=[{"key": "a", "title": "A"}])
        await call(ann, "claim_task")
        err = await fail(olga, "update_task", task_key="a", action="release")
        assert err.code == "invalid_argument" and "reason" in err.text
        await call(olga, "update_task", task_key="a", action="release", reason="ann is off sick")
        note = (await call(ann, "claim_task"))["task"]["context"]["notes"][0]
        assert note["by"] == "olga" and "ann is off sick" in note["text"] and "held by ann" in note["text"]


async def test_a_long_result_is_cut_and_a_cancelled_dependency_says_why(db_url, workspace):
    async with connect(db_url, workspace, "ann") as ann, connect(db_url, workspace, "olga", "operator") as olga:
        await call(
            ann,
            "add_tasks",
            tasks=[
                {"key": "big", "title": "big"},
                {"key": "gone", "title": "gone"},
                {"key": "next", "title": "next", "depends_on": ["big", "gone"]},
            ],
        )
        got = await call(ann, "claim_task", task_key="big")
        result = {"log": "x" * 400}
        await complete(ann, "big", got["lease"]["token"], result=result, verification="v" * 500)
        await call(olga, "update_task", task_key="gone", action="cancel", reason="replaced by big")
        deps = {d["key"]: d for d in (await call(ann, "claim_task"))["task"]["context"]["dependencies"]}
        whole = json.dumps(result, separators=(",", ":"))
        assert deps["big"]["cut"] is True and deps["big"]["result"] == whole[:300] + "…"
        assert deps["big"]["verification"] == "v" * 300 + "…"
        assert deps["gone"] == {"key": "gone", "status": "cancelled", "reason": "replaced by big"}


async def test_an_approval_comment_reaches_the_dependents(db_url, workspace):
    """A person's comment on approving a gate or a review task travels to what depends on it (issue
    h8 item 1): the dependency entry carries it as `comment`, cut to 300 characters as results are."""
    async with connect(db_url, workspace, "ann") as ann, connect(db_url, workspace, "olga", "operator") as olga:
        await call(
            ann,
            "add_tasks",
            tasks=[
                {"key": "release-signoff", "title": "sign-off", "kind": "gate"},
                {"key": "notes", "title": "notes", "review": True},
                {"key": "plain", "title": "plain", "review": True},
                {"key": "release", "title": "release", "depends_on": ["release-signoff", "notes", "plain"]},
            ],
        )
        said = "ship 1.0 on Thursday; arm64 follows in 1.0.1"
        await call(olga, "update_task", task_key="release-signoff", action="approve", comment=said)
        for key, comment in (("notes", "c" * 400), ("plain", None)):
            got = await call(ann, "claim_task", task_key=key)
            await complete(ann, key, got["lease"]["token"])
            await call(olga, "update_task", task_key=key, action="approve", **({"comment": comment} if comment else {}))
        deps = {d["key"]: d for d in (await call(ann, "claim_task"))["task"]["context"]["dependencies"]}
        assert deps["release-signoff"] == {"key": "release-signoff", "status": "done", "comment": said}
        assert deps["notes"]["comment"] == "c" * 300 + "…" and deps["notes"]["cut"] is True
        assert "comment" not in deps["plain"] and "cut" not in deps["plain"]  # approved without a word
        full = (await call(ann, "list_tasks", task_key="release"))["tasks"][0]["context"]["dependencies"]
        assert {d["key"]: d.get("comment") for d in full}["notes"] == "c" * 400  # read on purpose: uncut


async def test_a_reason_that_ends_a_sentence_is_not_followed_by_a_semicolon(db_url, workspace):
    """A note joins a person's or agent's text to what the harness adds: after a text that ends with
    `.`, `?` or `!` a new sentence starts (not "CHANGELOG.md.; it is pending again")."""
    async with connect(db_url, workspace, "ann") as ann, connect(db_url, workspace, "olga", "operator") as olga:
        await call(
            ann,
            "add_tasks",
            tasks=[{"key": "a", "title": "A"}, {"key": "b", "title": "B", "review": True}, {"key": "c", "title": "C"}],
        )
        await call(ann, "claim_task", task_key="a")
        await call(olga, "update_task", task_key="a", action="release", reason="ann left; see CHANGELOG.md.")
        got = await call(ann, "claim_task", task_key="b")
        await complete(ann, "b", got["lease"]["token"])
        await call(olga, "update_task", task_key="b", action="reject", comment="why no tests?")
        got = await call(ann, "claim_task", task_key="c")
        await call(
            ann, "update_task", task_key="c", action="fail", lease_token=got["lease"]["token"], error="disk full!"
        )
        texts = {}
        for key in ("a", "b", "c"):
            texts[key] = (await call(ann, "list_tasks", task_key=key))["tasks"][0]["context"]["notes"][0]["text"]
        said = "operator olga released task a (held by ann): ann left; see CHANGELOG.md. It is pending again"
        assert texts["a"] == said
        assert texts["b"] == "olga rejected task b: why no tests? It is pending again for its next claimer"
        assert texts["c"].startswith("task c failed on attempt 1 (ann): disk full! Will be retried in "), texts["c"]
        assert (await call(ann, "claim_task", task_key="a"))["task"]["context"]["notes"][0]["text"] == said


async def test_the_context_keeps_within_its_bound_however_long_the_history(db_url, workspace):
    """Many long notes of every kind and long dependency results: at most 2,000 bytes, notes with a reason
    kept before take-over and connection-end notes, the newest first."""
    async with connect(db_url, workspace, "ann") as ann, connect(db_url, workspace, "olga", "operator") as olga:
        deps = [{"key": f"dep-{i}-" + "k" * 40, "title": "d"} for i in range(6)]
        await call(
            ann,
            "add_tasks",
            tasks=[*deps, {"key": "t", "title": "T", "max_attempts": 100, "depends_on": [d["key"] for d in deps]}],
        )
        for d in deps:
            got = await call(ann, "claim_task", task_key=d["key"])
            await complete(ann, d["key"], got["lease"]["token"], result={"text": "r" * 500}, verification="v" * 400)
        for i in range(30):
            await call(ann, "record_progress", summary=f"step {i} " + "s" * 400, task_key="t")
        await call(ann, "claim_task", task_key="t")
        await call(olga, "update_task", task_key="t", action="release", reason="why " + "w" * 400)
        got = await call(ann, "claim_task", task_key="t")
        held = (await call(ann, "restore_state"))["my_tasks"][0]
        assert held["key"] == "t" and size(held["context"]) <= MAX_BYTES
        clock.advance(got["lease"]["expires_in_seconds"] + 1)
        taken = await call(olga, "claim_task", task_key="t")  # a take-over (olga may claim: an agent's power)
        context = taken["task"]["context"]
        assert size(context) <= MAX_BYTES, size(context)
        texts = [n["text"] for n in context["notes"]]
        # the take-over note goes before the release's reason, which stays
        assert any("why w" in t for t in texts) and not any("took over" in t for t in texts), texts
        assert [n["seq"] for n in context["notes"]] == sorted((n["seq"] for n in context["notes"]), reverse=True)
        assert [d["key"] for d in context["dependencies"]] == [d["key"] for d in deps]
        assert all(d.get("cut") for d in context["dependencies"])


async def test_task_context_full_answers_results_uncut(db_url, workspace):
    """`task_context(conn, workspace, row, full=True)`: what list_tasks(task_key=K) answers."""
    settings = settings_for(db_url)
    me = Identity(workspace, "ann")
    async with Harness.open(settings) as h:
        await h.tasks.add(
            me, AddTasksArgs(tasks=[{"key": "a", "title": "A"}, {"key": "b", "title": "B", "depends_on": ["a"]}])
        )
        got = await h.tasks.claim(me, ClaimTaskArgs())
        await h.tasks.update(
            me,
            UpdateTaskArgs(
                task_key="a",
                action="complete",
                lease_token=got.lease.token,
                result={"log": "x" * 5000},
                verification="ok",
            ),
        )
        async with h.db.read() as conn:
            from mcp_harness.tasks.store import tasks as store

            row = await store.get(conn, workspace, "b")
            full = await task_context(conn, workspace, row, full=True)
            bounded = await task_context(conn, workspace, row)
        assert full.dependencies[0].result == {"log": "x" * 5000} and not full.dependencies[0].cut
        assert bounded.dependencies[0].cut


async def test_connection_end_ends_only_its_own_leases_unless_renewed_elsewhere(db_url, workspace):
    """`end_leases` with a connection's tokens (token -> when it last took or renewed it): a lease another
    connection renewed since stays; the ended one is claimable at once, with a note naming its holder."""
    settings = settings_for(db_url)
    me, bob = Identity(workspace, "ann"), Identity(workspace, "bob")
    async with Harness.open(settings) as h:
        await h.tasks.add(me, AddTasksArgs(tasks=[{"key": "a", "title": "A"}, {"key": "b", "title": "B"}]))
        a = await h.tasks.claim(me, ClaimTaskArgs(task_key="a"))
        b = await h.tasks.claim(me, ClaimTaskArgs(task_key="b"))
        seen = clock.now()
        clock.advance(1)
        await h.tasks.update(
            me, UpdateTaskArgs(task_key="b", action="heartbeat", lease_token=b.lease.token)
        )  # another connection
        ended = await h.tasks.end_leases(
            me, "its connection ended (stdin closed)", tokens={a.lease.token: seen, b.lease.token: seen}
        )
        assert ended == ["a"]
        taken = await h.tasks.claim(bob, ClaimTaskArgs(task_key="a"))
        assert taken.task is not None and taken.lease.attempt == 2
        notes = taken.task.context.notes
        # the take-over says what happened: the connection's end, not an expiry (issue: fresh-eyes trial 5)
        assert notes[0].by == "bob" and "the lease of ann ended: its connection ended (stdin closed)" in notes[0].text
        assert notes[1].by == "ann" and "its connection ended (stdin closed)" in notes[1].text


async def test_the_last_attempt_names_the_way_out_and_only_a_person_revives_a_cancelled_task(db_url, workspace):
    async with connect(db_url, workspace, "ann") as ann, connect(db_url, workspace, "olga", "operator") as olga:
        await call(ann, "add_tasks", tasks=[{"key": "a", "title": "A", "max_attempts": 1}, {"key": "c", "title": "C"}])
        got = await call(ann, "claim_task", task_key="a", lease_seconds=10)
        await call(ann, "claim_task", task_key="c")
        clock.advance(11)
        assert (await call(ann, "claim_task"))["task"] is None  # settles a: failed on its last attempt
        err = await fail(
            ann, "update_task", task_key="a", action="complete", lease_token=got["lease"]["token"], verification="done"
        )
        assert err.code == "lease_lost" and "reopen" in err.text and "claim_task(task_key='a')" in err.text, err.text
        assert err.text.index("reopen") < err.text.index("claim_task(") < err.text.index("complete with")

        await call(olga, "update_task", task_key="c", action="cancel", reason="not needed")
        err = await fail(ann, "update_task", task_key="c", action="reopen", reason="I want it")
        # what to do instead reaches a person: the operators' inbox, about this task (trial item 5)
        assert err.code == "forbidden" and "message(action='send', to='operators', task_key='c'" in err.text, err.text
        assert "record_progress" not in err.text, err.text
        assert (await call(ann, "update_task", task_key="a", action="reopen", reason="finished"))["status"] == "pending"
        assert (await call(olga, "update_task", task_key="c", action="reopen", reason="needed"))["status"] == "pending"


async def test_a_persons_answer_about_a_task_reaches_the_next_holder(db_url, workspace):
    """The trial: C asked the operators about api-refactor, a person answered C, C acknowledged and died;
    F took the task over and its context held only the take-over and connection-end notes. The messages
    naming a task are notes about it: by the sender, subject and body cut as notes are, newest first with
    the progress entries (5 at most), and within the byte bound they rank with the notes that carry a
    reason, before agents' entries and take-over notes."""
    c_name, f_name = "claude-code:cccccccc", "claude-code:ffffffff"
    async with (
        connect(db_url, workspace, c_name) as c,
        connect(db_url, workspace, f_name) as f,
        connect(db_url, workspace, "carol", "operator") as carol,
    ):
        await call(c, "add_tasks", tasks=[{"key": "api-refactor", "title": "Refactor the API"}])
        await call(c, "claim_task")
        asked = await call(
            c,
            "message",
            action="send",
            to="operators",
            task_key="api-refactor",
            subject="layout",
            body="one module, or\n split per resource?",
        )
        answer = await call(
            carol,
            "message",
            action="send",
            to=c_name,
            task_key="api-refactor",
            reply_to=asked["id"],
            body="split per resource",
        )
        [got] = (await call(c, "message", action="read"))["messages"]
        await call(c, "message", action="ack", ids=[got["id"]])
        async with Harness.open(settings_for(db_url)) as h:  # C's connection ends (its stdin closed)
            assert await h.tasks.end_leases(Identity(workspace, c_name), "its connection ended (stdin closed)")
        taken = await call(f, "claim_task", task_key="api-refactor")
        notes = taken["task"]["context"]["notes"]
        assert notes[0]["by"] == f_name and f"the lease of {c_name} ended" in notes[0]["text"]
        assert notes[1]["by"] == c_name and "its connection ended" in notes[1]["text"]
        assert notes[2] == {"message": answer["id"], "at": answer["at"], "by": "carol", "text": "split per resource"}
        assert notes[3] == {
            "message": asked["id"],
            "at": asked["at"],
            "by": c_name,
            "text": "layout | one module, or split per resource?",
        }
        assert (await call(f, "restore_state"))["my_tasks"][0]["context"]["notes"] == notes
        # list_tasks(task_key=K) answers the same notes, whole
        assert (await call(f, "list_tasks", task_key="api-refactor"))["tasks"][0]["context"]["notes"] == notes

        # the bound: long notes and a long dependency result; the person's answer is kept before the
        # agents' entries and the take-over and connection-end notes
        await call(
            carol,
            "add_tasks",
            tasks=[
                {"key": "dep1", "title": "Dep"},
                {"key": "dep2", "title": "Dep"},
                {"key": "next", "title": "Next", "depends_on": ["dep1", "dep2"]},
            ],
        )
        for key in ("dep1", "dep2"):
            dep = await call(carol, "claim_task", task_key=key)
            await complete(carol, key, dep["lease"]["token"], result={"log": "r" * 600}, verification="v" * 600)
        await call(c, "record_progress", summary="older entry " + "o" * 400, task_key="next")
        kept = await call(carol, "message", action="send", to="claude-code", task_key="next", body="keep " + "k" * 400)
        await call(c, "record_progress", summary="newer entry " + "n" * 400, task_key="next")
        await call(c, "claim_task", task_key="next")
        async with Harness.open(settings_for(db_url)) as h:
            await h.tasks.end_leases(Identity(workspace, c_name), "its connection ended (stdin closed)")
        context = (await call(f, "claim_task", task_key="next"))["task"]["context"]
        assert size(context) <= MAX_BYTES, size(context)
        texts = [n["text"] for n in context["notes"]]
        assert any(n.get("message") == kept["id"] and n["by"] == "carol" for n in context["notes"]), texts
        assert not any(t.startswith("older entry") for t in texts), texts
        assert not any("took over" in t or "connection ended" in t for t in texts), texts


async def test_status_says_a_lease_ended_with_its_connection_not_that_it_ran_out(db_url, workspace, capsys):
    """The trial: after stdin closed, `mcp-harness status` listed the lease under "STUCK (lease ran out
    without a heartbeat...)". Where the harness knows the connection's end (its lease_end event), it says
    so (`ended`: the reason; its own heading), and a lease that ran out by time stays STUCK."""
    from mcp_harness.cli.output import show
    from mcp_harness.cli.tables import status_report

    ann, bob = Identity(workspace, "claude-code:aaaa1111"), Identity(workspace, "bob")
    async with Harness.open(settings_for(db_url)) as h:
        await h.tasks.add(ann, AddTasksArgs(tasks=[{"key": "gone", "title": "G"}, {"key": "slept", "title": "S"}]))
        await h.tasks.claim(ann, ClaimTaskArgs(task_key="gone"))
        await h.tasks.claim(bob, ClaimTaskArgs(task_key="slept", lease_seconds=10))
        await h.tasks.end_leases(ann, "its connection ended (stdin closed)")
        clock.advance(11)
        report = await h.status(ann)
        stuck = {lease["task"]: lease for lease in report["stuck"]}
        assert stuck["gone"]["ended"] == "its connection ended (stdin closed)" and stuck["gone"]["expired"]
        assert stuck["slept"]["ended"] is None
        capsys.readouterr()
        show(*status_report(report))
        text = capsys.readouterr().out
        ran_out = text.index("STUCK (lease ran out")
        ended = text.index("ENDED (the holder's connection or session ended")
        assert "slept" in text[ran_out:ended] and "gone" not in text[ran_out:ended]
        assert "gone" in text[ended:] and "its connection ended (stdin closed)" in text[ended:]


async def end_connection(url: str, workspace: str, agent: str) -> list[str]:
    """`agent`'s connection ends (its stdin closed), as the stdio transport reports it."""
    async with Harness.open(settings_for(url)) as h:
        return await h.tasks.end_leases(Identity(workspace, agent), "its connection ended (stdin closed)")


async def test_a_persons_instruction_outlasts_the_harness_notes_of_three_session_deaths(db_url, workspace):
    """The trial (revision 3 handoff, item 1): a person's message about a task was pushed out of the next
    holder's five notes by the connection-end and take-over notes of two or three session deaths. The
    five shown are chosen by weight (reasons and messages, then agents' entries, then the harness's
    other notes), newest first within a weight, and shown newest first."""
    names = ["a1", "a2", "a3", "a4"]
    async with connect(db_url, workspace, "carol", "operator") as carol:
        await call(carol, "add_tasks", tasks=[{"key": "t", "title": "T", "max_attempts": 9}])
        async with connect(db_url, workspace, names[0]) as first:
            await call(first, "claim_task")
            clock.advance(1)
            await call(first, "record_progress", summary="schema drafted", task_key="t")
        clock.advance(1)
        said = await call(carol, "message", action="send", to="*", task_key="t", body="use the v2 endpoint")
        for before, after in zip(names, names[1:], strict=False):
            clock.advance(1)
            assert await end_connection(db_url, workspace, before) == ["t"]
            clock.advance(1)
            async with connect(db_url, workspace, after) as nxt:
                taken = await call(nxt, "claim_task", task_key="t")
        notes = taken["task"]["context"]["notes"]
        assert len(notes) == 5, notes
        texts = [n["text"] for n in notes]
        assert {"message": said["id"], "at": said["at"], "by": "carol", "text": "use the v2 endpoint"} in notes, texts
        assert "schema drafted" in texts, texts
        # the three newest harness notes fill the rest; newest first throughout
        assert texts[0].startswith("a4 took over task t") and "the lease of a3 on task t ended" in texts[1], texts
        assert texts[2].startswith("a3 took over task t"), texts
        assert texts[3:] == ["use the v2 endpoint", "schema drafted"], texts
        assert [n["at"] for n in notes] == sorted((n["at"] for n in notes), reverse=True)
        async with connect(db_url, workspace, "a4") as holder:
            assert (await call(holder, "list_tasks", task_key="t"))["tasks"][0]["context"]["notes"] == notes


async def test_a_reopen_says_the_result_it_replaces(db_url, workspace):
    """The trial (item 2): reopening a done task cleared its result and verification, and no note said
    them, so the next holder knew nothing of the earlier commit. The reopen note says them, cut so the
    note fits its 300 characters."""
    async with connect(db_url, workspace, "ann") as ann, connect(db_url, workspace, "bob") as bob:
        await call(ann, "add_tasks", tasks=[{"key": "a", "title": "A"}, {"key": "b", "title": "B"}])
        got = await call(ann, "claim_task", task_key="a")
        await complete(ann, "a", got["lease"]["token"], result={"commit": "bbe720c", "files": 3})
        await call(ann, "update_task", task_key="a", action="reopen", reason="the tests were flaky.")
        note = (await call(bob, "claim_task", task_key="a"))["task"]["context"]["notes"][0]
        assert note["by"] == "ann" and note["text"] == (
            'ann reopened task a: the tests were flaky. It was done with result {"commit":"bbe720c","files":3} '
            "/ verification pytest -q passed"
        ), note

        got = await call(ann, "claim_task", task_key="b")
        await complete(ann, "b", got["lease"]["token"], result={"log": "r" * 500}, verification="v" * 500)
        await call(ann, "update_task", task_key="b", action="reopen", reason="wrong branch")
        held = await call(bob, "claim_task", task_key="b")
        text = held["task"]["context"]["notes"][0]["text"]
        assert len(text) <= 300, text
        assert text.startswith('ann reopened task b: wrong branch; it was done with result {"log":'), text
        assert "/ verification vvv" in text and text.endswith("…") and text.count("…") == 2, text

        # a long reason fills the handoff's 300 characters; list_tasks(task_key=K) shows the note whole
        await complete(bob, "b", held["lease"]["token"], result={"commit": "c0ffee"}, verification="ok")
        await call(bob, "update_task", task_key="b", action="reopen", reason="r" * 400)
        [row] = (await call(bob, "list_tasks", task_key="b"))["tasks"]
        assert row["context"]["notes"][0]["text"] == (
            f'bob reopened task b: {"r" * 400}; it was done with result {{"commit":"c0ffee"}} / verification ok'
        )


async def test_a_rejected_gate_dependency_carries_the_persons_comment(db_url, workspace):
    """The trial (item 3): `context.dependencies` showed a rejected gate as `failed` without the comment
    that a claim's `waiting_on` carries; a rejected review task is pending again, with it too."""
    async with connect(db_url, workspace, "ann") as ann, connect(db_url, workspace, "olga", "operator") as olga:
        await call(
            ann,
            "add_tasks",
            tasks=[
                {"key": "signoff", "title": "Sign-off", "kind": "gate"},
                {"key": "design", "title": "Design", "review": True},
                {"key": "release", "title": "Release", "depends_on": ["signoff", "design"]},
            ],
        )
        got = await call(ann, "claim_task", task_key="design")
        await complete(ann, "design", got["lease"]["token"])
        long = "legal has not read it " + "x" * 400
        await call(olga, "update_task", task_key="signoff", action="reject", comment=long)
        await call(olga, "update_task", task_key="design", action="reject", comment="name the endpoints")
        deps = (await call(ann, "list_tasks", task_key="release"))["tasks"][0]["context"]["dependencies"]
        assert deps == [
            {"key": "signoff", "status": "failed", "comment": long},  # whole: one task read on purpose
            {"key": "design", "status": "pending", "comment": "name the endpoints"},
        ], deps
        async with Harness.open(settings_for(db_url)) as h, h.db.read() as conn:  # a handoff's cuts it to 300
            from mcp_harness.tasks.store import tasks as store

            bounded = await task_context(conn, workspace, await store.get(conn, workspace, "release"))
        assert bounded is not None and bounded.dependencies is not None
        gate = bounded.dependencies[0]
        assert gate.comment == "legal has not read it " + "x" * 278 + "…" and gate.cut, gate


async def test_a_connection_end_on_the_last_attempt_is_named_as_such(db_url, workspace):
    """The trial (item 6): when a connection's end failed a task on its last attempt, its `last_error` and
    a note said the lease expired, beside the note saying the connection ended. They say what happened."""
    async with connect(db_url, workspace, "ann") as ann:
        await call(ann, "add_tasks", tasks=[{"key": "a", "title": "A", "max_attempts": 1}])
        got = await call(ann, "claim_task")
        assert await end_connection(db_url, workspace, "ann") == ["a"]
        [row] = (await call(ann, "list_tasks", task_key="a"))["tasks"]
        why = "its connection ended (stdin closed)"
        assert row["status"] == "failed" and row["last_error"] == f"the lease ended on the last allowed attempt: {why}"
        texts = [n["text"] for n in row["context"]["notes"]]
        assert texts[0] == f"task a failed: the lease of ann ended on its last attempt (1): {why}", texts
        assert not any("expired" in text for text in texts), texts
        err = await fail(
            ann, "update_task", task_key="a", action="complete", lease_token=got["lease"]["token"], verification="done"
        )
        assert err.code == "lease_lost" and f"ended on the last attempt, as {why}, and the task failed" in err.text
        assert "action='reopen'" in err.text and "claim_task(task_key='a')" in err.text, err.text
