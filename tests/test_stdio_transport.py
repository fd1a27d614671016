"""The stdio robustness suite: `mcp-harness serve` as a real subprocess over every kind of stdin and stdout
it serves (`stdio_wire.MODES`: pipes, socket pairs, one socket, a terminal, files, /dev/null), driven
with raw JSON-RPC lines. Every mode must pass every test its client can run; what is stored is checked
by a fresh server process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from support import call, mcp_client, serve_command, subprocess_env
from support.stdio_wire import MODES, Wire

from mcp_harness.mcp.stdio import CLOSE_TIMEOUT_SECONDS, MAX_MESSAGE_BYTES

pytestmark = pytest.mark.slow  # every test here starts processes

INITIALIZE = [
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
]


def tool_call(request_id: Any, name: str, **arguments: Any) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def result(answer: dict) -> dict:
    assert "result" in answer and not answer["result"].get("isError"), answer
    return answer["result"]["structuredContent"]


@pytest.fixture(params=list(MODES))
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def wires(mode: str, tmp_path) -> Iterator[Any]:
    """Start servers on `mode`'s streams: `wires(command)`; every one is stopped at the end."""
    started: list[Wire] = []

    def start(command: list[str], **env: str) -> Wire:
        files = tmp_path / f"wire{len(started)}"
        files.mkdir()
        started.append(Wire(mode, command, subprocess_env(**env), files))
        return started[-1]

    yield start
    for wire in started:
        wire.close()


def stored(url: str, workspace: str, thread: str = "main") -> dict[str, int]:
    """checkpoint_id -> the number in its label, for every checkpoint of `thread`, as a fresh server (in
    this process) lists them. The tests' saves carry their request's number as their label."""

    async def read() -> dict[str, int]:
        found: dict[str, int] = {}
        async with mcp_client(url, workspace, "checker") as client:
            before = None
            while True:
                page = await call(client, "list_checkpoints", thread=thread, limit=200, before_version=before)
                found.update({meta["checkpoint_id"]: int(meta["label"]) for meta in page["checkpoints"]})
                if (before := page["next_before_version"]) is None:
                    return found

    return anyio.run(read)


def seed(url: str, workspace: str, thread: str, state: dict[str, Any]) -> None:
    """One checkpoint of `state` on `thread`, saved by a server in this process."""

    async def write() -> None:
        async with mcp_client(url, workspace, "seeder") as client:
            await call(client, "save_checkpoint", thread=thread, label="seed", state=state)

    anyio.run(write)


def save(request_id: int, n: int, **arguments: Any) -> dict:
    return tool_call(request_id, "save_checkpoint", label=str(n), **{"state": {"n": n}, **arguments})


def test_a_burst_then_stdin_closes(wires, db_url, workspace):
    """More requests than the transport reads ahead, then stdin closes at once: stdin is paused and
    resumed, stdout fills and drains, every request gets exactly one answer (none cancelled), and every
    acknowledged save is stored. On PostgreSQL, where saves wait on the network, stdin's end used to
    cancel the ones still running."""
    total = 600
    wire = wires(serve_command(db_url, workspace, "burst"))
    if wire.readable:
        wire.read_in_background()
    requests = [save(i, i, state={"n": i, "pad": "x" * 400}) for i in range(1, total + 1)]
    wire.send(*INITIALIZE, *requests)
    wire.close_input()
    if wire.readable:
        answers = wire.answers(*range(total + 1))
        assert len(answers) == total + 1
        saved = {result(answers[i])["checkpoint_id"]: i for i in range(1, total + 1)}
        versions = sorted(result(answers[i])["version"] for i in range(1, total + 1))
        assert versions == list(range(1, total + 1))
    status, stderr = wire.finish()
    assert status == 0 and "stopped reading stdout" not in stderr  # every answer was taken
    states = stored(db_url, workspace)
    assert len(states) == total and sorted(states.values()) == list(range(1, total + 1)), stderr[-3000:]
    if wire.readable:
        assert all(states[checkpoint] == n for checkpoint, n in saved.items())


def test_lines_that_are_not_requests_get_json_rpc_errors(wires, sqlite_url, workspace):
    """Garbage, a request cut short, invalid UTF-8, NaN, params that are not an object, jsonrpc 1.0, a
    batch, an unusable id, a reply-shaped line, nesting too deep: every request with an id gets an error
    with that id, parse errors get a null id, and the server keeps serving (issue 20, item 10)."""
    wire = wires(serve_command(sqlite_url, workspace, "raw"), MCP_HARNESS_LOG_LEVEL="INFO")  # logs stay off stdout
    wire.read_in_background()
    deep = "[" * 300 + "]" * 300
    wire.send(
        *INITIALIZE,
        tool_call(1, "save_checkpoint", state={"n": 1}),
        "this is not JSON",
        "",
        '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": ',  # cut short
        b"\xff\xfe not utf-8 either",
        json.dumps(tool_call(3, "restore_state")),
        json.dumps(tool_call(4, "save_checkpoint", thread="nan", state={"x": "NAN_HERE"})).replace('"NAN_HERE"', "NaN"),
        tool_call(5, "restore_state", thread="nan"),
        '{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": "x"}',
        '{"jsonrpc": "1.0", "id": 7, "method": "ping"}',
        '[{"jsonrpc": "2.0", "id": 8, "method": "ping"}, {"jsonrpc": "2.0", "id": "nine", "method": "ping"}]',
        '{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}',
        '{"jsonrpc": "2.0", "id": 10, "result": 5}',  # a malformed reply: never answered
        {"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {}},
        {"jsonrpc": "2.0", "id": 12, "method": "no/such/method"},
        {"jsonrpc": "2.0", "id": 13, "method": "resources/read", "params": {"uri": "harness://no-such"}},
        '{"jsonrpc": "2.0", "id": 14, "method": "ping", "params": {"x": ' + deep + "}}",
        {"jsonrpc": "2.0", "id": 15, "method": "ping"},
    )
    wire.close_input()
    answers = wire.answers(1, 3, 4, 5, 6, 7, 8, "nine", 11, 12, 13, 14, 15)
    assert wire.finish()[0] == 0
    assert result(answers[1])["version"] == 1
    assert result(answers[3])["state"] == {"n": 1}
    assert 2 not in answers and 10 not in answers
    save = answers[4]  # NaN: refused while parsing or by the tool, as long as nothing is stored
    if "error" in save:
        assert save["error"]["code"] in (-32700, -32602, -32600)
    else:
        assert save["result"]["isError"] is True
        assert save["result"]["content"][0]["text"].startswith("[invalid_argument]")
    assert result(answers[5])["found"] is False
    codes = {rid: answers[rid]["error"]["code"] for rid in (6, 7, 8, "nine", 11, 12, 13, 14)}
    assert codes == {6: -32602, 7: -32600, 8: -32600, "nine": -32600, 11: -32602, 12: -32601, 13: -32602, 14: -32600}
    assert answers[15]["result"] == {}
    unknown = sorted(m["error"]["code"] for m in wire.messages if m.get("id") is None)
    assert unknown == [-32700, -32700, -32700, -32600]  # not JSON, cut short, not UTF-8; the id 1.5


def test_an_over_long_line_is_refused_and_the_server_serves_on(wires, sqlite_url, workspace):
    """A 65 MiB line is refused without being buffered, with its request's id; so is a line nested
    100,000 deep; nothing of either is stored; the requests around them are served."""
    wire = wires(serve_command(sqlite_url, workspace, "raw"))
    wire.require("long lines")
    if wire.readable:
        wire.read_in_background()
    huge = save(2, 2, state={"n": 2, "x": "y" * (MAX_MESSAGE_BYTES + (1 << 20))})
    deep = '{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    wire.send(*INITIALIZE, save(1, 1), huge, deep, save(4, 4))
    wire.close_input()
    if wire.readable:
        answers = wire.answers(1, 2, 3, 4)
        assert answers[2]["error"]["code"] == -32600 and str(MAX_MESSAGE_BYTES) in answers[2]["error"]["message"]
        assert answers[3]["error"] == {"code": -32600, "message": "message nested too deeply"}
        assert [result(answers[i])["version"] for i in (1, 4)] == [1, 2]
    status, stderr = wire.finish()
    assert status == 0
    assert stderr.count(f"a message over {MAX_MESSAGE_BYTES} bytes") == 1
    assert sorted(stored(sqlite_url, workspace).values()) == [1, 4]


def test_a_client_that_stops_reading(wires, sqlite_url, workspace):
    """The client never reads while answers pile up past what stdout holds: the server keeps reading and
    storing, ends within a few seconds once stdin closes, and says so once."""
    wire = wires(serve_command(sqlite_url, workspace, "stalled"))
    wire.require("a full stdout")
    seed(sqlite_url, workspace, "big", {f"k{i}": "z" * 3000 for i in range(70)})
    # Saved beforehand, the state makes 5 answers of ~420 KiB whatever order the server runs the requests
    # in: 2 MiB, 10x a socket's default buffer (208 KiB), 32x a pipe's. Built by saves in this connection,
    # a restore the server ran before most of them (it runs requests concurrently) answered a few KiB:
    # every answer fit in the socket, none was left untaken, and the server rightly said nothing.
    restores = [tool_call(100 + i, "restore_state", thread="big") for i in range(5)]
    saves = [save(200 + i, i) for i in range(1, 31)]
    wire.send(*INITIALIZE, *restores, *saves)
    if wire.live_input:  # while its answers wait, the server still reads and stores
        deadline = time.monotonic() + 60
        while len(stored(sqlite_url, workspace)) < len(saves):
            assert time.monotonic() < deadline, "saves sent to a server whose client stopped reading were lost"
    started = time.monotonic()
    wire.close_input()
    status, stderr = wire.finish(timeout=60)
    assert status == 0 and time.monotonic() - started < CLOSE_TIMEOUT_SECONDS + 30
    delivered = {json.loads(line).get("id") for line in wire.unread().split(b"\n")[:-1]}  # the last is cut
    assert not {0, *range(100, 105), *range(201, 231)} <= delivered, "every answer fit in stdout: none waited"
    assert stderr.count("stopped reading stdout") == 1 and "Traceback" not in stderr
    assert sorted(stored(sqlite_url, workspace).values()) == list(range(1, 31))


def test_a_client_that_closes_stdout(wires, sqlite_url, workspace):
    """The client closes its reading end first: every save it sends is still stored, the server ends
    cleanly when stdin closes, and the lost answers are logged once."""
    wire = wires(serve_command(sqlite_url, workspace, "raw"))
    wire.close_output()
    wire.send(*INITIALIZE, *[save(i, i) for i in range(1, 6)])
    wire.close_input()
    status, stderr = wire.finish()
    assert status == 0
    assert stderr.count("the client stopped reading stdout") == 1 and "Traceback" not in stderr
    assert sorted(stored(sqlite_url, workspace).values()) == [1, 2, 3, 4, 5]


STRAY_OUTPUT_SERVER = textwrap.dedent("""
    import os, sys
    from pydantic import BaseModel
    from mcp_harness.arguments import ToolArgs
    from mcp_harness.config import Settings
    from mcp_harness.mcp.tools import TOOLS, HarnessTool
    from mcp_harness.mcp.server import create_server
    from mcp_harness.service import Identity

    class Printed(BaseModel):
        ok: bool

    class ChattyArgs(ToolArgs):
        tool = "chatty"

    async def chatty(h, who, args) -> Printed:
        "Writes to stdout three ways, as careless code does."
        print("stray print")
        sys.stdout.flush()
        os.write(1, b"stray write to fd 1\\n")
        os.system("echo stray child output")
        return Printed(ok=True)

    tool = HarnessTool(ChattyArgs, Printed, "Writes to stdout.", chatty, read_only=True)
    server = create_server(Settings.from_env(sys.argv[1]), Identity("default", "default"), tools=(*TOOLS, tool))
    server.run("stdio")
""")


def test_stray_output_goes_to_stderr_not_the_wire(wires, sqlite_url, tmp_path):
    script = tmp_path / "chatty.py"
    script.write_text(STRAY_OUTPUT_SERVER)
    wire = wires([sys.executable, str(script), sqlite_url])
    wire.require("reading")
    wire.read_in_background()
    wire.send(*INITIALIZE, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "chatty"}})
    wire.close_input()
    assert result(wire.answers(1)[1]) == {"ok": True}
    status, stderr = wire.finish()
    assert status == 0
    for stray in ("stray print", "stray write to fd 1", "stray child output"):
        assert stray in stderr


def test_stdin_from_dev_null_ends_at_once(sqlite_url, workspace):
    with open(os.devnull, "rb") as devnull:
        proc = subprocess.run(
            serve_command(sqlite_url, workspace, "a"),
            stdin=devnull,
            capture_output=True,
            env=subprocess_env(),
            timeout=60,
        )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")


def test_a_closed_stdin_is_refused_in_one_line(sqlite_url, workspace):
    proc = subprocess.run(
        serve_command(sqlite_url, workspace, "a"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
        preexec_fn=lambda: os.close(0),
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "mcp-harness: stdin is closed; start the server from an MCP client (or a shell)"


def test_requests_still_running_when_stdin_ends_are_answered(sqlite_url, workspace, tmp_path):
    """Claims sent just before stdin ends get their real answers, at once: the end of stdin ends their
    waits (a 30 s wait too), and the server ends without outlasting them."""
    wire = Wire("pipes", serve_command(sqlite_url, workspace, "raw"), subprocess_env(), tmp_path)
    try:
        wire.read_in_background()
        wire.send(*INITIALIZE, tool_call(1, "claim_task", wait_seconds=1), tool_call(2, "claim_task", wait_seconds=30))
        started = time.monotonic()
        wire.close_input()
        answers = wire.answers(1, 2)
        status, _ = wire.finish()
    finally:
        wire.close()
    assert status == 0 and time.monotonic() - started < 20
    assert result(answers[1])["reason"] == result(answers[2])["reason"] == "none_pending"


def test_a_waiting_claim_whose_client_left_claims_nothing(db_url, workspace, tmp_path):
    """A client that closes stdin while its claim waits is gone: a task added afterwards (by another
    process) stays pending, with no attempt used, and the server ends at once, not after the wait."""
    wire = Wire("pipes", serve_command(db_url, workspace, "departed"), subprocess_env(), tmp_path)
    try:
        wire.read_in_background()
        wire.send(*INITIALIZE, tool_call(1, "list_tasks"))
        wire.answers(1)  # the database is open: the claim's first look comes right after it is read
        wire.send(tool_call(2, "claim_task", wait_seconds=30))
        time.sleep(1.0)
        wire.close_input()
        started = time.monotonic()

        async def add_then_look() -> dict:
            async with mcp_client(db_url, workspace, "planner") as client:
                await call(client, "add_tasks", tasks=[{"key": "late", "title": "added after the client left"}])
                await anyio.sleep(1.5)  # a wait that missed the end of stdin claims within this
                return (await call(client, "list_tasks"))["tasks"][0]

        row = anyio.run(add_then_look)
        answers = wire.answers(2)
        status, _ = wire.finish()
    finally:
        wire.close()
    assert (row["status"], row.get("owner"), row.get("attempts", 0)) == ("pending", None, 0)  # defaults left out
    assert result(answers[2])["task"] is None
    assert status == 0 and time.monotonic() - started < 15


def test_an_unpaired_surrogate_in_an_argument_is_a_tool_error(sqlite_url, workspace, tmp_path):
    """`"main\\ud8ac"` is valid JSON text but not valid Unicode: the call is answered `[invalid_argument]`
    naming the argument (issue 25, item 7), not refused whole; elsewhere in a message it is still refused."""
    wire = Wire("pipes", serve_command(sqlite_url, workspace, "raw"), subprocess_env(), tmp_path)
    try:
        wire.read_in_background()
        wire.send(
            *INITIALIZE,
            '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_tasks", '
            '"arguments": {"tag": "main\\ud8ac", "limit": 5}}}',
            '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list\\udc00", "arguments": {}}}',
            '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "list_tasks", '
            '"arguments": {"tag": "\\ud83d\\ude00"}}}',  # a pair is a character like any other
        )
        wire.close_input()
        answers = wire.answers(1, 2, 3)
        assert wire.finish()[0] == 0
    finally:
        wire.close()
    assert answers[1]["result"]["isError"] is True, answers[1]
    text = answers[1]["result"]["content"][0]["text"]
    assert text.startswith("[invalid_argument] tag: not valid Unicode") and "limit" not in text, text
    assert answers[2]["error"]["code"] == -32600
    assert result(answers[3])["tasks"] == []
