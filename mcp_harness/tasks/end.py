"""A session's (or a connection's) end: its live leases end as if they had expired at that moment.
So do the leases of a stdio server whose process is gone without a word (killed): the next look (a
claim that finds nothing, a list, a restore) ends them (`LeaseEnder.end_dead`).

The attempt stays counted and the owner stays until a claim takes the task over (the take-over note
names the previous holder); on the last attempt the task fails at once. Each ended lease is a
`lease_end` task event with the harness's note saying why, so the log (and the next claimer's
`context`) shows it."""

from __future__ import annotations

from pathlib import Path

from mcp_harness.base import Identity, ServiceBase
from mcp_harness.config import Settings
from mcp_harness.sessions import recorded_pid
from mcp_harness.store import Database
from mcp_harness.store.common import now
from mcp_harness.tasks.events import event, fail_exhausted, left_behind, logged
from mcp_harness.tasks.rules import Status
from mcp_harness.tasks.store import tasks as store
from mcp_harness.tasks.wait import Wakeup, dead_leases
from mcp_harness.tasks.work_tree import gather


class LeaseEnder(ServiceBase):
    def __init__(self, db: Database, settings: Settings, wakeup: Wakeup) -> None:
        super().__init__(db, settings)
        self.wakeup = wakeup

    async def end_leases(
        self,
        ident: Identity,
        reason: str,
        *,
        tokens: list[str] | dict[str, float] | None = None,
        cwd: Path | None = None,
    ) -> list[str]:
        """End `ident`'s live leases (only those of `tokens` when given: a connection's own; as token ->
        when the connection last took or renewed it, a lease renewed since through another connection
        stays), each with a note naming the holder, `reason` and the files left uncommitted in the
        repository of `cwd` (default: this process's folder). Returns the keys of the tasks whose lease
        ended."""
        if tokens is not None and not tokens:
            return []
        if tokens is None:  # a session's end: git runs only when it holds a lease
            async with self.db.read() as conn:
                held = await store.held_by(conn, ident.workspace, ident.agent)
            if not any(row.status == Status.CLAIMED and (row.lease_expires_at or 0) > now() for row in held):
                return []
        changes = await gather(cwd)  # before the write: git never runs inside a transaction
        at = now()
        async with self.db.write() as conn:
            ended = await store.end_leases(conn, ident.workspace, ident.agent, at, tokens)
            last = {}  # the tasks on their last attempt fail at once, by what happened
            for row in ended:
                detail = {"reason": reason} | ({"last": True} if row.attempts >= row.max_attempts else {})
                detail |= left_behind(changes, row.paths)
                await logged(conn, ident.workspace, row.key, row.attempts, event("lease_end", ident.agent, detail), at)
                if row.attempts >= row.max_attempts:
                    last[row.key] = reason
            if ended:
                await fail_exhausted(conn, ident.workspace, at, last)
        if ended:
            self.wakeup.notify(ident.workspace)
        return [row.key for row in ended]

    async def end_dead(self, workspace: str) -> list[str]:
        """End the live leases of `workspace` whose stdio server process is gone from this machine (its
        pid no longer runs with the start time recorded), each as its connection's end would, with the
        note; a lease renewed through another process since is left alone. The keys whose lease ended.
        One read when no lease was taken through a stdio server; the write only for a dead one."""
        at = now()
        async with self.db.read() as conn:
            dead = await dead_leases(conn, workspace, at)
        if not dead:
            return []
        ended = []
        changes = await gather()
        async with self.db.write() as conn:
            last = {}
            for lease in dead:
                row = await store.end_lease_of_process(conn, workspace, lease.lease_token, lease.lease_process, at)
                if row is None:
                    continue
                reason = f"its process ended (pid {recorded_pid(lease.lease_process)} is gone)"
                detail = {"reason": reason} | ({"last": True} if row.attempts >= row.max_attempts else {})
                detail |= left_behind(changes, row.paths)
                await logged(conn, workspace, row.key, row.attempts, event("lease_end", lease.owner, detail), at)
                if row.attempts >= row.max_attempts:
                    last[row.key] = reason
                ended.append(row.key)
            if ended:
                await fail_exhausted(conn, workspace, at, last)
        if ended:
            self.wakeup.notify(workspace)
        return ended
