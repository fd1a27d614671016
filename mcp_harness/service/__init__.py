"""The rules of mcp-harness, independent of MCP: every method takes the caller's `Identity`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Any

from mcp_harness.access.tokens import TokenService
from mcp_harness.arguments import RestoreStateArgs
from mcp_harness.base import Identity, iso
from mcp_harness.checkpoints.schemas import SchemaService
from mcp_harness.checkpoints.service import CheckpointService, restored_checkpoint
from mcp_harness.config import Settings
from mcp_harness.contacts import ContactService
from mcp_harness.messages.service import MessageService, unread_count
from mcp_harness.messages.service import inbox as read_inbox
from mcp_harness.models import RestoreStateResult, TaskDetail, Unread, You
from mcp_harness.oversight.overview import ended_by, workspace_status
from mcp_harness.progress import store as progress_store
from mcp_harness.progress.service import ProgressService, progress_entry
from mcp_harness.search.service import reading, search_terms
from mcp_harness.store import Database, changes
from mcp_harness.tasks.service import TaskService

if TYPE_CHECKING:
    from mcp_harness.access.console_sessions import ConsoleSessionService
    from mcp_harness.maintenance.service import MaintenanceService
    from mcp_harness.oversight.links import ConsoleLinks
    from mcp_harness.oversight.service import ConsoleService
    from mcp_harness.runs.service import RunService

__all__ = ["Harness", "Identity", "iso"]


class Harness:
    """One database, the services over it, and the resume brief that spans them."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        self.checkpoints = CheckpointService(db, settings)
        self.progress = ProgressService(db, settings)
        self.tasks = TaskService(db, settings)
        self.schemas = SchemaService(db, settings)
        self.tokens = TokenService(db, settings)
        self.messages = MessageService(db, settings)
        self.contacts = ContactService(db, settings)

    @cached_property
    def console(self) -> ConsoleService:
        """The console's pages: loaded on first use (a stdio session never shows one; it starts faster)."""
        from mcp_harness.oversight.service import ConsoleService

        return ConsoleService(self.db, self.settings, checkpoints=self.checkpoints)

    @cached_property
    def console_links(self) -> ConsoleLinks:
        """The console's joins of checkpoints to the work (which entry and task a version went with):
        loaded on first use, as `console`."""
        from mcp_harness.oversight.links import ConsoleLinks

        return ConsoleLinks(self.db, self.settings)

    @cached_property
    def console_sessions(self) -> ConsoleSessionService:
        """Console sign-ins: loaded on first use, as `console`."""
        from mcp_harness.access.console_sessions import ConsoleSessionService

        return ConsoleSessionService(self.db, self.settings)

    @cached_property
    def runs(self) -> RunService:
        """The session runner's records (runners and their agent sessions): loaded on first use."""
        from mcp_harness.runs.service import RunService

        return RunService(self.db, self.settings)

    @cached_property
    def maintenance(self) -> MaintenanceService:
        """Export/import and prune: loaded on first use, with SQLAlchemy (a session's calls never are)."""
        from mcp_harness.maintenance.service import MaintenanceService

        return MaintenanceService(self.db, self.settings)

    @classmethod
    @asynccontextmanager
    async def open(cls, settings: Settings) -> AsyncIterator[Harness]:
        """Open the database (creating or upgrading its schema) for the life of the block."""
        db = Database(settings.db_url, pool_size=settings.pool_size)
        try:
            await db.open()
            yield cls(db, settings)
        finally:
            await changes.close(db)
            await db.close()

    async def restore(self, ident: Identity, args: RestoreStateArgs) -> RestoreStateResult:
        """The resume brief: a state (or parts of it), recent progress, held tasks and task counts,
        all read in one consistent transaction. A lease that ran out on
        its last attempt is settled first (the task fails: `TaskService.read_settled`)."""

        terms = search_terms(args.query) if args.query is not None else None

        async def read() -> tuple[RestoreStateResult, bool]:
            async with reading(self.db, terms) as conn:
                meta, state, missing = await self.checkpoints.load(conn, ident, args)
                restored = await restored_checkpoint(conn, ident.workspace, meta) if meta is not None else None
                # One log per workspace: the newest entries of every thread, each naming its
                # thread; with a query, the best full-text matches instead.
                if terms is not None:
                    rows = await progress_store.search(conn, ident.workspace, terms, limit=args.progress_limit)
                else:
                    rows = await progress_store.recent(conn, ident.workspace, limit=args.progress_limit)
                held, counts, ran_out = await self.tasks.brief(conn, ident)
                inbox = await read_inbox(conn, ident)
            brief = RestoreStateResult(
                you=You(agent=ident.agent, role=ident.role),
                found=meta is not None,
                checkpoint=restored,
                state=state,
                missing_paths=missing,
                recent_progress=[progress_entry(r) for r in rows],
                my_tasks=held,
                task_counts=counts,
                inbox=inbox,
            )
            return brief, ran_out

        return await self.tasks.read_settled(ident.workspace, read)

    async def inbox(self, ident: Identity) -> Unread | None:
        """`{unread}` when messages wait for the caller, else None: what claim and heartbeat answers carry
        (one indexed count, in a read of its own after the call's transaction)."""
        async with self.db.read() as conn:
            return await unread_count(conn, ident)

    async def status(self, ident: Identity) -> dict[str, Any]:
        """What a person supervising agents needs at a glance (see `overview`)."""
        report = await workspace_status(self.db, self.tasks, ident)
        report["runners"] = [r.model_dump(mode="json") for r in await self.runs.live_runners(ident)]
        report["running_sessions"] = [s.model_dump(mode="json") for s in await self.runs.list(ident, live=True)]
        return report

    async def lease_end_reason(self, ident: Identity, task: TaskDetail) -> str | None:
        """Why `task`'s lease, past its time, ended when its holder's connection or session ended it
        (None: it ran out, or it is not past its time)."""
        lease = task.lease
        if lease is None or not lease.expired:
            return None
        return await ended_by(self.db, ident, task.key, task.owner, lease.attempt, lease.expires_at)

    async def workspaces(self) -> list[str]:
        """The workspaces this database holds data in, by name (a plain read: no SQLAlchemy)."""
        from mcp_harness.oversight.store.reads import workspace_names

        async with self.db.read() as conn:
            return await workspace_names(conn)

    async def ping(self) -> None:
        """Raise `Unavailable` unless the database answers."""
        await self.db.ping()

    async def database_bytes(self) -> int:
        """The database's size on disk."""
        return await self.db.size_bytes()
