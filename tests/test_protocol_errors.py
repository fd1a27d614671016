"""Protocol-level mistakes (an unknown prompt, a prompt without its required argument or with an unknown
one, an unknown resource, a malformed resource URI) are JSON-RPC errors with code -32602 (invalid params)
and a one-line message, and the server logs no traceback for them: they are the caller's mistakes, not
the server's."""

from __future__ import annotations

import logging

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from support import mcp_client, serve_command, subprocess_env

pytestmark = pytest.mark.anyio

MISTAKES = [
    ("get_prompt", ("nope", {}), "no prompt named 'nope'; prompts: initialize_project, resume_session"),
    ("get_prompt", ("initialize_project", {}), "prompt 'initialize_project' needs the argument goal"),
    ("get_prompt", ("initialize_project", {"goal": ""}), "needs the argument goal"),
    (
        "get_prompt",
        ("resume_session", {"thred": "x"}),
        "prompt 'resume_session' has no argument 'thred'; arguments: thread",
    ),
    ("read_resource", ("harness://nope",), "Unknown resource: harness://nope"),
    (
        "read_resource",
        ("harness://threads/main/checkpoints/abc",),
        "version must be a positive whole number, not 'abc'",
    ),
    ("read_resource", ("harness://threads/main/checkpoints/0",), "version must be a positive whole number, not '0'"),
    ("read_resource", ("harness://threads/none/state",), "[not_found] thread 'none' has no checkpoint"),
]


async def answers(client: Client) -> list[MCPError]:
    errors = []
    for method, args, _text in MISTAKES:
        with pytest.raises(MCPError) as caught:
            await getattr(client, method)(*args)
        errors.append(caught.value)
    return errors


def check(errors: list[MCPError]) -> None:
    for (_method, _args, text), err in zip(MISTAKES, errors, strict=True):
        assert err.code == INVALID_PARAMS, (text, err.code, err.message)
        assert text in err.message and "\n" not in err.message


async def test_protocol_mistakes_are_invalid_params_without_a_traceback(sqlite_url, workspace, caplog):
    caplog.set_level(logging.DEBUG)
    async with mcp_client(sqlite_url, workspace) as client:
        check(await answers(client))
        assert (await client.get_prompt("initialize_project", {"goal": "ship"})).messages  # a good call still works
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.WARNING], [
        (r.name, r.levelname, r.getMessage()) for r in caplog.records if r.exc_info or r.levelno >= logging.WARNING
    ]


@pytest.mark.slow  # starts the server as a process
async def test_over_stdio_too(sqlite_url, workspace, tmp_path):
    cmd = serve_command(sqlite_url, workspace, "stdio-agent")
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=subprocess_env())
    with open(tmp_path / "stderr.txt", "w+") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as client:
            check(await answers(client))
        errlog.seek(0)
        logged = errlog.read()
    assert "Traceback" not in logged and "Internal" not in logged, logged
