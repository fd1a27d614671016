"""`mcp_harness/sdk.py` reaches into the MCP SDK's and uvicorn's internals; it was written against the
releases it names. Outside them this fails, saying to re-check that module before widening the range."""

from __future__ import annotations

import re
from importlib.metadata import version

import pytest
from mcp.server.lowlevel.server import Server

from mcp_harness.sdk import checked_against, header_timeout_protocol, lowlevel


def release(text: str) -> tuple[int, int]:
    major, minor = re.match(r"(\d+)\.(\d+)", text).groups()  # type: ignore[union-attr]
    return int(major), int(minor)


@pytest.mark.parametrize(("distribution", "lowest", "beyond"), list(checked_against()))
def test_the_installed_release_is_one_sdk_py_was_checked_against(distribution, lowest, beyond):
    installed = version(distribution)
    assert lowest <= release(installed) < beyond, (
        f"{distribution} {installed} is outside {'.'.join(map(str, lowest))} to {'.'.join(map(str, beyond))} "
        "(exclusive), the releases mcp_harness/sdk.py was written against: re-check each of its functions "
        "against this release (each docstring names the internals it uses), then widen the range there"
    )


def test_what_sdk_py_reaches_into_is_there(tmp_path):
    from conftest import settings_for

    from mcp_harness.identity import Identity
    from mcp_harness.server import create_server

    server = create_server(settings_for(str(tmp_path / "h.db")), Identity("w", "a"))
    assert isinstance(lowlevel(server), Server)
    protocol = header_timeout_protocol(1.5)
    assert protocol.header_timeout == 1.5
    for name in ("conn", "transport", "loop"):  # attributes uvicorn's protocol sets up and ours reads
        assert name in protocol.__init__.__code__.co_names or name in protocol.connection_made.__code__.co_names, name
    assert callable(protocol.timeout_keep_alive_handler) and callable(protocol.on_response_complete)
