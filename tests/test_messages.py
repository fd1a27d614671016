"""Messages between agents and people: addressing (agent, session, every agent, operators), reading
without acknowledging, exactly-once acknowledgements under concurrency, limits, delivery in the brief and
in claim and heartbeat answers, workspace isolation. Both backends."""

from __future__ import annotations

import anyio
import pytest
from support import call, fail, mcp_client

from mcp_harness import clock
from mcp_harness.arguments import AddTasksArgs, MessageArgs
from mcp_harness.messages.service import MAX_BODY_BYTES, MAX_OPEN_PER_ADDRESSEE
from mcp_harness.service import Identity

pytestmark = pytest.mark.anyio


def me(workspace: str, agent: str, role: str = "agent") -> Identity:
    return Identity(workspace, agent, role)  # type: ignore[arg-type]


async def test_send_read_ack_over_the_tool(db_url, workspace):
    async with mcp_client(db_url, workspace, "alice") as alice, mcp_client(db_url, workspace, "bob") as bob:
        await call(alice, "add_tasks", tasks=[{"key": "t1", "title": "API"}])
        sent = await call(alice, "message", action="send", to="bob", body="which port?", subject="q", task_key="t1")
        assert sent["id"].startswith("msg_") and sent["at"].endswith("Z")
        got = await call(bob, "message", action="read")
        assert got["unread"] == 1
        [m] = got["messages"]
        assert m == {
            "id": sent["id"],
            "from": "alice",
            "to": "bob",
            "subject": "q",
            "body": "which port?",
            "task_key": "t1",
            "at": sent["at"],
            "read": False,
        }
        assert (await call(bob, "message", action="read"))["unread"] == 1, "reading does not acknowledge"
        assert (await call(alice, "message", action="read")) == {"messages": [], "unread": 0}
        reply = await call(bob, "message", action="send", to="alice", body="8080", reply_to=sent["id"])
        assert (await call(bob, "message", action="ack", ids=[sent["id"]])) == {"acked": 1}
        assert (await call(bob, "message", action="ack", ids=[sent["id"]])) == {"acked": 0}
        assert (await call(bob, "message", action="read"))["messages"] == []
        every = (await call(bob, "message", action="read", unread_only=False))["messages"]
        assert [(x["id"], x["read"]) for x in every] == [(sent["id"], True)]
        [answer] = (await call(alice, "message", action="read"))["messages"]
        assert answer["reply_to"] == sent["id"] and answer["id"] == reply["id"]


async def test_send_warns_when_the_addressee_may_not_be_who_was_meant(db_url, workspace):
    """The trial: `to="claude-code"` (a base name, as the README's example does) was read and acked by a
    session that does not hold the task; `to="bob"` or a mistyped session id answered no hint. The send
    still goes (per contract), and its answer carries a `warning` naming the session to write to."""
    a_name, f_name = "claude-code:aaaaaaaa", "claude-code:ffffffff"
    async with (
        mcp_client(db_url, workspace, a_name) as a,
        mcp_client(db_url, workspace, f_name) as f,
        mcp_client(db_url, workspace, "carol") as carol,
    ):
        await call(f, "add_tasks", tasks=[{"key": "api-refactor", "title": "API"}, {"key": "docs", "title": "Docs"}])
        await call(f, "claim_task", task_key="api-refactor")
        await call(a, "restore_state")  # a session is seen once it makes a call

        async def send(client, **args) -> dict:
            return await call(client, "message", action="send", body=args.pop("body", "hi"), **args)

        held = await send(carol, to="claude-code", task_key="api-refactor", body="split per resource")
        assert held["id"] and f"task 'api-refactor' is held by {f_name}: send to=\"{f_name}\"" in held["warning"]
        assert "every session of claude-code" in held["warning"]
        several = await send(carol, to="claude-code", body="anyone?")  # no task: the sessions seen
        assert a_name in several["warning"] and f_name in several["warning"], several
        other = await send(carol, to=a_name, task_key="api-refactor")  # a session that holds not that task
        assert f'held by {f_name}, not {a_name}: send to="{f_name}"' in other["warning"]
        never = await send(carol, to="bob")
        assert "nobody named 'bob' has been seen in this workspace" in never["warning"], never
        assert 'to="operators"' in never["warning"]
        typo = await send(carol, to="claude-code:fffffff")
        assert "no session 'claude-code:fffffff' has been seen" in typo["warning"] and f_name in typo["warning"]
        for fine in (
            dict(to=f_name, task_key="api-refactor"),
            dict(to="*"),
            dict(to="operators"),
            dict(to="carol"),
            dict(to=f_name, task_key="docs"),
        ):
            assert "warning" not in await send(f, **fine), fine
        # the warning is what the message tool answered: it comes back with a replay
        again = await send(carol, to="bob", idempotency_key="k-1")
        assert (await send(carol, to="bob", idempotency_key="k-1")) == {**again, "replayed": True}
        # and the messages went all the same: the addressee reads them
        assert (await call(f, "message", action="read"))["unread"] >= 2


async def test_the_brief_claim_and_heartbeat_carry_the_inbox(db_url, workspace):
    async with mcp_client(db_url, workspace, "alice") as alice, mcp_client(db_url, workspace, "bob") as bob:
        await call(bob, "add_tasks", tasks=[{"key": "t1", "title": "A"}])
        brief = await call(bob, "restore_state")
        assert "inbox" not in brief
        claim = await call(bob, "claim_task")
        assert "inbox" not in claim
        ids = [(await call(alice, "message", action="send", to="bob", body=f"m{i}"))["id"] for i in range(7)]
        brief = await call(bob, "restore_state")
        assert brief["inbox"]["unread"] == 7
        assert [m["body"] for m in brief["inbox"]["messages"]] == ["m6", "m5", "m4", "m3", "m2"]
        beat = await call(bob, "update_task", task_key="t1", action="heartbeat", lease_token=claim["lease"]["token"])
        assert beat["inbox"] == {"unread": 7}
        await call(bob, "add_tasks", tasks=[{"key": "t2", "title": "B"}])
        assert (await call(bob, "claim_task"))["inbox"] == {"unread": 7}
        await call(bob, "message", action="ack", ids=ids)
        assert "inbox" not in await call(bob, "restore_state")


async def test_addressing_sessions_every_agent_and_operators(harness, workspace):
    msg = harness.messages
    alice, s1, s2 = me(workspace, "alice"), me(workspace, "bob:s1"), me(workspace, "bob:s2")
    person = me(workspace, "carol", "operator")
    to_bob = (await msg.act(alice, MessageArgs(action="send", to="bob", body="for any bob"))).id
    to_s1 = (await msg.act(alice, MessageArgs(action="send", to="bob:s1", body="for s1"))).id
    to_all = (await msg.act(alice, MessageArgs(action="send", to="*", body="everyone"))).id
    to_ops = (await msg.act(alice, MessageArgs(action="send", to="operators", body="a person, please"))).id

    async def unread(who: Identity) -> list[str | None]:
        return [m.id for m in (await msg.read(who)).messages or []]

    assert await unread(s1) == [to_all, to_s1, to_bob]
    assert await unread(s2) == [to_all, to_bob]
    assert await unread(person) == [to_ops, to_all]
    assert await unread(alice) == [], "the sender's own message to every agent is not in its inbox"
    assert await unread(me(workspace, "bob")) == [to_all, to_bob], "plain bob: not the session's message"
    # one session acknowledging a message to `bob` ends it for every session of bob
    assert (await msg.act(s2, MessageArgs(action="ack", ids=[to_bob]))).acked == 1
    assert await unread(s1) == [to_all, to_s1]
    # a message to every agent: each acknowledges for itself
    assert (await msg.act(s1, MessageArgs(action="ack", ids=[to_all]))).acked == 1
    assert await unread(s1) == [to_s1] and await unread(s2) == [to_all]
    # a session cannot acknowledge another session's message, nor an agent the operators'
    with pytest.raises(Exception, match="addressed to you"):
        await msg.act(s2, MessageArgs(action="ack", ids=[to_s1]))
    with pytest.raises(Exception, match="addressed to you"):
        await msg.act(s1, MessageArgs(action="ack", ids=[to_ops]))
    assert (await msg.act(person, MessageArgs(action="ack", ids=[to_ops, to_all]))).acked == 2


async def test_a_message_to_every_agent_reaches_readers_for_a_day_or_seven_about_a_task(harness, workspace):
    msg = harness.messages
    await harness.tasks.add(me(workspace, "alice"), AddTasksArgs(tasks=[{"key": "t", "title": "T"}]))
    await msg.act(me(workspace, "alice"), MessageArgs(action="send", to="*", body="old news"))
    await msg.act(me(workspace, "alice"), MessageArgs(action="send", to="*", task_key="t", body="about t"))
    clock.advance(23 * 3600)
    assert (await msg.read(me(workspace, "bob"))).unread == 2
    clock.advance(3600 + 1)
    assert [m.body for m in (await msg.read(me(workspace, "bob"))).messages] == ["about t"]
    clock.advance(6 * 86400)
    assert (await msg.read(me(workspace, "bob"))).unread == 0
    assert len((await msg.read(me(workspace, "bob"), unread_only=False)).messages) == 2, "still listed with --all"


async def test_limits_and_bad_input_are_clear(db_url, workspace):
    async with mcp_client(db_url, workspace, "alice") as alice:
        big = await fail(alice, "message", action="send", to="bob", body="x" * (MAX_BODY_BYTES + 1))
        assert big.code == "too_large" and "8192" in big.text
        assert (await call(alice, "message", action="send", to="bob", body="é" * (MAX_BODY_BYTES // 2)))["id"]
        for args, code, words in [
            ({"to": "bob"}, "invalid_argument", "body"),
            ({"body": "hi"}, "invalid_argument", "`to`"),
            ({"to": "bad name!", "body": "hi"}, "invalid_argument", "`to`"),
            ({"to": "bob", "body": "hi", "task_key": "nope"}, "not_found", "task"),
            ({"to": "bob", "body": "hi", "reply_to": "msg_nope"}, "not_found", "reply to"),
        ]:
            got = await fail(alice, "message", action="send", **args)
            assert got.code == code and words in got.text, got.text
        assert (await fail(alice, "message", action="ack")).code == "invalid_argument"
        assert (await fail(alice, "message", action="ack", ids=["msg_nope"])).code == "not_found"
        assert (await fail(alice, "message", action="read", limit=201)).code == "invalid_argument"


async def test_an_addressee_takes_a_bounded_number_of_unacknowledged_messages(harness, workspace, monkeypatch):
    monkeypatch.setattr("mcp_harness.messages.service.MAX_OPEN_PER_ADDRESSEE", 3)
    alice = me(workspace, "alice")
    for i in range(3):
        await harness.messages.act(alice, MessageArgs(action="send", to="bob", body=f"{i}"))
    with pytest.raises(Exception, match="3 messages nobody acknowledged"):
        await harness.messages.act(alice, MessageArgs(action="send", to="bob", body="one more"))
    assert MAX_OPEN_PER_ADDRESSEE >= 100
    await harness.messages.act(alice, MessageArgs(action="send", to="carol", body="others still can be reached"))


async def test_the_cap_holds_under_concurrent_sends(harness, workspace, monkeypatch):
    """Sends at once to one addressee: the count and the insert of each are one step, so exactly the
    cap's worth go through (on PostgreSQL concurrent sends each counted before the others inserted)."""
    from mcp_harness.errors import TooLarge

    monkeypatch.setattr("mcp_harness.messages.service.MAX_OPEN_PER_ADDRESSEE", 5)
    sent, refused = [], []

    async def send(i: int) -> None:
        try:
            sent.append(
                await harness.messages.act(me(workspace, f"a{i}"), MessageArgs(action="send", to="bob", body=f"{i}"))
            )
        except TooLarge:
            refused.append(i)

    for _ in range(3):  # a race shows in some rounds only: each round starts from a full cap again
        async with anyio.create_task_group() as tg:
            for i in range(24):
                tg.start_soon(send, i)
        assert (await harness.messages.read(me(workspace, "bob"), limit=200)).unread == 5
        assert len(sent) == 5 and len(refused) == 19
        bob = me(workspace, "bob")
        await harness.messages.act(bob, MessageArgs(action="ack", ids=[m.id for m in sent]))
        sent.clear()
        refused.clear()


async def test_send_is_idempotent(harness, workspace):
    alice = me(workspace, "alice")
    first = await harness.messages.act(alice, MessageArgs(action="send", to="bob", body="once", idempotency_key="k1"))
    again = await harness.messages.act(alice, MessageArgs(action="send", to="bob", body="once", idempotency_key="k1"))
    assert again.id == first.id and again.replayed
    assert (await harness.messages.read(me(workspace, "bob"))).unread == 1
    with pytest.raises(Exception, match="different arguments"):
        await harness.messages.act(alice, MessageArgs(action="send", to="bob", body="other", idempotency_key="k1"))


async def test_workspaces_are_isolated(harness, workspace):
    sent = await harness.messages.act(me(workspace, "alice"), MessageArgs(action="send", to="bob", body="private"))
    other = me(workspace + "-other", "bob")
    assert (await harness.messages.read(other)).unread == 0
    with pytest.raises(Exception, match="addressed to you"):
        await harness.messages.act(other, MessageArgs(action="ack", ids=[sent.id]))


async def test_concurrent_acks_count_once_per_addressee(harness, workspace):
    """Many sessions of one agent (one addressee) and many agents (a message to every agent) acknowledge
    at once: each addressee's acknowledgement is counted exactly once."""
    alice = me(workspace, "alice")
    direct = [
        (await harness.messages.act(alice, MessageArgs(action="send", to="bob", body=f"d{i}"))).id for i in range(5)
    ]
    everyone = (await harness.messages.act(alice, MessageArgs(action="send", to="*", body="all"))).id
    counts: dict[str, int] = {}

    async def ack(agent: str) -> None:
        got = await harness.messages.act(me(workspace, agent), MessageArgs(action="ack", ids=[*direct, everyone]))
        counts[agent] = got.acked or 0

    async def ack_everyone(agent: str) -> None:
        got = await harness.messages.act(me(workspace, agent), MessageArgs(action="ack", ids=[everyone, everyone]))
        counts[agent] = got.acked or 0

    sessions = [f"bob:s{i}" for i in range(6)]
    others = [f"w{i}" for i in range(6)]
    for _round in range(2):  # the second round finds everything acknowledged
        async with anyio.create_task_group() as tg:
            for agent in sessions:
                tg.start_soon(ack, agent)
            for agent in others:
                tg.start_soon(ack_everyone, agent)
        total = sum(counts[s] for s in sessions)
        assert total == (len(direct) + len(sessions) if _round == 0 else 0)  # each direct once, `*` once each
        assert all(counts[o] == (1 if _round == 0 else 0) for o in others)
    assert (await harness.messages.read(me(workspace, "bob:s0"))).unread == 0


async def test_messages_are_exported_and_imported_with_validation(db_url, workspace, tmp_path):
    import json

    from support import settings_for

    from mcp_harness.errors import InvalidArgument
    from mcp_harness.service import Harness

    alice, bob = me(workspace, "alice"), me(workspace, "bob")
    async with Harness.open(settings_for(db_url)) as h:
        await h.tasks.add(alice, AddTasksArgs(tasks=[{"key": "t1", "title": "T"}]))
        q = await h.messages.act(alice, MessageArgs(action="send", to="operators", body="may I?", task_key="t1"))
        await h.messages.act(bob, MessageArgs(action="send", to="alice", body="yes", reply_to=q.id))
        everyone = await h.messages.act(alice, MessageArgs(action="send", to="*", body="all hands"))
        await h.messages.act(bob, MessageArgs(action="ack", ids=[everyone.id]))
        lines = [line async for line in h.maintenance.export(workspace)]
        await h.maintenance.prune(keep_last=1, workspace=workspace)  # prune leaves messages alone
        assert (await h.messages.read(alice)).unread == 1
    records = [json.loads(line) for line in lines]
    kinds = [r["type"] for r in records]
    assert kinds.count("message") == 3 and kinds.count("message_ack") == 1
    target = f"sqlite+aiosqlite:///{tmp_path / 'copy.db'}"
    async with Harness.open(settings_for(target)) as h:
        counts = await h.maintenance.import_lines(lines)
        assert counts["message"] == 3 and counts["message_ack"] == 1
        got = await h.messages.read(me(workspace, "carol", "operator"))
        assert [(m.body, m.task_key) for m in got.messages or []] == [("all hands", None), ("may I?", "t1")]
        assert (await h.messages.read(bob)).unread == 0, "bob's acknowledgement came along"
        assert [m.body for m in await h.messages.about_task(alice, "t1")] == ["may I?"]

    def broken(change: dict) -> list[str]:
        out, done = [], False
        for line in lines:
            record = json.loads(line)
            if record["type"] == "message" and not done:
                record.update(change)
                done = True
            out.append(json.dumps(record))
        return out

    for change, words in [
        ({"body": "x" * 9000}, "body"),
        ({"recipient": "no body!"}, "recipient"),
        ({"task_key": "nope"}, "names task"),
        ({"reply_to": "msg_nope"}, "answers"),
    ]:
        url = f"sqlite+aiosqlite:///{tmp_path / ('bad-' + next(iter(change)) + '.db')}"
        async with Harness.open(settings_for(url)) as h:
            with pytest.raises(InvalidArgument, match=words):
                await h.maintenance.import_lines(broken(change))


@pytest.mark.slow
async def test_a_person_uses_msg_from_the_command_line(tmp_path):
    import json

    from support import run_cli

    db = str(tmp_path / "cli.db")
    url = f"sqlite+aiosqlite:///{db}"
    async with mcp_client(url, "ws", "coder") as coder:
        await call(coder, "add_tasks", tasks=[{"key": "api", "title": "API", "description": "the REST port"}])
        await call(coder, "record_progress", summary="picked the port for the REST server", task_key="api")
        q = await call(coder, "message", action="send", to="operators", body="Port 8080 or 9090?", task_key="api")
    base = ("--db", db, "--workspace", "ws", "--agent", "carol")
    out = run_cli("msg", "list", *base)
    assert out.returncode == 0 and q["id"] in out.stdout and "Port 8080 or 9090?" in out.stdout, out
    sent = run_cli("msg", "send", "--to", "coder", "--task", "api", "--reply-to", q["id"], "8080, please", *base)
    assert sent.returncode == 0 and sent.stdout.startswith("sent msg_") and "warning" not in sent.stderr, sent
    typo = run_cli("msg", "send", "--to", "coderr", "--task", "api", "8080", *base)  # sent, with a warning
    assert typo.returncode == 0 and "warning: nobody named 'coderr' has been seen" in typo.stderr, typo
    acked = run_cli("msg", "ack", q["id"], *base, "--json")
    assert json.loads(acked.stdout) == {"acked": 1}
    assert "no unread messages for carol" in run_cli("msg", "list", *base).stdout
    assert q["id"] in run_cli("msg", "list", "--all", *base).stdout
    story = run_cli("tasks", "show", "api", "--db", db, "--workspace", "ws")
    assert "messages:" in story.stdout and "8080, please" in story.stdout, story.stdout
    bad = run_cli("msg", "send", "--to", "coder", *base)
    assert bad.returncode != 0 and "BODY" in bad.stderr and "Traceback" not in bad.stderr
    unknown = run_cli("msg", "ack", "msg_nope", *base)
    assert unknown.returncode != 0 and "msg_nope" in unknown.stderr
    found = run_cli("log", "--query", "REST port", "--db", db, "--workspace", "ws")
    assert "picked the port" in found.stdout, found
    tasks = run_cli("tasks", "--query", "rest", "--db", db, "--workspace", "ws", "--json")
    assert [t["key"] for t in json.loads(tasks.stdout)["tasks"]] == ["api"]
    bad_query = run_cli("log", "--query", '"open', "--db", db, "--workspace", "ws")
    assert bad_query.returncode != 0 and "unclosed" in bad_query.stderr
    async with mcp_client(url, "ws", "coder") as coder:
        [answer] = (await call(coder, "message", action="read"))["messages"]
        assert answer["from"] == "carol" and answer["body"] == "8080, please" and answer["reply_to"] == q["id"]


@pytest.mark.slow
async def test_acks_from_concurrent_processes_count_once_per_addressee(db_url, workspace):
    """Six processes (six sessions of bob) acknowledge the same messages at the same moment: a message
    to bob is acknowledged once in all, a message to every agent once by each."""
    import json
    import subprocess
    import sys

    from support import settings_for, subprocess_env

    from mcp_harness.service import Harness

    async with Harness.open(settings_for(db_url)) as h:
        alice = me(workspace, "alice")
        direct = (await h.messages.act(alice, MessageArgs(action="send", to="bob", body="for bob"))).id or ""
        everyone = (await h.messages.act(alice, MessageArgs(action="send", to="*", body="for all"))).id or ""
    start = [
        sys.executable,
        "-m",
        "mcp_harness",
        "msg",
        "ack",
        direct,
        everyone,
        "--db",
        db_url,
        "--workspace",
        workspace,
        "--json",
    ]
    procs = [
        subprocess.Popen(
            [*start, "--agent", f"bob:s{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=subprocess_env(),
        )
        for i in range(6)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    acked = [json.loads(out)["acked"] for out, _err in outs]
    assert sum(acked) == 1 + 6 and sorted(acked) == [1, 1, 1, 1, 1, 2], acked
    async with Harness.open(settings_for(db_url)) as h:
        assert (await h.messages.read(me(workspace, "bob:s9"))).unread == 1, "a seventh session: only `*` left"
