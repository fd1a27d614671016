"""One Claude Code session, as the client runs it: a process that starts `mcp-harness serve` over stdio
with `CLAUDE_CODE_SESSION_ID` set, and runs the lifecycle hooks as its own children. Driven by JSON
lines on stdin, each answered by one JSON line on stdout:

    {"tool": NAME, "arguments": {...}}      -> the tool's structured result (or {"error": text})
    {"hook": EVENT, "input": {...}}          -> {"stdout": ..., "stderr": ...} of `mcp-harness hook EVENT`
    {"run": [ARG...], "env": {...}}           -> {"stdout", "stderr", "code"} of `mcp-harness ARG...` run
                                                through `sh -c` with `env` added (the session's Bash tool)

    python session_client.py DB WORKSPACE SESSION_ID
"""

from __future__ import annotations

import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters


async def main(db: str, workspace: str, session: str) -> None:
    env = {**os.environ, "CLAUDE_CODE_SESSION_ID": session}
    env.pop("MCP_HARNESS_SESSION", None)
    command = [sys.executable, "-m", "mcp_harness"]
    server = StdioServerParameters(
        command=command[0],
        args=[*command[1:], "serve", "--db", db, "--workspace", workspace, "--agent", "claude-code"],
        env=env,
    )
    async with Client(server, raise_exceptions=False) as client:
        print(json.dumps({"ready": True}), flush=True)
        while line := await anyio.to_thread.run_sync(sys.stdin.readline):
            order = json.loads(line)
            if "tool" in order:
                result = await client.call_tool(order["tool"], order.get("arguments", {}))
                out = {"error": result.content[0].text} if result.is_error else result.structured_content
            elif "run" in order:
                shell = ["sh", "-c", '"$@"', "sh", *command, *order["run"]]
                done = await anyio.run_process(shell, check=False, env={**env, **order.get("env", {})})
                out = {"stdout": done.stdout.decode(), "stderr": done.stderr.decode(), "code": done.returncode}
            else:
                hook = [*command, "hook", order["hook"], "--db", db, "--workspace", workspace]
                done = await anyio.run_process(hook, input=json.dumps(order["input"]).encode(), check=False, env=env)
                out = {"stdout": done.stdout.decode(), "stderr": done.stderr.decode()}
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:4])
