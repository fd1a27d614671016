"""The server's instructions are written per role (contract revision 3): each says what that role does,
and only agents are told the claim, work, complete loop."""

from __future__ import annotations

import pytest
from mcp import Client
from support import settings_for

from mcp_harness.identity import Identity
from mcp_harness.mcp.server import INSTRUCTIONS, create_server

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("role", ["agent", "reader", "operator"])
async def test_each_role_is_told_what_it_does(sqlite_url, workspace, role):
    server = create_server(settings_for(sqlite_url), Identity(workspace=workspace, agent="a", role=role))
    async with Client(server) as client:
        told = client.instructions
    assert told == INSTRUCTIONS[role]
    assert ("claim_task" in told) == (role == "agent"), told
    assert len(told.encode()) < 500  # instructions are context: every byte is paid for
    if role == "reader":
        assert "read-only" in told and "forbidden" in told
    if role == "operator":
        assert "approve" in told and "reject" in told and "in_review" in told
