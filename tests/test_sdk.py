"""`mcp_harness/mcp/sdk.py` reaches into the MCP SDK's and uvicorn's internals; it was written against the
releases it names. Outside them this fails, saying to re-check that module before widening the range."""

from __future__ import annotations

import json
import re
from importlib.metadata import version

import pytest
from mcp.server.lowlevel.server import Server

from mcp_harness.mcp.sdk import checked_against, header_timeout_protocol, lowlevel


def release(text: str) -> tuple[int, int]:
    major, minor = re.match(r"(\d+)\.(\d+)", text).groups()  # type: ignore[union-attr]
    return int(major), int(minor)


@pytest.mark.parametrize(("distribution", "lowest", "beyond"), list(checked_against()))
def test_the_installed_release_is_one_sdk_py_was_checked_against(distribution, lowest, beyond):
    installed = version(distribution)
    assert lowest <= release(installed) < beyond, (
        f"{distribution} {installed} is outside {'.'.join(map(str, lowest))} to {'.'.join(map(str, beyond))} "
        "(exclusive), the releases mcp_harness/mcp/sdk.py was written against: re-check each of its functions "
        "against this release (each docstring names the internals it uses), then widen the range there"
    )


def test_what_sdk_py_reaches_into_is_there(tmp_path):
    from support import settings_for

    from mcp_harness.identity import Identity
    from mcp_harness.mcp.server import create_server

    server = create_server(settings_for(str(tmp_path / "h.db")), Identity("w", "a"))
    assert isinstance(lowlevel(server), Server)
    protocol = header_timeout_protocol(1.5)
    assert protocol.header_timeout == 1.5
    for name in ("conn", "transport", "loop"):  # attributes uvicorn's protocol sets up and ours reads
        assert name in protocol.__init__.__code__.co_names or name in protocol.connection_made.__code__.co_names, name
    assert callable(protocol.timeout_keep_alive_handler) and callable(protocol.on_response_complete)


@pytest.mark.anyio
async def test_the_body_reader_marks_only_unpaired_surrogates_and_passes_the_rest_as_it_came():
    from mcp_harness.arguments import UNPAIRED_SURROGATE, mark_unpaired_surrogates
    from mcp_harness.mcp.sdk import LenientJsonBody

    seen: list[tuple[dict, bytes]] = []

    async def inner(scope, receive, send) -> None:
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        seen.append((dict(scope["headers"]), body))

    reader = LenientJsonBody(inner, path="/mcp", limit=1000, mark=mark_unpaired_surrogates)

    async def post(*chunks: bytes) -> tuple[dict, bytes]:
        queue = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]

        async def receive():
            return queue.pop(0)

        length = str(sum(map(len, chunks))).encode()
        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": [(b"content-length", length)]}
        await reader(scope, receive, None)
        return seen[-1]

    call = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t", "arguments": %s}}'
    _, body = await post(call % b'{"tag": "main\\ud8ac", "ok": "\\ud83d\\ude00"}')
    headers, _ = seen[-1]
    arguments = json.loads(body)["params"]["arguments"]
    assert arguments == {"tag": UNPAIRED_SURROGATE, "ok": "\U0001f600"}
    assert headers[b"content-length"] == str(len(body)).encode()
    for untouched in (
        call % b'{"ok": "\\ud83d\\ude00"}',  # a pair: nothing to mark
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/\\ud8ac", "params": {}}',  # outside the arguments
        b"not json \\ud8ac",
    ):
        assert (await post(untouched[:20], untouched[20:]))[1] == untouched
    big = call % (b'{"tag": "x\\ud8ac", "pad": "' + b"p" * 2000 + b'"}')  # over the limit: passed on as it came
    assert (await post(big[:600], big[600:1200], big[1200:]))[1] == big


def test_pyproject_caps_each_dependency_at_the_first_release_sdk_py_was_not_checked_against():
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]
    caps = {}
    for requirement in project["dependencies"]:
        found = re.match(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?\s*(.*)", requirement)
        name, spec = found.groups()  # type: ignore[union-attr]
        caps[name.lower()] = spec
    for distribution, lowest, beyond in checked_against():
        low, high = ".".join(map(str, lowest)), ".".join(map(str, beyond))
        assert caps[distribution] == f">={low},<{high}", (
            f"pyproject.toml should require {distribution}>={low},<{high}, the releases sdk.py names"
        )
