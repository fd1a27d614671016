"""A stdio MCP server with one tool that does nothing: the baseline for `tools/bench.py`'s round trip."""

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

server = MCPServer(name="noop", log_level="WARNING")


class Nothing(BaseModel):
    ok: bool


@server.tool(name="noop", description="Does nothing.")
async def noop() -> Nothing:
    return Nothing(ok=True)


if __name__ == "__main__":
    server.run("stdio")
