"""Task rules: dependencies, atomic claims, fenced leases, retries with backoff, long-poll waits.

`TaskService` is what adapters call. It holds one part per step: `adding` (`add.py`), `claiming`
(`claim.py`), `actions` (`actions.py`: every action on a task, through `update`, the one entry point of the
tool, the CLI and the console; the state machine itself is `rules.py`) and the `wakeup` they share
(`wait.py`); reading lives here."""

from __future__ import annotations

import builtins
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, ListTasksArgs, UpdateTaskArgs
from mcp_harness.base import Identity, ServiceBase
from mcp_harness.config import Settings, check_name
from mcp_harness.errors import NotFound, Unavailable
from mcp_harness.messages import store as message_store
from mcp_harness.messages.service import message
from mcp_harness.models import (
    AddTasksResult,
    ClaimTaskResult,
    HeldTask,
    ListTasksResult,
    TaskCounts,
    TaskDetail,
    TaskStory,
)
from mcp_harness.progress import store as progress_store
from mcp_harness.progress.service import progress_entry
from mcp_harness.search.service import reading, search_terms
from mcp_harness.store import Connection, Database
from mcp_harness.store.common import now
from mcp_harness.tasks.actions import Answer, TaskActions
from mcp_harness.tasks.add import TaskAdder
from mcp_harness.tasks.claim import TaskClaimer
from mcp_harness.tasks.context import task_context
from mcp_harness.tasks.end import LeaseEnder
from mcp_harness.tasks.events import fail_exhausted
from mcp_harness.tasks.rules import SETTLED, SHOWN, UNKNOWN, Status
from mcp_harness.tasks.store import reservations
from mcp_harness.tasks.store import tasks as store
from mcp_harness.tasks.views import (
    decode_cursor,
    encode_cursor,
    full_row,
    held_task,
    task_counts,
    task_detail,
    task_event,
    task_row,
)
from mcp_harness.tasks.wait import Wakeup

#: what list_tasks lists without `status`: the open tasks (counts still cover every status)
LISTED_BY_DEFAULT = [s for s in SHOWN if s not in SETTLED]

T = TypeVar("T")
log = logging.getLogger(__name__)


class TaskService(ServiceBase):
    def __init__(self, db: Database, settings: Settings) -> None:
        super().__init__(db, settings)
        self.wakeup = Wakeup(db, settings)
        self.adding = TaskAdder(db, settings, self.wakeup)
        self.ending = LeaseEnder(db, settings, self.wakeup)
        self.claiming = TaskClaimer(db, settings, self.wakeup, self.ending)
        self.actions = TaskActions(db, settings, self.wakeup)

    @property
    def taken_over(self) -> dict[str, int]:
        """workspace -> expired leases this process's claims took over (for the metrics)."""
        return self.claiming.taken_over

    async def add(self, ident: Identity, args: AddTasksArgs) -> AddTasksResult:
        """Add tasks; identical re-adds are no-ops."""
        return await self.adding.add(ident, args)

    async def claim(self, ident: Identity, args: ClaimTaskArgs) -> ClaimTaskResult:
        """Claim the next claimable task (or task_key) under a new lease, waiting up to wait_seconds for one."""
        return await self.claiming.claim(ident, args)

    async def update(self, ident: Identity, args: UpdateTaskArgs) -> Answer:
        """Act on a task: THE entry point for every action, whoever
        takes it (the update_task tool, the CLI, the console). A person passes an `operator` identity."""
        return await self.actions.act(ident, args)

    async def end_leases(
        self,
        ident: Identity,
        reason: str,
        *,
        tokens: builtins.list[str] | dict[str, float] | None = None,
        cwd: Path | None = None,
    ) -> list[str]:
        """End `ident`'s live leases (only those of `tokens`: a connection's own) as if they expired now;
        each note names what `git status` shows uncommitted in `cwd`'s repository (default: this process's)."""
        return await self.ending.end_leases(ident, reason, tokens=tokens, cwd=cwd)

    async def end_dead(self, workspace: str) -> list[str]:
        """End the leases whose stdio server process is gone (a look does it first); never fails the look."""
        try:
            return await self.ending.end_dead(workspace)
        except Unavailable as exc:  # a read-only (or busy) database: a later look ends them
            log.warning("the leases of a process that is gone are left for a later look: %s", exc.message)
            return []

    async def settle_ran_out(self, workspace: str) -> None:
        """Fail the tasks whose lease ran out on their last attempt, each with its event and note, and
        settle what depends on them: what a claim does when it finds nothing, here for a list or a restore
        that found such a lease (a look settles a lease that ran out)."""
        async with self.db.write() as conn:
            await fail_exhausted(conn, workspace, now())
        self.wakeup.notify(workspace)

    async def read_settled(self, workspace: str, read: Callable[[], Awaitable[tuple[T, bool]]]) -> T:
        """Run `read`, a read that answers what it read and whether it found a lease that ran out on its
        last attempt (`store.counts_and_ran_out`); when it found one, settle it and read again, so a list
        or a restore never shows such a task as held. The write happens only then (rarely); where it cannot
        be made (a read-only database) the look answers what it read, and a later look settles it. First,
        the leases of stdio servers whose process is gone end (`LeaseEnder.end_dead`)."""
        await self.end_dead(workspace)
        got, ran_out = await read()
        if ran_out:
            try:
                await self.settle_ran_out(workspace)
            except Unavailable as exc:  # a read-only (or busy) database: reads still work, unsettled
                log.warning("a lease that ran out on its last attempt is left for a later look: %s", exc.message)
                return got
            got, _ran_out = await read()  # a lease that ran out meanwhile waits for the next look
        return got

    async def list(self, ident: Identity, args: ListTasksArgs) -> ListTasksResult:
        """Tasks in creation order as compact rows, with the counts.
        `status` is one or a list (default: the open ones, all but done and cancelled); `ready`: only those a
        claim could take now (true) or only the others; `task_key`: that task's every field, any status."""
        if args.task_key is not None:
            return await self._one(ident, args.task_key)
        limit = args.limit
        # without `status`: the open tasks, but a search looks at every status (what was done is searched most)
        default = None if args.query is not None else LISTED_BY_DEFAULT
        statuses = [args.status] if isinstance(args.status, str) else args.status or default
        after = decode_cursor(args.cursor) if args.cursor else 0
        terms = search_terms(args.query) if args.query is not None else None

        async def read() -> tuple[ListTasksResult, bool]:
            at = now()
            async with reading(self.db, terms) as conn:
                rows = await store.page(
                    conn,
                    ident.workspace,
                    statuses=builtins.list(statuses) if statuses is not None else None,
                    ready=args.ready,
                    now=at,
                    tag=args.tag,
                    limit=limit + 1,
                    after_id=after,
                    search=terms,
                )
                counts, ran_out = await store.counts_and_ran_out(conn, ident.workspace, at)
            more = len(rows) > limit
            rows = rows[:limit]
            listed = ListTasksResult(
                tasks=[task_row(r, at) for r in rows],
                counts=task_counts(counts),
                next_cursor=encode_cursor(rows[-1].id) if more else None,
            )
            return listed, ran_out

        return await self.read_settled(ident.workspace, read)

    async def _one(self, ident: Identity, key: str) -> ListTasksResult:
        """`list_tasks(task_key=K)`: K's full row, whatever its status, with the counts."""

        async def read() -> tuple[ListTasksResult, bool]:
            at = now()
            async with self.db.read() as conn:
                row = await store.get(conn, ident.workspace, key)
                if row is None:
                    raise NotFound(f"no task with key {key!r} in this workspace{UNKNOWN}")
                context = await task_context(conn, ident.workspace, row, full=True)
                added_by = await store.added_by(conn, ident.workspace, key)
                counts, ran_out = await store.counts_and_ran_out(conn, ident.workspace, at)
            full = full_row(row, at, context, added_by)
            listed = ListTasksResult(tasks=[full], counts=task_counts(counts), next_cursor=None)
            return listed, ran_out

        return await self.read_settled(ident.workspace, read)

    async def board(
        self, ident: Identity, *, statuses: builtins.list[str] | None = None, query: str | None = None
    ) -> tuple[builtins.list[TaskDetail], TaskCounts]:
        """Every task (full views with their leases, for people; with `query`, those matching it) and the counts."""
        at, after = now(), 0
        out: builtins.list[TaskDetail] = []
        terms = search_terms(query) if query is not None else None
        async with reading(self.db, terms) as conn:
            while True:
                rows = await store.page(
                    conn,
                    ident.workspace,
                    statuses=statuses,
                    ready=None,
                    now=at,
                    tag=None,
                    limit=1000,
                    after_id=after,
                    search=terms,
                )
                tokens = [r.lease_token for r in rows if r.lease_token and r.status == Status.CLAIMED]
                paths = await reservations.held_by_tokens(conn, ident.workspace, tokens)
                out.extend(task_detail(r, at, paths.get(r.lease_token or "")) for r in rows)
                if len(rows) < 1000:
                    break
                after = rows[-1].id
            counts = await store.counts(conn, ident.workspace)
        return out, task_counts(counts)

    async def brief(self, conn: Connection, ident: Identity) -> tuple[builtins.list[HeldTask], TaskCounts, bool]:
        """This agent's held tasks and the workspace counts, inside the caller's read, and whether a lease
        ran out on its last attempt (the caller then settles it and reads again: `read_settled`)."""
        at = now()
        rows = await store.held_by(conn, ident.workspace, ident.agent)
        tokens = [r.lease_token for r in rows if r.lease_token and r.status == Status.CLAIMED]
        paths = await reservations.held_by_tokens(conn, ident.workspace, tokens)
        held = [
            held_task(r, at, await task_context(conn, ident.workspace, r), paths.get(r.lease_token or "")) for r in rows
        ]
        counts, ran_out = await store.counts_and_ran_out(conn, ident.workspace, at)
        return held, task_counts(counts), ran_out

    async def detail(self, ident: Identity, key: str) -> TaskDetail:
        """One task with its lease, as it now stands (for people)."""
        check_name("task_key", key)
        async with self.db.read() as conn:
            row = await store.get(conn, ident.workspace, key)
        if row is None:
            raise NotFound(f"no task with key {key!r} in workspace {ident.workspace!r}")
        return task_detail(row, now())

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
            held = await reservations.held(conn, row.id, row.lease_token) if row.lease_token else None
            notes = await message_store.about_task(conn, ident.workspace, key, limit=1000)
        return TaskStory(
            task=task_detail(row, at, held),
            events=[task_event(e) for e in events],
            progress=[progress_entry(p) for p in reversed(entries)],
            messages=[message(m) for m in reversed(notes)],
        )
