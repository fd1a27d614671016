"""The rules of mcp-harness, independent of MCP: every method takes the caller's `Identity`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..config import Settings, check_int, check_name
from ..models import RestoreStateResult
from ..store import Database, changes
from ..store import progress as progress_store
from .base import Identity, iso
from .checkpoints import CheckpointService
from .console import ConsoleService
from .maintenance import MaintenanceService
from .progress import ProgressService, progress_entry
from .schemas import SchemaService
from .tasks import TaskService
from .tokens import TokenService

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
        self.maintenance = MaintenanceService(db, settings)
        self.console = ConsoleService(db, settings, checkpoints=self.checkpoints)

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

    async def restore(
        self,
        ident: Identity,
        *,
        thread: str = "main",
        version: int | None = None,
        checkpoint_id: str | None = None,
        label: str | None = None,
        paths: list[str] | None = None,
        progress_limit: int = 5,
    ) -> RestoreStateResult:
        """The resume brief: a state (or parts of it), recent progress, held tasks and task counts,
        all read in one consistent transaction."""
        check_name("thread", thread)
        check_int("progress_limit", progress_limit, 0, 100)
        async with self.db.read() as conn:
            meta, state, missing = await self.checkpoints.load(
                conn, ident, thread=thread, version=version, checkpoint_id=checkpoint_id, label=label, paths=paths
            )
            rows = await progress_store.recent(conn, ident.workspace, thread=thread, limit=progress_limit)
            held, counts = await self.tasks.brief(conn, ident)
        return RestoreStateResult(
            found=meta is not None,
            checkpoint=meta,
            state=state,
            missing_paths=missing,
            recent_progress=[progress_entry(r) for r in rows],
            my_tasks=held,
            task_counts=counts,
        )
