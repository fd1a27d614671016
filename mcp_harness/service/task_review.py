"""People's actions on tasks (the `operator` role): approve or reject what waits in review, release a lease
without its token, end a retry backoff now, cancel a task the plan no longer needs.

The public methods (`approve`, `reject`, `operator_release`, `retry_now`, `cancel`) are what the CLI and the
console call; the update_task tool reaches the same code through `update(action=...)`. Each is one write
transaction that records the task event, the harness's progress entry naming the person (for the kinds
the next session must know), and brings the dependents up to date (a gate whose last dependency was
approved or cancelled enters review in that same transaction)."""

from __future__ import annotations

from typing import Any

from ..arguments import UpdateTaskArgs
from ..errors import InvalidArgument
from ..models import UpdateTaskResult
from ..store import Connection
from ..store import tasks as store
from ..store.records import TaskRecord
from .base import Identity
from .task_events import event, logged
from .task_update import UpdatingTasks
from .task_views import status_of

#: what a cancel may end: anything not finished (a done task is reopened, not cancelled)
CANCELLABLE = ("pending", "claimed", "in_review", "failed")


class ReviewingTasks(UpdatingTasks):
    # -- for the CLI and the console: one method per button --------------------------------------
    async def approve(self, ident: Identity, key: str, comment: str | None = None) -> UpdateTaskResult:
        """Approve a task in review (operator): it is done; dependents may become claimable."""
        return await self.update(ident, task_key=key, action="approve", comment=comment)

    async def reject(self, ident: Identity, key: str, comment: str) -> UpdateTaskResult:
        """Reject a task in review (operator, with a comment): a work task is pending again (attempt
        given back, the comment travels to its next claimer); a gate fails."""
        return await self.update(ident, task_key=key, action="reject", comment=comment)

    async def operator_release(self, ident: Identity, key: str) -> UpdateTaskResult:
        """Release a claimed task without its lease token (operator): pending again, attempt given back;
        its holder's next call gets `lease_lost` saying an operator released it."""
        return await self.update(ident, task_key=key, action="release")

    async def retry_now(self, ident: Identity, key: str) -> UpdateTaskResult:
        """End a pending task's retry backoff now (operator)."""
        return await self.update(ident, task_key=key, action="retry_now")

    async def cancel(self, ident: Identity, key: str, reason: str) -> UpdateTaskResult:
        """Cancel a task the plan no longer needs (operator, with a reason): its dependents stop waiting
        on it; a lease on it is revoked; `reopen` revives it."""
        return await self.update(ident, task_key=key, action="cancel", reason=reason)

    # -- the actions ------------------------------------------------------------------------------
    async def _approve(self, ident: Identity, args: UpdateTaskArgs) -> UpdateTaskResult:
        async def change(conn: Connection, at: float) -> TaskRecord:
            values = {"status": "done", "ready": False, "completed_at": at, "review_comment": None, "updated_at": at}
            row = await self._in_status(conn, ident, args, ("in_review",), values, "tasks in review")
            ev = event("approve", ident.agent, {"comment": args.comment} if args.comment else None)
            await logged(conn, ident.workspace, row.key, row.attempts, ev, at)
            return row

        return await self._transact(ident, args, change)

    async def _reject(self, ident: Identity, args: UpdateTaskArgs) -> UpdateTaskResult:
        async def change(conn: Connection, at: float) -> TaskRecord:
            ws, key = ident.workspace, args.task_key
            before = await self._current(conn, ws, key)
            detail: dict[str, Any] = {"comment": args.comment}
            values: dict[str, Any] = {"review_comment": args.comment, "updated_at": at}
            if before.kind == "gate":
                values |= {"status": "failed", "ready": False, "last_error": f"rejected: {args.comment}"}
                detail["gate"] = True
            else:
                deps_done, _blocked = (await store.compute_flags(conn, ws, [key]))[key]
                values |= {"status": "pending", "ready": deps_done, "owner": None, "lease_token": None,
                           "lease_expires_at": None, "attempts": max(0, before.attempts - 1), "available_at": at,
                           "result": None, "verification": None, "completed_at": None}  # fmt: skip
                detail |= {k: getattr(before, k) for k in ("result", "verification") if getattr(before, k)}
            row = await self._in_status(conn, ident, args, ("in_review",), values, "tasks in review")
            await logged(conn, ws, key, before.attempts, event("reject", ident.agent, detail), at)
            return row

        return await self._transact(ident, args, change)

    async def _cancel(self, ident: Identity, args: UpdateTaskArgs) -> UpdateTaskResult:
        async def change(conn: Connection, at: float) -> TaskRecord:
            before = await self._current(conn, ident.workspace, args.task_key)
            values = {"status": "cancelled", "ready": False, "owner": None, "lease_token": None,
                      "lease_expires_at": None, "updated_at": at}  # fmt: skip
            row = await self._in_status(conn, ident, args, CANCELLABLE, values, "tasks not done or cancelled")
            detail = {"reason": args.reason} | ({"owner": before.owner} if before.status == "claimed" else {})
            await logged(conn, ident.workspace, row.key, before.attempts, event("cancel", ident.agent, detail), at)
            return row

        return await self._transact(ident, args, change)

    async def _retry_now(self, ident: Identity, args: UpdateTaskArgs) -> UpdateTaskResult:
        async def change(conn: Connection, at: float) -> TaskRecord:
            before = await self._current(conn, ident.workspace, args.task_key)
            if before.status != "pending" or before.available_at <= at:
                raise InvalidArgument(
                    f"retry_now ends a retry backoff; task {args.task_key!r} is {status_of(before)} "
                    "and not waiting out a backoff"
                )
            values = {"available_at": at, "updated_at": at}
            row = await self._in_status(conn, ident, args, ("pending",), values, "tasks waiting out a backoff")
            await logged(conn, ident.workspace, row.key, row.attempts, event("retry_now", ident.agent), at)
            return row

        return await self._transact(ident, args, change)

    async def _operator_release(self, ident: Identity, args: UpdateTaskArgs) -> UpdateTaskResult:
        async def change(conn: Connection, at: float) -> TaskRecord:
            before = await self._current(conn, ident.workspace, args.task_key)
            values = {"status": "pending", "owner": None, "lease_token": None, "lease_expires_at": None,
                      "attempts": max(0, before.attempts - 1), "available_at": at, "updated_at": at}  # fmt: skip
            row = await self._in_status(conn, ident, args, ("claimed",), values, "claimed tasks")
            ev = event("operator_release", ident.agent, {"owner": before.owner})
            await logged(conn, ident.workspace, row.key, before.attempts, ev, at)
            return row

        return await self._transact(ident, args, change)

    async def _in_status(
        self,
        conn: Connection,
        ident: Identity,
        args: UpdateTaskArgs,
        statuses: tuple[str, ...],
        values: dict[str, Any],
        works_on: str,
    ) -> TaskRecord:
        """Apply `values` if the task's status is one of `statuses`; else `invalid_argument` naming it."""
        row = await store.update_where_status(conn, ident.workspace, args.task_key, statuses, values)
        if row is None:
            current = await self._current(conn, ident.workspace, args.task_key)
            raise InvalidArgument(f"{args.action} works on {works_on}; task {args.task_key!r} is {status_of(current)}")
        return row
