"""The event-loop stdio transport (`mcp_harness.stdio`) against the SDK's threaded one, in real processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from conftest import call, serve_command, subprocess_env
from mcp import Client, StdioServerParameters

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # every test here starts processes

TRANSPORTS = ["auto", "sdk"]


def _initialize() -> list[dict]:
    return [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]  # fmt: skip


def _converse(
    command: list[str], lines: list[str | bytes], env: dict[str, str], unanswered: frozenset[int] = frozenset()
) -> tuple[dict[int, dict], str]:
    """Send raw lines one at a time, waiting for the reply to each request (but those `unanswered`);
    every stdout line must be a JSON-RPC message. Returns the replies by id and the server's stderr."""
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    replies: dict[int, dict] = {}
    try:
        for line in lines:
            proc.stdin.write((line if isinstance(line, bytes) else line.encode()) + b"\n")
            proc.stdin.flush()
            try:
                wanted = json.loads(line).get("id")
            except ValueError:
                continue
            while wanted is not None and wanted not in unanswered and wanted not in replies:
                out = proc.stdout.readline()
                assert out, f"server closed stdout; stderr: {proc.stderr.read().decode()}"
                message = json.loads(out)
                assert message["jsonrpc"] == "2.0"
                replies[message["id"]] = message
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
        rest = proc.stdout.read()
        stderr = proc.stderr.read().decode()
        proc.stdout.close()
        proc.stderr.close()
    assert rest.strip() == b"", rest
    return replies, stderr


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_garbage_lines_do_not_stop_the_server(sqlite_url, workspace, transport):
    tool_call = lambda i, name, args: json.dumps(  # noqa: E731
        {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": args}}
    )
    lines = [json.dumps(m) for m in _initialize()] + [
        tool_call(1, "save_checkpoint", {"state": {"n": 1}}),
        "this is not JSON",
        "",
        '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": ',  # cut short
        b"\xff\xfe not utf-8 either",
        tool_call(3, "restore_state", {}),
    ]
    replies, _ = _converse(
        serve_command(sqlite_url, workspace, "raw"),
        lines,
        subprocess_env(MCP_HARNESS_STDIO_TRANSPORT=transport),
        unanswered=frozenset({2}),
    )
    assert replies[1]["result"]["structuredContent"]["version"] == 1
    assert replies[3]["result"]["structuredContent"]["state"] == {"n": 1}
    assert 2 not in replies


STRAY_OUTPUT_SERVER = textwrap.dedent("""
    import os, sys
    from pydantic import BaseModel
    from mcp_harness.config import Settings
    from mcp_harness.server import create_server
    from mcp_harness.service import Identity

    class Printed(BaseModel):
        ok: bool

    server = create_server(Settings.from_env(sys.argv[1]), Identity("default", "default"))

    @server.harness_tool(read_only=True)
    async def chatty() -> Printed:
        "Writes to stdout three ways, as careless code does."
        print("stray print")
        sys.stdout.flush()
        os.write(1, b"stray write to fd 1\\n")
        os.system("echo stray child output")
        return Printed(ok=True)

    server.run("stdio")
""")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_stray_output_goes_to_stderr_not_the_wire(sqlite_url, transport, tmp_path):
    script = tmp_path / "chatty.py"
    script.write_text(STRAY_OUTPUT_SERVER)
    lines = [json.dumps(m) for m in _initialize()]
    lines.append(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "chatty"}}))
    replies, stderr = _converse(
        [sys.executable, str(script), sqlite_url], lines, subprocess_env(MCP_HARNESS_STDIO_TRANSPORT=transport)
    )
    assert replies[1]["result"]["structuredContent"] == {"ok": True}
    for stray in ("stray print", "stray write to fd 1", "stray child output"):
        assert stray in stderr


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_state_near_the_size_limit_crosses_stdio(sqlite_url, workspace, transport):
    # Far over asyncio's default 64 KiB line limit; just under the 1 MiB state limit.
    state = {"notes": ["é" * 1000 + str(i) for i in range(480)]}
    cmd = serve_command(sqlite_url, workspace, "big")
    env = subprocess_env(MCP_HARNESS_STDIO_TRANSPORT=transport)
    async with Client(StdioServerParameters(command=cmd[0], args=cmd[1:], env=env), read_timeout_seconds=60) as client:
        await call(client, "save_checkpoint", state=state)
        assert (await call(client, "restore_state"))["state"] == state


def test_a_message_over_the_transport_limit_is_dropped_and_logged(sqlite_url, workspace):
    patched = (
        "import sys, mcp_harness.stdio as s; s.MAX_MESSAGE_BYTES = 1 << 20; "
        "from mcp_harness.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    command = [sys.executable, "-c", patched, *serve_command(sqlite_url, workspace, "raw")[3:]]
    huge = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "save_checkpoint", "arguments": {"state": {"x": "y" * (3 << 20)}}}}  # fmt: skip
    ping = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_checkpoints"}}
    lines = [json.dumps(m) for m in [*_initialize(), huge, ping]]
    replies, stderr = _converse(command, lines, subprocess_env(), unanswered=frozenset({1}))
    assert 1 not in replies
    assert replies[2]["result"]["structuredContent"]["checkpoints"] == []
    assert stderr.count("dropped an incoming message longer than 1048576 bytes") == 1


def test_an_unknown_transport_choice_is_refused_in_one_line(sqlite_url):
    proc = subprocess.run(
        [*serve_command(sqlite_url, "w", "a")], stdin=subprocess.DEVNULL, capture_output=True, text=True,
        env=subprocess_env(MCP_HARNESS_STDIO_TRANSPORT="threads"), timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip() == "mcp-harness: MCP_HARNESS_STDIO_TRANSPORT is 'threads'; allowed: auto, sdk"


def test_a_client_that_stops_reading_does_not_crash_the_server(sqlite_url, workspace):
    proc = subprocess.Popen(
        serve_command(sqlite_url, workspace, "raw"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=subprocess_env(),
    )  # fmt: skip
    for message in _initialize():
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        if "id" in message:
            assert json.loads(proc.stdout.readline())["id"] == 0
    proc.stdout.close()  # the client stops reading; the server's answers now have nowhere to go
    for i in range(1, 6):
        request = {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                   "params": {"name": "save_checkpoint", "arguments": {"state": {"n": i}}}}  # fmt: skip
        proc.stdin.write(json.dumps(request).encode() + b"\n")
        proc.stdin.flush()
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    assert "the client stopped reading stdout" in stderr and "Traceback" not in stderr


def test_a_burst_of_requests_is_answered_in_full(sqlite_url, workspace):
    """More requests than the transport reads ahead, written without waiting: stdin is paused and
    resumed, stdout fills and drains, and every request gets exactly one answer."""
    import threading

    proc = subprocess.Popen(
        serve_command(sqlite_url, workspace, "burst"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=subprocess_env(),
    )  # fmt: skip
    total = 600
    requests = [json.dumps(m) for m in _initialize()] + [
        json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
            "name": "save_checkpoint", "arguments": {"state": {"n": i, "pad": "x" * 400}}}})
        for i in range(1, total + 1)
    ]  # fmt: skip

    def write_all() -> None:
        proc.stdin.write(("\n".join(requests) + "\n").encode())
        proc.stdin.flush()

    writer = threading.Thread(target=write_all)
    writer.start()
    answers: dict[int, dict] = {}
    while len(answers) < total + 1:
        line = proc.stdout.readline()
        assert line, proc.stderr.read().decode()
        message = json.loads(line)
        assert message["id"] not in answers
        answers[message["id"]] = message
    writer.join()
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    proc.stdout.close()
    proc.stderr.close()
    versions = sorted(answers[i]["result"]["structuredContent"]["version"] for i in range(1, total + 1))
    assert versions == list(range(1, total + 1))
