"""The session runner's records: the runners that keep the work going and the agent sessions they start.

A runner registers itself and renews its row while it lives; each session it starts is written before
the agent starts (so a runner that dies leaves a row that others see as an orphan), kept up to date
while it runs and closed with its outcome. A person may ask for a running session to stop; the runner
that started it sees the request and stops it."""

from __future__ import annotations

import builtins
from typing import Any, cast

from mcp_harness.base import Identity, ServiceBase, iso
from mcp_harness.errors import InvalidArgument, NotFound
from mcp_harness.models import RunnerRecord, SessionOutcome, SessionRecord
from mcp_harness.runs import store
from mcp_harness.sessions import pid_alive
from mcp_harness.store.common import now
from mcp_harness.store.records import AgentSessionRow, RunnerRow

#: a runner renews its row at least this often; one not seen for three times as long has died
RUNNER_SEEN_SECONDS = 10.0
SESSIONS_LISTED = 200  #: at most this many sessions in a listing, the newest first


def session_record(row: AgentSessionRow) -> SessionRecord:
    return SessionRecord(
        id=row.id,
        runner=row.runner,
        slot=row.slot,
        agent=row.agent,
        task_key=row.task_key,
        kind=cast(Any, row.kind),
        started_at=iso(row.started_at),
        ended_at=iso(row.ended_at) if row.ended_at is not None else None,
        outcome=cast(Any, row.outcome),
        exit_code=row.exit_code,
        turns=row.turns,
        cost_usd=row.cost_usd,
        last_tool=row.last_tool,
        last_words=row.last_words,
        transcript=row.transcript,
        stop_requested_by=row.stop_requested_by,
    )


def runner_gone(row: RunnerRow | None, at: float) -> bool:
    """Whether a runner no longer runs: it ended, was not seen for three renewals, or (on this machine)
    its process is gone, as a `kill -9` leaves it: known at once, not after the renewals."""
    if row is None or row.ended_at is not None or row.seen_at < at - 3 * RUNNER_SEEN_SECONDS:
        return True
    return pid_alive(row.host, row.pid, row.started_at) is False


def runner_record(row: RunnerRow) -> RunnerRecord:
    return RunnerRecord(
        id=row.id,
        host=row.host,
        pid=row.pid,
        started_at=iso(row.started_at),
        seen_at=iso(row.seen_at),
        waiting=row.waiting,
    )


class RunService(ServiceBase):
    # -- the runner itself ------------------------------------------------------------------------

    async def register(self, workspace: str, runner: str, host: str, pid: int) -> None:
        async with self.db.write() as conn:
            await store.insert_runner(conn, id=runner, workspace=workspace, host=host, pid=pid, at=now())

    async def runner_seen(self, runner: str, waiting: str | None = None) -> list[str]:
        """Renew the runner's row (with what it waits on); answers the ids of its sessions a person asked
        to stop."""
        async with self.db.write() as conn:
            await store.runner_seen(conn, runner, now(), waiting)
            return await store.stops_requested(conn, runner)

    async def end_runner(self, runner: str) -> None:
        async with self.db.write() as conn:
            await store.end_runner(conn, runner, now())

    async def live_runners(self, ident: Identity) -> list[RunnerRecord]:
        at = now()
        async with self.db.read() as conn:
            rows = await store.live_runners(conn, ident.workspace, at - 3 * RUNNER_SEEN_SECONDS)
        return [runner_record(r) for r in rows if not runner_gone(r, at)]

    # -- its sessions -----------------------------------------------------------------------------

    async def start_session(
        self,
        workspace: str,
        session: str,
        *,
        runner: str,
        slot: int,
        agent: str,
        task_key: str | None,
        kind: str,
        transcript: str | None,
    ) -> None:
        async with self.db.write() as conn:
            await store.insert_session(
                conn,
                id=session,
                ws=workspace,
                runner=runner,
                slot=slot,
                agent=agent,
                task_key=task_key,
                kind=kind,
                at=now(),
                transcript=transcript,
            )

    async def session_seen(self, session: str, turns: int, cost: float | None, last_tool: str | None) -> None:
        async with self.db.write() as conn:
            await store.session_seen(conn, session, now(), turns, cost, last_tool)

    async def end_session(
        self,
        session: str,
        outcome: SessionOutcome,
        *,
        exit_code: int | None,
        turns: int,
        cost: float | None,
        last_tool: str | None,
        last_words: str | None,
    ) -> bool:
        """Close a session's record with its outcome (once: False when it was closed already)."""
        async with self.db.write() as conn:
            changed = await store.end_session(
                conn,
                id=session,
                at=now(),
                outcome=outcome,
                exit_code=exit_code,
                turns=turns,
                cost=cost,
                last_tool=last_tool,
                last_words=last_words,
            )
        return changed > 0

    async def request_stop(self, ident: Identity, session: str) -> SessionRecord:
        """A person asks for a running session to stop (its runner stops it within seconds)."""
        if ident.role != "operator":
            raise InvalidArgument("only an operator may stop a session")
        async with self.db.write() as conn:
            row = await store.session(conn, ident.workspace, session)
            if row is None:
                raise NotFound(f"no session {session!r} in this workspace: `mcp-harness sessions` lists them")
            if row.ended_at is not None:
                raise InvalidArgument(f"session {session!r} has ended already ({row.outcome})")
            await store.request_stop(conn, ident.workspace, session, now(), ident.agent)
            row = await store.session(conn, ident.workspace, session)
        assert row is not None
        return session_record(row)

    async def get(self, ident: Identity, session: str) -> SessionRecord:
        async with self.db.read() as conn:
            row = await store.session(conn, ident.workspace, session)
        if row is None:
            raise NotFound(f"no session {session!r} in this workspace: `mcp-harness sessions` lists them")
        return session_record(row)

    async def list(self, ident: Identity, *, live: bool = False, limit: int = SESSIONS_LISTED) -> list[SessionRecord]:
        """The workspace's sessions, newest first (`live`: those still open); an open one whose runner is
        gone says `runner_gone`."""
        at = now()
        async with self.db.read() as conn:
            if live:
                rows = await store.live_sessions(conn, ident.workspace)
            else:
                rows = await store.sessions(conn, ident.workspace, min(limit, SESSIONS_LISTED))
            runners = (
                await store.open_session_runners(conn, ident.workspace) if any(r.ended_at is None for r in rows) else {}
            )
        return [
            session_record(r).model_copy(update={"runner_gone": True})
            if r.ended_at is None and runner_gone(runners.get(r.runner), at)
            else session_record(r)
            for r in rows
        ]

    async def orphans(self, workspace: str) -> builtins.list[SessionRecord]:
        """Sessions still open whose runner has ended or died (not seen for three renewals, or on this
        machine its process is gone): another runner settles them."""
        at = now()
        async with self.db.read() as conn:
            rows = await store.live_sessions(conn, workspace)
            runners = await store.open_session_runners(conn, workspace) if rows else {}
        return [session_record(r) for r in rows if runner_gone(runners.get(r.runner), at)]

    async def outcomes(self, ident: Identity) -> builtins.list[tuple[str, int, float | None]]:
        """(outcome, sessions, their summed cost) of the workspace's ended sessions."""
        async with self.db.read() as conn:
            return await store.outcomes(conn, ident.workspace)

    async def every_outcome(self) -> builtins.list[tuple[str, str, int, float | None]]:
        """(workspace, outcome, sessions, their summed cost) of every workspace (the metrics)."""
        async with self.db.read() as conn:
            return await store.every_outcome(conn)
