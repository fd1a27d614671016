"""Claiming tasks: one atomic statement under a fresh lease, long-poll waits, and why nothing was claimed."""

from __future__ import annotations

import secrets
from typing import Any

import anyio

from ..arguments import ClaimTaskArgs
from ..errors import NotFound
from ..models import ClaimTaskResult
from ..store import Connection
from ..store import tasks as store
from ..store.common import now
from ..store.records import TaskRecord
from .base import Identity
from .task_views import task_view
from .task_wait import WaitingClaims


async def _take(
    conn: Connection, ident: Identity, at: float, lease_seconds: int, tags: list[str] | None, task_key: str | None
) -> TaskRecord | None:
    """The claim statement with a new lease token: the claimed row, or None."""
    return await store.claim(
        conn, ident.workspace, agent=ident.agent, token=secrets.token_urlsafe(18), now=at,
        lease_seconds=lease_seconds, tags=tags, task_key=task_key,
    )  # fmt: skip


class ClaimingTasks(WaitingClaims):
    async def claim(self, ident: Identity, args: ClaimTaskArgs | None = None, /, **fields: Any) -> ClaimTaskResult:
        """Claim the next claimable task (or task_key) under a new lease, waiting up to wait_seconds for one
        (`args`, or its fields as keywords)."""
        args = ClaimTaskArgs.of(args, fields)
        lease_seconds, tags, task_key = args.lease_seconds, args.tags, args.task_key
        deadline = anyio.current_time() + args.wait_seconds

        async def body(conn: Connection) -> tuple[TaskRecord, float] | ClaimTaskResult:
            return await self._claim_once(conn, ident, lease_seconds, tags, task_key)

        def finish(raw: tuple[TaskRecord, float] | ClaimTaskResult) -> ClaimTaskResult:
            if isinstance(raw, ClaimTaskResult):
                return raw
            view = task_view(*raw)
            return ClaimTaskResult(task=view, lease=view.lease)

        while True:
            if args.idempotency_key is None:
                taken = await self._claim_single(ident, lease_seconds, tags, task_key)
                if taken is not None:
                    return taken
            result = await self.exactly_once(
                ident, args, ClaimTaskResult, body, finish=finish, remember=lambda r: r.task is not None
            )
            remaining = deadline - anyio.current_time()
            if result.task is not None or remaining <= 0:
                return result
            await self._wait_for_work(ident, tags, task_key, remaining)
            if anyio.current_time() >= deadline:
                # One last look: the change may have come in the final moment.
                deadline = anyio.current_time()

    async def _claim_single(
        self, ident: Identity, lease_seconds: int, tags: list[str] | None, task_key: str | None
    ) -> ClaimTaskResult | None:
        """The common case, a task is there to take, as the claim statement alone (atomic by itself,
        so on PostgreSQL it skips the BEGIN and COMMIT round trips). None when nothing was taken:
        the caller's transaction then works out why."""
        at = now()
        async with self.db.single() as conn:
            row = await _take(conn, ident, at, lease_seconds, tags, task_key)
        if row is None:
            return None
        view = task_view(row, at)
        return ClaimTaskResult(task=view, lease=view.lease)

    async def _claim_once(
        self,
        conn: Connection,
        ident: Identity,
        lease_seconds: int,
        tags: list[str] | None,
        task_key: str | None,
    ) -> tuple[TaskRecord, float] | ClaimTaskResult:
        """The claimed row (turned into a result after commit), or why nothing was claimed."""
        at = now()
        row = await _take(conn, ident, at, lease_seconds, tags, task_key)
        if row is not None:
            return row, at
        # Nothing claimable: now (off the hot path) fail leases that ran out on their last attempt,
        # and work out why nothing was returned.
        if task_key is not None and await store.get(conn, ident.workspace, task_key) is None:
            raise NotFound(f"no task with key {task_key!r} in this workspace")
        failed = await store.fail_expired_exhausted(conn, ident.workspace, at)
        if failed:
            await store.propagate(conn, ident.workspace, failed)
        facts = await store.why_nothing(conn, ident.workspace, now=at, tags=tags, task_key=task_key)
        retry_after = round(facts.next_available_at - at, 3) if facts.next_available_at else None
        if facts.waiting_on_deps:
            reason = "blocked_by_dependencies"
        elif facts.claimed:
            reason = "all_claimed"
        elif facts.total and facts.finished == facts.total:
            reason = "all_done"
        else:
            reason = "none_pending"
        return ClaimTaskResult(task=None, lease=None, reason=reason, retry_after=retry_after)
