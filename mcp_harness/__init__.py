"""mcp-harness: durable memory and safe coordination for MCP agents."""

__version__ = "0.1.0"
