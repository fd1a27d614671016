"""Task rules: dependencies, atomic claims, fenced leases, retries with backoff, long-poll waits.

`TaskService` joins one part per concept: adding (`task_add`), claiming (`task_claim`), changing a
task (`task_update`; people's actions, approve/reject/operator_release/retry_now/cancel: `task_review`)
and the wake-up signal they share (`task_wait`); reading lives here."""

from __future__ import annotations

import builtins
from typing import Any

from ..arguments import ListTasksArgs
from ..config import check_name
from ..errors import NotFound
from ..models import HeldTask, ListTasksResult, TaskCounts, TaskDetail, TaskStory
from ..store import Connection
from ..store import progress as progress_store
from ..store import tasks as store
from ..store.common import now
from .base import Identity
from .progress import progress_entry
from .task_add import AddingTasks
from .task_claim import ClaimingTasks
from .task_review import ReviewingTasks
from .task_views import decode_cursor, encode_cursor, held_task, task_counts, task_detail, task_event, task_row


class TaskService(AddingTasks, ClaimingTasks, ReviewingTasks):
    async def list(self, ident: Identity, args: ListTasksArgs | None = None, /, **fields: Any) -> ListTasksResult:
        """Tasks in creation order as compact rows, with the counts (`args`, or its fields as keywords).
        `status` is one or a list; `ready`: only those a claim could take now (true) or only the others."""
        args = ListTasksArgs.of(args, fields)
        limit = args.limit
        statuses = [args.status] if isinstance(args.status, str) else args.status
        after = decode_cursor(args.cursor) if args.cursor else 0
        at = now()
        async with self.db.read() as conn:
            rows = await store.page(
                conn, ident.workspace, statuses=statuses, ready=args.ready, now=at, tag=args.tag, limit=limit + 1,
                after_id=after,
            )  # fmt: skip
            counts = await store.counts(conn, ident.workspace)
        more = len(rows) > limit
        rows = rows[:limit]
        return ListTasksResult(
            tasks=[task_row(r, at) for r in rows],
            counts=task_counts(counts),
            next_cursor=encode_cursor(rows[-1].id) if more else None,
        )

    async def board(
        self, ident: Identity, *, statuses: builtins.list[str] | None = None
    ) -> tuple[builtins.list[TaskDetail], TaskCounts]:
        """Every task (full views with their leases, for people) and the counts."""
        at, after, out = now(), 0, []
        async with self.db.read() as conn:
            while True:
                rows = await store.page(
                    conn, ident.workspace, statuses=statuses, ready=None, now=at, tag=None, limit=1000, after_id=after
                )
                out.extend(task_detail(r, at) for r in rows)
                if len(rows) < 1000:
                    break
                after = rows[-1].id
            counts = await store.counts(conn, ident.workspace)
        return out, task_counts(counts)

    async def brief(self, conn: Connection, ident: Identity) -> tuple[list[HeldTask], TaskCounts]:
        """This agent's held tasks and the workspace counts, inside the caller's read."""
        at = now()
        held = [held_task(r, at) for r in await store.held_by(conn, ident.workspace, ident.agent)]
        return held, task_counts(await store.counts(conn, ident.workspace))

    async def story(self, ident: Identity, key: str) -> TaskStory:
        """One task with its lease, its events and the progress entries about it (oldest first)."""
        check_name("task_key", key)
        at = now()
        async with self.db.read() as conn:
            row = await store.get(conn, ident.workspace, key)
            if row is None:
                raise NotFound(f"no task with key {key!r} in workspace {ident.workspace!r}")
            events = await store.events(conn, ident.workspace, key)
            entries = await progress_store.recent(conn, ident.workspace, task_key=key, limit=1000)
        return TaskStory(
            task=task_detail(row, at),
            events=[task_event(e) for e in events],
            progress=[progress_entry(p) for p in reversed(entries)],
        )
