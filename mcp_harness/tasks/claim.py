"""Claiming tasks: one atomic statement under a fresh lease, long-poll waits, and why nothing was claimed."""

from __future__ import annotations

import json
import secrets
from typing import Any

import anyio

from mcp_harness.arguments import ClaimTaskArgs
from mcp_harness.base import Identity, ServiceBase
from mcp_harness.config import Settings
from mcp_harness.contacts import CLAIMED, riding
from mcp_harness.errors import InvalidArgument, NotFound
from mcp_harness.messages.service import unread_count, who, windows
from mcp_harness.models import ClaimTaskResult, HandedTask, TaskContext, Unread
from mcp_harness.store import Connection, Database
from mcp_harness.store.common import now
from mcp_harness.store.records import ClaimedTask, ClaimedWithFacts
from mcp_harness.tasks.context import task_context
from mcp_harness.tasks.end import LeaseEnder
from mcp_harness.tasks.events import event, fail_exhausted, fingerprint, left_behind, logged
from mcp_harness.tasks.reasons import empty_claim_reason, with_holders
from mcp_harness.tasks.reservations import claim_reserving, reserved_answer
from mcp_harness.tasks.rules import UNKNOWN
from mcp_harness.tasks.store import tasks as store
from mcp_harness.tasks.store.tasks import Contact, PathMode
from mcp_harness.tasks.views import lease_now, lease_of, status_of, task_view
from mcp_harness.tasks.wait import Wakeup
from mcp_harness.tasks.work_tree import Changes, gather


async def _take(
    conn: Connection,
    ident: Identity,
    at: float,
    lease_seconds: int,
    tags: list[str] | None,
    task_key: str | None,
    paths: PathMode = "first",
    allowed: int | None = None,
    contact: Contact | None = None,
    inbox: dict[str, Any] | None = None,
) -> ClaimedTask | None:
    """The claim statement with a new lease token: the claimed row, or None. `paths`: how tasks with
    paths are taken (`first`, the default: only when the best task has none; see `tasks/reservations.py`);
    `contact`: the caller's contact row, written with the claim when it took a task; `inbox`: the
    claimer as the unread count names it, for a `ClaimedWithFacts`."""
    token = secrets.token_urlsafe(18)
    return await store.claim(
        conn,
        ident.workspace,
        agent=ident.agent,
        token=token,
        fingerprint=fingerprint(token),
        now=at,
        lease_seconds=lease_seconds,
        tags=tags,
        task_key=task_key,
        paths=paths,
        allowed=allowed,
        process=ident.process,
        contact=contact,
        inbox=inbox,
    )


def _claimed(row: ClaimedTask, at: float, context: TaskContext | None, inbox: Unread | None = None) -> ClaimTaskResult:
    return ClaimTaskResult(task=task_view(row, at, HandedTask, context=context), lease=lease_of(row, at), inbox=inbox)


async def _log_take_over(
    conn: Connection, ident: Identity, row: ClaimedTask, at: float, changes: Changes | None
) -> None:
    """The claim statement recorded the take-over event; the log gets the harness's entry about it, which
    says why the lease ended when a connection's (a session's) end ended it, else that it expired, and
    what `git status` showed uncommitted under the task's paths (`changes`, gathered before)."""
    detail: dict[str, Any] = {"previous_owner": row.taken_from}
    ended = await store.last_event(conn, ident.workspace, row.key, "lease_end")
    if ended is not None and ended.actor == row.taken_from and ended.attempt == row.attempts - 1 and ended.detail:
        detail["ended"] = json.loads(ended.detail).get("reason")
    detail |= left_behind(changes, row.paths)
    ev = event("take_over", ident.agent, detail)
    await logged(conn, ident.workspace, row.key, row.attempts, ev, at, recorded=True)


class TaskClaimer(ServiceBase):
    """Claims tasks (the claim_task tool), waiting on the shared `Wakeup` when none is there."""

    def __init__(self, db: Database, settings: Settings, wakeup: Wakeup, ending: LeaseEnder) -> None:
        super().__init__(db, settings)
        self.wakeup = wakeup
        self.ending = ending  #: ends the leases of dead processes before a claim that found nothing decides
        #: workspace -> expired leases this process's claims took over (for the metrics)
        self.taken_over: dict[str, int] = {}

    def _count_take_over(self, workspace: str) -> None:
        self.taken_over[workspace] = self.taken_over.get(workspace, 0) + 1

    async def claim(self, ident: Identity, args: ClaimTaskArgs) -> ClaimTaskResult:
        """Claim the next claimable task (or task_key) under a new lease, waiting up to wait_seconds for one."""
        lease_seconds, tags, task_key = args.lease_seconds, args.tags, args.task_key
        deadline = anyio.current_time() + args.wait_seconds

        changes: Changes | None = None

        async def body(conn: Connection) -> tuple[ClaimedTask, float, TaskContext | None] | ClaimTaskResult:
            return await self._claim_once(conn, ident, lease_seconds, tags, task_key, changes)

        def finish(raw: tuple[ClaimedTask, float, TaskContext | None] | ClaimTaskResult) -> ClaimTaskResult:
            return raw if isinstance(raw, ClaimTaskResult) else _claimed(*raw)

        async def replay(conn: Connection, stored: ClaimTaskResult) -> ClaimTaskResult:
            """A replayed claim shows the task's status now, and its lease `live: false` once that lease
            no longer holds the task (only claims that took a task are remembered)."""
            if stored.task is None or stored.lease is None:
                return stored
            row = await store.get(conn, ident.workspace, stored.task.key)
            task = stored.task if row is None else stored.task.model_copy(update={"status": status_of(row)})
            return stored.model_copy(update={"task": task, "lease": lease_now(row, stored.lease, now())})

        while True:
            if args.idempotency_key is None:
                taken = await self._claim_single(ident, lease_seconds, tags, task_key)
                if taken is not None:
                    return taken
            # nothing was free: a lease whose stdio server process is gone ends now, and the claim takes it
            await self.ending.end_dead(ident.workspace)
            # a claim here may take over a lease that ran out: what it left uncommitted is read first,
            # outside the transaction (only when there is such a lease)
            changes = await self._changes_if_expired(ident.workspace)
            result = await self.exactly_once(
                ident, args, ClaimTaskResult, body, finish=finish, remember=lambda r: r.task is not None, replay=replay
            )
            remaining = deadline - anyio.current_time()
            if result.task is not None or remaining <= 0:
                return await self._with_inbox(ident, result)
            if not await self.wakeup.wait_for_work(ident, tags, task_key, remaining):
                return await self._with_inbox(ident, result)  # the caller left: as if the wait ran out
            if anyio.current_time() >= deadline:
                # One last look: the change may have come in the final moment.
                deadline = anyio.current_time()

    async def _changes_if_expired(self, workspace: str) -> Changes | None:
        """The work tree's changes when a lease of `workspace` ran out and no claim took it yet, else None."""
        async with self.db.read() as conn:
            if not await store.has_expired_lease(conn, workspace, now()):
                return None
        return await gather()

    async def _with_inbox(self, ident: Identity, result: ClaimTaskResult) -> ClaimTaskResult:
        """The answer with the caller's unread count (`inbox`, when above 0), in a read of its own (the
        common case reads it on the claim's connection: `_claim_single`)."""
        async with self.db.read() as conn:
            inbox = await unread_count(conn, ident)
        return result if inbox is None else result.model_copy(update={"inbox": inbox})

    async def _claim_single(
        self, ident: Identity, lease_seconds: int, tags: list[str] | None, task_key: str | None
    ) -> ClaimTaskResult | None:
        """The common case, a task is there to take, as the claim statement alone (atomic by itself,
        so on PostgreSQL it skips the BEGIN and COMMIT round trips), then the handoff context's reads on
        the same connection (they need no snapshot with it, and a read transaction of their own would
        cost a large part of a claim). None when nothing was taken: the caller's transaction then
        works out why."""
        at = now()
        addressed = {**who(ident), **windows()}
        with riding(ident, CLAIMED) as ride:  # the caller's contact row, written by the claim statement
            async with self.db.single() as conn:
                row = await _take(conn, ident, at, lease_seconds, tags, task_key, contact=ride.contact, inbox=addressed)
                context = None
                if row is not None:
                    assert isinstance(row, ClaimedWithFacts)
                    ride.done = True
                    # what the new holder must know, read on the same connection: only when a note names
                    # the task or it has dependencies (the claim said whether a note does)
                    if row.taken_from is None and (row.noted or json.loads(row.depends_on)):
                        context = await task_context(conn, ident.workspace, row)
        if row is None:
            return None
        assert isinstance(row, ClaimedWithFacts)
        inbox = Unread(unread=row.unread) if row.unread else None
        if row.taken_from is not None:  # rare: an expired lease taken over; the log hears of it
            self._count_take_over(ident.workspace)
            changes = await gather()
            async with self.db.write() as conn:
                await _log_take_over(conn, ident, row, at, changes)
                context = await task_context(conn, ident.workspace, row)
        return _claimed(row, at, context, inbox)

    async def _claim_once(
        self,
        conn: Connection,
        ident: Identity,
        lease_seconds: int,
        tags: list[str] | None,
        task_key: str | None,
        changes: Changes | None = None,
    ) -> tuple[ClaimedTask, float, TaskContext | None] | ClaimTaskResult:
        """The claimed row (turned into a result after commit), or why nothing was claimed. `changes`: the
        work tree's, for the note of a take-over."""
        at = now()

        async def take(paths: PathMode, allowed: int | None) -> ClaimedTask | None:
            return await _take(conn, ident, at, lease_seconds, tags, task_key, paths, allowed)

        row, clashes = await claim_reserving(conn, ident.workspace, ident.agent, at, tags, task_key, take)
        if row is not None:
            if row.taken_from is not None:
                self._count_take_over(ident.workspace)
                await _log_take_over(conn, ident, row, at, changes)
            return row, at, await task_context(conn, ident.workspace, row)
        # Nothing claimable: now (off the hot path) fail leases that ran out on their last attempt,
        # and work out why nothing was returned.
        if task_key is not None:
            named = await store.get(conn, ident.workspace, task_key)
            if named is None:
                raise NotFound(f"no task with key {task_key!r} in this workspace{UNKNOWN}")
            if named.kind == "gate":
                raise InvalidArgument(
                    f"task {task_key!r} is a gate: a person's decision (approve or reject), never claimed. To ask "
                    f"for it: message(action='send', to='operators', task_key={task_key!r}, body=...); then claim "
                    "other work"
                )
        await fail_exhausted(conn, ident.workspace, at)
        why = await empty_claim_reason(conn, ident.workspace, at=at, tags=tags, task_key=task_key, agent=ident.agent)
        return await with_holders(conn, ident.workspace, reserved_answer(clashes, why) if clashes else why, at)
