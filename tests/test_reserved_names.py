"""Reserved names: `operators` (and its sessions), `harness` and `runner` name the people and the harness
itself, so no caller may take them, wherever a name is given (a token, `--agent`, the environment, a
stdio session's suffix, a person's login name); the people's inbox is reached by the operator role alone.
Both backends."""

from __future__ import annotations

import argparse
import getpass

import pytest
from support import run_cli, subprocess_env

from mcp_harness.access.store import tokens as token_store
from mcp_harness.access.tokens import token_hash
from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, MessageArgs, UpdateTaskArgs
from mcp_harness.cli import common
from mcp_harness.console.auth import person_name
from mcp_harness.errors import InvalidArgument, NotFound
from mcp_harness.identity import Identity, check_agent, stdio_agent
from mcp_harness.messages.store import addressees
from mcp_harness.runner.agents import CommandAgent
from mcp_harness.store.common import now

pytestmark = pytest.mark.anyio

RESERVED = ["operators", "operators:x", "harness", "runner", "Harness", "OPERATORS:abc", "runner:12345678"]


@pytest.mark.parametrize("name", RESERVED)
def test_a_reserved_name_is_no_identity(name):
    with pytest.raises(InvalidArgument, match="reserved name"):
        Identity("ws", name)
    with pytest.raises(InvalidArgument, match="reserved name"):
        check_agent(name)


def test_names_that_only_resemble_a_reserved_one_are_fine():
    for name in ("operator", "ops", "harness-bot", "my-runner", "claude-code:harness", "a:operators"):
        assert Identity("ws", name).agent == name


def test_a_stdio_session_of_a_reserved_name_is_refused():
    agent = stdio_agent("operators", environ={"MCP_HARNESS_SESSION": "0123456789"})
    assert agent == "operators:01234567"
    with pytest.raises(InvalidArgument, match="reserved name"):
        Identity("ws", agent)


async def test_tokens_with_reserved_names_are_refused(harness, workspace):
    for name in RESERVED:
        with pytest.raises(InvalidArgument, match="reserved name"):
            await harness.tokens.create(workspace, name, "agent")
    # one stored before the names were reserved names nobody now: its requests get 401
    async with harness.db.write() as conn:
        await token_store.insert(
            conn,
            token_hash=token_hash("mcph_old"),
            token_id="tk_old",
            workspace=workspace,
            agent="operators:x",
            role="agent",
            created_at=now(),
        )
    assert await harness.tokens.verify("mcph_old") is None
    fine = await harness.tokens.create(workspace, "alice", "agent")
    assert (await harness.tokens.verify(fine)).agent == "alice"  # type: ignore[union-attr]


async def test_the_peoples_inbox_is_the_operator_roles_alone(harness, workspace):
    alice, person = Identity(workspace, "alice"), Identity(workspace, "dana", "operator")
    sent = await harness.messages.act(alice, MessageArgs(action="send", to="operators", body="please approve t1"))
    for agent in ("alice", "bob", "operator", "bob:operators"):
        reader = Identity(workspace, agent)
        assert (await harness.messages.act(reader, MessageArgs(action="read"))).unread == 0
        with pytest.raises(NotFound):
            await harness.messages.act(reader, MessageArgs(action="ack", ids=[sent.id]))
    assert (await harness.messages.act(person, MessageArgs(action="read"))).unread == 1
    # the inbox queries never let a caller's own name stand for the people's address
    assert addressees("operators:x", False) == {"me": "", "base": "", "ops": ""}
    assert addressees("operators", True)["ops"] == "operators"


@pytest.mark.parametrize("to", ["harness", "runner", "Runner:abc", "operators:x"])
async def test_a_message_to_a_reserved_name_is_refused_since_nobody_reads_it(harness, workspace, to):
    alice = Identity(workspace, "alice")
    with pytest.raises(InvalidArgument, match="reserved name"):
        await harness.messages.act(alice, MessageArgs(action="send", to=to, body="hello"))
    assert (await harness.messages.act(alice, MessageArgs(action="send", to="operators", body="still fine"))).id


async def test_the_harness_own_notes_keep_their_name(harness, workspace):
    """The harness still writes as `harness` (and the runner as `runner`): made in code, not given."""
    me = Identity(workspace, "alice")
    await harness.tasks.add(me, AddTasksArgs(tasks=[{"key": "t1", "title": "one"}]))
    got = await harness.tasks.claim(me, ClaimTaskArgs(task_key="t1"))
    await harness.tasks.update(
        me, UpdateTaskArgs(task_key="t1", action="fail", lease_token=got.lease.token, error="boom", retry=False)
    )
    entries = await harness.progress.recent(me, task_key="t1", limit=5)
    assert [e.agent for e in entries] == ["harness"]


def test_a_persons_reserved_login_name_becomes_operator(monkeypatch):
    monkeypatch.setattr(getpass, "getuser", lambda: "runner")  # a CI machine's login name
    assert person_name(None) == "operator"
    args = argparse.Namespace(agent=None, workspace="ws")
    assert common.person(args).agent == "operator"
    with pytest.raises(InvalidArgument, match="reserved name"):
        common.person(argparse.Namespace(agent="harness", workspace="ws"))


def test_the_environment_cannot_name_a_reserved_agent(monkeypatch):
    monkeypatch.setenv("MCP_HARNESS_AGENT", "operators:x")
    with pytest.raises(InvalidArgument, match="reserved name"):
        common.identity(argparse.Namespace(agent=None, role=None, workspace="ws"), with_agent=True)


def test_a_runner_command_named_like_a_reserved_name_acts_as_agent():
    assert CommandAgent("harness --prompt {prompt}", []).base == "agent"
    assert CommandAgent("./my-agent --prompt {prompt}", []).base == "my-agent"


@pytest.mark.slow
def test_the_cli_refuses_reserved_names_in_one_line(tmp_path):
    db = str(tmp_path / "h.db")
    out = run_cli("token", "create", "--db", db, "--workspace", "ws", "--agent", "operators:x")
    assert out.returncode != 0 and "reserved name" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    env = {**subprocess_env(), "MCP_HARNESS_AGENT": "harness"}
    served = run_cli("serve", "--db", db, "--workspace", "ws", env=env, input="")
    assert served.returncode != 0 and "reserved name" in served.stderr and "Traceback" not in served.stderr
    served = run_cli("serve", "--db", db, "--workspace", "ws", "--agent", "runner", input="")
    assert served.returncode != 0 and "reserved name" in served.stderr
