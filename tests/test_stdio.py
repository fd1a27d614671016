"""`mcp-harness serve` as a real subprocess over stdio, driven by the official MCP client (over pipes).
How the transport copes with every kind of stream and every misbehaving client is
`test_stdio_transport.py`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import anyio
import pytest
from mcp import Client, StdioServerParameters
from support import call, fail, mcp_client, serve_command, subprocess_env
from test_published import MODEL_VISIBLE_LIMIT, model_visible

from mcp_harness.mcp.tools import TOOLS

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # every test here starts processes


def stdio_client(url: str, workspace: str, agent: str) -> Client:
    cmd = serve_command(url, workspace, agent)
    return Client(StdioServerParameters(command=cmd[0], args=cmd[1:], env=subprocess_env()), read_timeout_seconds=60)


async def test_round_trip_over_stdio(sqlite_url, workspace):
    async with stdio_client(sqlite_url, workspace, "stdio-agent") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert list(tools) == [tool.name for tool in TOOLS]  # the table's tools, in its order
        assert all(t.output_schema for t in tools.values())
        saved = await call(client, "save_checkpoint", state={"hello": "world"}, label="first")
        brief = await call(client, "restore_state")
        assert brief["state"] == {"hello": "world"}
        assert brief["checkpoint"]["checkpoint_id"] == saved["checkpoint_id"]
        assert brief["checkpoint"]["agent"] == "stdio-agent"
        err = await fail(client, "save_checkpoint", state={"a": 1}, expected_version=0)
        assert err.text == (
            "[version_conflict] thread 'main' is at version 1, you expected 0; call restore_state(thread='main') "
            "to see what changed, then retry with expected_version=1"
        )
        # Resources and prompts: stdio serves everything MCPServer wires, not only the tools.
        threads = json.loads((await client.read_resource("harness://threads")).contents[0].text)
        assert threads["threads"][0]["thread"] == "main"
        resume = await client.get_prompt("resume_session", {"thread": "main"})
        assert 'restore_state(thread="main")' in resume.messages[0].content.text


async def test_tools_list_stays_small(sqlite_url, workspace):
    """What a model reads of the tools (test_published.py has the budget) is as small over stdio; the
    whole listing, output schemas with their nested types included, stays bounded too."""
    async with stdio_client(sqlite_url, workspace, "a") as client:
        listing = await client.list_tools()
        size = len(model_visible(listing.tools))
        assert size < MODEL_VISIBLE_LIMIT, f"what a model reads of tools/list is {size} bytes"
        whole = len(listing.model_dump_json(by_alias=True, exclude_none=True))
        # 15.8k before revision 3's shapes; the handoff context's types (claim_task, restore_state), the
        # message tool with the inbox in three answers and the path reservations took it to 22.3k. Output
        # schemas are read by clients, not by the model (what it reads is MODEL_VISIBLE_LIMIT above).
        assert whole < 24_000, f"tools/list is {whole} bytes"


async def test_state_survives_a_server_restart(sqlite_url, workspace):
    async with stdio_client(sqlite_url, workspace, "a") as client:
        await call(client, "save_checkpoint", state={"n": 1})
    async with stdio_client(sqlite_url, workspace, "b") as client:
        brief = await call(client, "restore_state")
        assert brief["state"] == {"n": 1} and brief["checkpoint"]["agent"] == "a"


async def test_a_state_near_the_size_limit_crosses_stdio(sqlite_url, workspace):
    # Far over asyncio's default 64 KiB line limit; just under the 1 MiB state limit.
    state = {"notes": ["é" * 1000 + str(i) for i in range(480)]}
    async with stdio_client(sqlite_url, workspace, "big") as client:
        await call(client, "save_checkpoint", state=state)
        assert (await call(client, "restore_state"))["state"] == state


async def test_two_server_processes_race_expected_version(sqlite_url, workspace):
    """Exactly one winner per version; the loser gets [version_conflict]; never 'database is locked'."""
    rounds = 25
    wins: Counter[int] = Counter()
    errors: list[str] = []

    async with stdio_client(sqlite_url, workspace, "p1") as c1, stdio_client(sqlite_url, workspace, "p2") as c2:
        for _ in range(rounds):
            latest = (await call(c1, "restore_state", progress_limit=0))["checkpoint"]
            version = latest["version"] if latest else 0

            async def save(client, who: str, version: int = version) -> None:
                result = await client.call_tool("save_checkpoint", {"state": {"by": who}, "expected_version": version})
                if result.is_error:
                    errors.append(result.content[0].text)
                else:
                    wins[result.structured_content["version"]] += 1

            async with anyio.create_task_group() as tg:
                tg.start_soon(save, c1, "p1")
                tg.start_soon(save, c2, "p2")
        history = await call(c2, "list_checkpoints", limit=200)

    assert len(history["checkpoints"]) == rounds
    assert all(n == 1 for n in wins.values()) and sorted(wins) == list(range(1, rounds + 1))
    assert len(errors) == rounds
    assert all(e.startswith("[version_conflict]") for e in errors), errors
    assert not any("locked" in e for e in errors)


def test_cli_reports_unreachable_database_in_one_line():
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_harness", "status", "--db", "postgresql+asyncpg://postgres@127.0.0.1:1/none"],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
    )
    assert proc.returncode != 0
    assert proc.stderr.strip().startswith("mcp-harness: ")
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


async def test_the_handshake_does_not_wait_for_the_database_and_a_bad_one_is_named_on_each_call(tmp_path):
    """The database opens in the background while the client says hello; if it cannot be opened,
    the server stays up and every call says why (and the process still ends when stdin closes)."""
    async with stdio_client("postgresql+asyncpg://postgres@127.0.0.1:1/none", "ws", "agent") as client:
        assert [t.name for t in (await client.list_tools()).tools] == [t.name for t in TOOLS]
        err = await fail(client, "restore_state")
        assert err.code == "unavailable" and "not reachable" in err.text
        again = await fail(client, "list_tasks")  # tried again, and failed again the same way
        assert again.text == err.text
        with pytest.raises(Exception, match="unavailable"):
            await client.read_resource("harness://threads")


async def test_a_database_that_could_not_be_opened_is_tried_again_on_the_next_call(tmp_path, workspace):
    folder = tmp_path / "not-yet"
    async with mcp_client(f"sqlite+aiosqlite:///{folder / 'harness.db'}", workspace) as client:
        err = await fail(client, "restore_state")
        assert err.code == "unavailable"
        folder.mkdir()  # the cause goes away: the next call opens the database
        assert (await call(client, "restore_state"))["found"] is False


async def test_serve_role_operator_and_reader(sqlite_url, workspace):
    """A person reviewing from a desktop client: `serve --role operator`; MCP_HARNESS_ROLE=reader is read-only."""
    async with stdio_client(sqlite_url, workspace, "coder") as coder:
        await call(coder, "add_tasks", tasks=[{"key": "g", "title": "sign-off", "kind": "gate"}])
        err = await fail(coder, "update_task", task_key="g", action="approve")
        assert err.code == "forbidden"
    cmd = [*serve_command(sqlite_url, workspace, "ann"), "--role", "operator"]
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=subprocess_env())
    async with Client(params, read_timeout_seconds=60) as ann:
        assert (await call(ann, "update_task", task_key="g", action="approve"))["status"] == "done"
    cmd = serve_command(sqlite_url, workspace, "auditor")
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=subprocess_env(MCP_HARNESS_ROLE="reader"))
    async with Client(params, read_timeout_seconds=60) as reader:
        err = await fail(reader, "add_tasks", tasks=[{"key": "x", "title": "x"}])
        assert err.code == "forbidden" and "reader" in err.text
