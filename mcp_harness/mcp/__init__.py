"""The MCP face of mcp-harness: the server and its tools and resources, the stdio and HTTP transports, metrics."""
