"""The session runner's records: runner processes and the agent sessions they start."""

from __future__ import annotations

from typing import Any

from mcp_harness.store import named
from mcp_harness.store.common import ensure_workspace
from mcp_harness.store.connection import Connection
from mcp_harness.store.records import AgentSessionRow, RunnerRow

Q = named.load("runs")


async def insert_runner(conn: Connection, *, id: str, workspace: str, host: str, pid: int, at: float) -> None:
    await ensure_workspace(conn, workspace)
    await conn.execute(Q.insert_runner, {"id": id, "ws": workspace, "host": host, "pid": pid, "at": at})


async def runner_seen(conn: Connection, id: str, at: float, waiting: str | None) -> None:
    await conn.execute(Q.runner_seen, {"id": id, "at": at, "waiting": waiting})


async def end_runner(conn: Connection, id: str, at: float) -> None:
    await conn.execute(Q.end_runner, {"id": id, "at": at})


async def live_runners(conn: Connection, workspace: str, since: float) -> list[RunnerRow]:
    return await conn.fetch_all(Q.live_runners, {"ws": workspace, "since": since})


async def insert_session(conn: Connection, **fields: Any) -> None:
    await conn.execute(Q.insert_session, fields)


async def session_seen(
    conn: Connection, id: str, at: float, turns: int, cost: float | None, last_tool: str | None
) -> None:
    await conn.execute(Q.session_seen, {"id": id, "at": at, "turns": turns, "cost": cost, "last_tool": last_tool})


async def end_session(conn: Connection, **fields: Any) -> int:
    return await conn.execute(Q.end_session, fields)


async def request_stop(conn: Connection, workspace: str, id: str, at: float, by: str) -> int:
    return await conn.execute(Q.request_stop, {"ws": workspace, "id": id, "at": at, "by": by})


async def stops_requested(conn: Connection, runner: str) -> list[str]:
    return [row[0] for row in await conn.fetch_all(Q.stops_requested, {"runner": runner})]


async def session(conn: Connection, workspace: str, id: str) -> AgentSessionRow | None:
    return await conn.fetch_one(Q.session, {"ws": workspace, "id": id})


async def sessions(conn: Connection, workspace: str, limit: int) -> list[AgentSessionRow]:
    return await conn.fetch_all(Q.sessions, {"ws": workspace, "limit": limit})


async def live_sessions(conn: Connection, workspace: str) -> list[AgentSessionRow]:
    return await conn.fetch_all(Q.live_sessions, {"ws": workspace})


async def open_session_runners(conn: Connection, workspace: str) -> dict[str, RunnerRow]:
    """The runners of the workspace's open sessions, by id."""
    return {row.id: row for row in await conn.fetch_all(Q.open_session_runners, {"ws": workspace})}


async def outcomes(conn: Connection, workspace: str) -> list[tuple[str, int, float | None]]:
    return [(row[0], int(row[1]), row[2]) for row in await conn.fetch_all(Q.session_outcomes, {"ws": workspace})]


async def every_outcome(conn: Connection) -> list[tuple[str, str, int, float | None]]:
    rows = await conn.fetch_all(Q.every_session_outcome)
    return [(row[0], row[1], int(row[2]), row[3]) for row in rows]
