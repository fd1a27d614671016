"""The session runner's records: the rules and their store (the runner itself is `mcp_harness.runner`)."""
