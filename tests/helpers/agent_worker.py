"""A scripted agent process for crash tests: resumes what it holds, then claims and completes.

    python agent_worker.py DB WORKSPACE AGENT LOGFILE

Each accepted completion is appended to LOGFILE as `key agent`. Killed at any moment, it is simply
started again with the same AGENT name: `restore_state` hands back the task it was holding.
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp import Client, StdioServerParameters


async def main(db: str, workspace: str, agent: str, logfile: str) -> None:
    env = {k: v for k, v in os.environ.items() if k.startswith(("PATH", "HOME", "PYTHON", "VIRTUAL", "LANG"))}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_harness", "serve", "--db", db, "--workspace", workspace, "--agent", agent],
        env=env,
    )
    async with Client(params, read_timeout_seconds=60) as client:

        async def complete(key: str, token: str) -> None:
            result = await client.call_tool(
                "update_task", {"task_key": key, "action": "complete", "lease_token": token, "verification": agent}
            )
            if not result.is_error:
                with open(logfile, "a") as log:
                    log.write(f"{key} {agent}\n")

        brief = (await client.call_tool("restore_state", {"progress_limit": 0})).structured_content
        for held in brief["my_tasks"]:
            await complete(held["key"], held["lease"]["token"])
        while True:
            got = (await client.call_tool("claim_task", {"lease_seconds": 10, "wait_seconds": 2})).structured_content
            if got["task"] is None:
                if got["reason"] == "all_done":
                    return
                continue
            await anyio.sleep(0.005)  # "work": a window in which a kill leaves a held task behind
            await complete(got["task"]["key"], got["lease"]["token"])


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:5])
