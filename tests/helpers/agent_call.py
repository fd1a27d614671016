"""One MCP tool call by an agent in a process of its own, through the real server and the official
client (in-process in this helper), printing the structured result as JSON:

    python agent_call.py DB WORKSPACE AGENT TOOL '{"json": "arguments"}'
"""

from __future__ import annotations

import json
import sys

import anyio
from mcp import Client

from mcp_harness.config import Settings
from mcp_harness.mcp.server import create_server
from mcp_harness.service import Identity


async def main(db: str, workspace: str, agent: str, tool: str, arguments: str) -> None:
    server = create_server(Settings.from_env(db), Identity(workspace=workspace, agent=agent))
    async with Client(server, raise_exceptions=False) as client:
        result = await client.call_tool(tool, json.loads(arguments))
    if result.is_error:
        sys.exit(result.content[0].text)
    print(json.dumps(result.structured_content))


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:6])
