"""The path of a `claim_task` call through the package: each function of mcp_harness on the stack when
the claim statement runs, from the server's `call_tool` down, with the file it is in.

    .venv/bin/python tools/claim_path.py

Runs one real claim through the official MCP client, in process, on a throwaway SQLite database, and
prints the frames (hops) and the files they cross. ARCHITECTURE.md quotes the figures.
"""

from __future__ import annotations

import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any
from unittest.mock import patch

import anyio
from mcp import Client

import mcp_harness
from mcp_harness.config import Settings
from mcp_harness.mcp.server import create_server
from mcp_harness.service import Identity
from mcp_harness.store import sqlite

PACKAGE = Path(mcp_harness.__file__).resolve().parent


async def main() -> None:
    seen: list[traceback.FrameSummary] = []
    original = sqlite.SqliteConnection.fetch_one

    async def spying(self: Any, query: Any, params: Any = sqlite.NO_PARAMS) -> Any:
        if query.name.startswith("claim") and not seen:
            seen.extend(traceback.extract_stack()[:-1])
        return await original(self, query, params)

    with patch.object(sqlite.SqliteConnection, "fetch_one", spying), tempfile.TemporaryDirectory() as folder:
        settings = Settings.from_env(str(Path(folder) / "h.db"))
        server = create_server(settings, Identity(workspace="w", agent="a"))
        async with Client(server, raise_exceptions=False) as client:
            await client.call_tool("add_tasks", {"tasks": [{"key": "t", "title": "T"}]})
            result = await client.call_tool("claim_task", {})
            assert not result.is_error, result.content
    frames = [f for f in seen if Path(f.filename).resolve().is_relative_to(PACKAGE)]
    start = next(i for i, f in enumerate(frames) if f.name == "call_tool")
    path = frames[start:]
    if not path:
        sys.exit("the claim statement did not run under call_tool")
    files: list[str] = []
    for frame in path:
        name = Path(frame.filename).resolve().relative_to(PACKAGE).as_posix()
        if name not in files:
            files.append(name)
        print(f"{name}:{frame.lineno}  {frame.name}")
    print(f"{len(path)} hops (functions) through {len(files)} files, from call_tool to the claim statement")


if __name__ == "__main__":
    anyio.run(main)
