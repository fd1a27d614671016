"""Task rules: dependencies, atomic claims, fenced leases, retries with backoff, long-poll waits.

`TaskService` joins one part per concept: adding (`task_add`), claiming (`task_claim`), changing a
task (`task_update`) and the wake-up signal they share (`task_wait`); reading lives here."""

from __future__ import annotations

from typing import Any

from ..arguments import ListTasksArgs
from ..models import HeldTask, ListTasksResult, TaskCounts, TaskView
from ..store import Connection
from ..store import tasks as store
from ..store.common import now
from .base import Identity
from .task_add import AddingTasks
from .task_claim import ClaimingTasks
from .task_update import UpdatingTasks
from .task_views import decode_cursor, encode_cursor, held_task, task_row, task_view


class TaskService(AddingTasks, ClaimingTasks, UpdatingTasks):
    async def list(self, ident: Identity, args: ListTasksArgs | None = None, /, **fields: Any) -> ListTasksResult:
        """Tasks in creation order as compact rows, with the counts (`args`, or its fields as keywords)."""
        args = ListTasksArgs.of(args, fields)
        limit = args.limit
        after = decode_cursor(args.cursor) if args.cursor else 0
        async with self.db.read() as conn:
            rows = await store.page(
                conn, ident.workspace, statuses=args.status, tag=args.tag, limit=limit + 1, after_id=after
            )
            counts = await store.counts(conn, ident.workspace)
        more = len(rows) > limit
        rows = rows[:limit]
        return ListTasksResult(
            tasks=[task_row(r) for r in rows],
            counts=TaskCounts(**counts),
            next_cursor=encode_cursor(rows[-1].id) if more else None,
        )

    async def board(self, ident: Identity, *, statuses: list[str] | None = None) -> tuple[list[TaskView], TaskCounts]:
        """Every task (full views, for people) and the counts."""
        at, after, out = now(), 0, []
        async with self.db.read() as conn:
            while True:
                rows = await store.page(conn, ident.workspace, statuses=statuses, tag=None, limit=1000, after_id=after)
                out.extend(task_view(r, at) for r in rows)
                if len(rows) < 1000:
                    break
                after = rows[-1].id
            counts = await store.counts(conn, ident.workspace)
        return out, TaskCounts(**counts)

    async def brief(self, conn: Connection, ident: Identity) -> tuple[list[HeldTask], TaskCounts]:
        """This agent's held tasks and the workspace counts, inside the caller's read."""
        at = now()
        held = [held_task(r, at) for r in await store.held_by(conn, ident.workspace, ident.agent)]
        return held, TaskCounts(**await store.counts(conn, ident.workspace))
