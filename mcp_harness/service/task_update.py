"""Changing a task: one method per action (heartbeat, complete, fail, release need the lease token and are
fenced by it; reopen revives a finished task), behind `update`, the dispatcher the update_task tool calls."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..arguments import UpdateTaskArgs
from ..errors import InvalidArgument, LeaseLost, NotFound, TooLarge
from ..jsonvalue import canonical, check_depth, dumps
from ..models import TaskView
from ..store import Connection
from ..store import tasks as store
from ..store.common import now
from ..store.records import TaskRecord
from .base import Identity
from .progress import append_entry
from .task_views import status_of, task_view
from .task_wait import WaitingClaims

#: one action's change inside the write transaction: (connection, time) -> the updated row
Change = Callable[[Connection, float], Awaitable[TaskRecord]]


class UpdatingTasks(WaitingClaims):
    async def update(self, ident: Identity, args: UpdateTaskArgs | None = None, /, **fields: Any) -> TaskView:
        """Check the arguments, then run the action's method (`args`, or its fields as keywords)."""
        args = UpdateTaskArgs.of(args, fields)
        self._check_update(args)
        canonical(args.fingerprint(), what="arguments")
        run = {
            "heartbeat": self._heartbeat,
            "complete": self._complete,
            "fail": self._fail,
            "release": self._release,
            "reopen": self._reopen,
        }[args.action]
        return await run(ident, args)

    def _check_update(self, args: UpdateTaskArgs) -> None:
        """Refuse what the action does not accept: a missing lease token, verification or reason, values over
        the limits."""
        action = args.action
        if action != "reopen" and not args.lease_token:
            raise InvalidArgument(f"{action} needs the lease_token that claim_task returned")
        if action == "complete" and not (args.verification or "").strip():
            raise InvalidArgument("complete needs verification: say how the result was verified")
        if action == "reopen" and not (args.reason or "").strip():
            raise InvalidArgument("reopen needs a reason (it is recorded in the progress log)")
        if args.result is not None:
            check_depth(args.result, self.limits.max_depth, what="result")
            if len(canonical(args.result, what="result")) > self.limits.max_value_bytes:
                raise TooLarge(f"result is over the limit of {self.limits.max_value_bytes} bytes")
        for name in ("verification", "error", "reason"):
            text = getattr(args, name)
            if text is not None and len(text) > self.limits.max_text_chars:
                raise TooLarge(f"{name} is {len(text)} characters, over the limit of {self.limits.max_text_chars}")

    # -- the actions ------------------------------------------------------------------------------
    async def _heartbeat(self, ident: Identity, args: UpdateTaskArgs) -> TaskView:
        """Extend the lease (by lease_seconds, else by the length the claim asked for)."""
        seconds = args.lease_seconds

        async def change(conn: Connection, at: float) -> TaskRecord:
            current = await self._current(conn, ident.workspace, args.task_key)
            values = {
                "lease_expires_at": at + (seconds or current.lease_seconds or 900),
                "lease_seconds": seconds or current.lease_seconds,
                "updated_at": at,
            }
            return await self._leased(conn, ident.workspace, args, values)

        return await self._transact(ident, args, change, settles=False)

    async def _complete(self, ident: Identity, args: UpdateTaskArgs) -> TaskView:
        """Finish the task with its result and how it was verified; its dependents may become ready."""
        result_json = dumps(args.result) if args.result is not None else None

        def done(at: float) -> dict[str, Any]:
            return {
                "status": "done",
                "ready": False,  # finished tasks leave the claim scan
                "result": result_json,
                "verification": args.verification,
                "completed_at": at,
                "lease_expires_at": None,
                "updated_at": at,
            }

        if args.idempotency_key is None:
            # The common case, a task nothing depends on, is one statement (see ClaimingTasks._claim_single).
            at = now()
            async with self.db.single() as conn:
                row = await store.update_leased(
                    conn, ident.workspace, args.task_key, args.lease_token, done(at), leaf_only=True
                )
            if row is not None:
                self._notify()
                return task_view(row, at)

        async def change(conn: Connection, at: float) -> TaskRecord:
            return await self._leased(conn, ident.workspace, args, done(at))

        return await self._transact(ident, args, change)

    async def _fail(self, ident: Identity, args: UpdateTaskArgs) -> TaskView:
        """Give the task up as failed: retried after a backoff while attempts remain (and retry), else failed."""

        async def change(conn: Connection, at: float) -> TaskRecord:
            current = await self._current(conn, ident.workspace, args.task_key)
            if args.retry and current.attempts < current.max_attempts:
                delay = min(
                    self.settings.backoff_cap_seconds,
                    self.settings.backoff_base_seconds * 2 ** max(0, current.attempts - 1),
                )
                values = {
                    "status": "pending",
                    "owner": None,
                    "lease_token": None,
                    "lease_expires_at": None,
                    "available_at": at + delay,
                    "last_error": args.error,
                    "updated_at": at,
                }
            else:
                values = {
                    "status": "failed",
                    "ready": False,
                    "lease_token": None,
                    "lease_expires_at": None,
                    "last_error": args.error,
                    "updated_at": at,
                }
            return await self._leased(conn, ident.workspace, args, values)

        return await self._transact(ident, args, change)

    async def _release(self, ident: Identity, args: UpdateTaskArgs) -> TaskView:
        """Hand the task back unfinished, at once claimable, without using up an attempt."""

        async def change(conn: Connection, at: float) -> TaskRecord:
            current = await self._current(conn, ident.workspace, args.task_key)
            values = {
                "status": "pending",
                "owner": None,
                "lease_token": None,
                "lease_expires_at": None,
                "attempts": max(0, current.attempts - 1),
                "available_at": at,
                "updated_at": at,
            }
            return await self._leased(conn, ident.workspace, args, values)

        return await self._transact(ident, args, change)

    async def _reopen(self, ident: Identity, args: UpdateTaskArgs) -> TaskView:
        """Revive a done or failed task (attempts start again), noting why in the progress log."""
        task_key, reason = args.task_key, args.reason

        async def change(conn: Connection, at: float) -> TaskRecord:
            ws = ident.workspace
            deps_done, _blocked = (await store.compute_flags(conn, ws, [task_key]))[task_key]
            row = await store.update_where_status(
                conn,
                ws,
                task_key,
                ("done", "failed"),
                {
                    "status": "pending",
                    "ready": deps_done,
                    "attempts": 0,
                    "owner": None,
                    "lease_token": None,
                    "lease_expires_at": None,
                    "available_at": 0.0,
                    "completed_at": None,
                    "updated_at": at,
                    "last_error": f"reopened: {reason}",
                },
            )
            if row is None:
                await self._explain_not_reopenable(conn, ws, task_key)
            await append_entry(
                conn, ident, summary=f"reopened task {task_key}: {reason}", status="note", task_key=task_key
            )
            return row

        return await self._transact(ident, args, change)

    # -- shared steps -----------------------------------------------------------------------------
    async def _transact(
        self, ident: Identity, args: UpdateTaskArgs, change: Change, *, settles: bool = True
    ) -> TaskView:
        """Run one action's change exactly once. `settles`: the action ends or restarts the task, so its
        dependents' flags are brought up to date and waiting claims are woken."""

        async def body(conn: Connection) -> tuple[TaskRecord, float]:
            at = now()
            row = await change(conn, at)
            if settles and row.dependents:
                await store.propagate(conn, ident.workspace, [args.task_key])
            return row, at

        view = await self.exactly_once(ident, args, TaskView, body, finish=lambda raw: task_view(*raw))
        if settles:
            self._notify()
        return view

    async def _current(self, conn: Connection, ws: str, key: str) -> TaskRecord:
        """The task's row before the change (heartbeat, fail and release derive values from it)."""
        row = await store.get(conn, ws, key)
        if row is None:
            raise NotFound(f"no task with key {key!r} in this workspace")
        return row

    async def _leased(self, conn: Connection, ws: str, args: UpdateTaskArgs, values: dict[str, Any]) -> TaskRecord:
        """Apply `values` if the caller's lease still holds, else say why it does not."""
        row = await store.update_leased(conn, ws, args.task_key, args.lease_token, values)
        if row is None:
            await self._explain_lease_lost(conn, ws, args.task_key, args.action)
        return row

    async def _explain_lease_lost(self, conn: Connection, ws: str, key: str, action: str) -> None:
        row = await store.get(conn, ws, key)
        if row is None:
            raise NotFound(f"no task with key {key!r} in this workspace")
        if row.status == "claimed":
            raise LeaseLost(
                f"cannot {action} task {key!r}: your lease was superseded (the task was claimed again, now by "
                f"agent {row.owner!r} on attempt {row.attempts})"
            )
        why = f" ({row.last_error})" if row.last_error == store.REVOKED_BY_REOPEN else ""
        raise LeaseLost(f"cannot {action} task {key!r}: it is {status_of(row)} now, your lease has ended{why}")

    async def _explain_not_reopenable(self, conn: Connection, ws: str, key: str) -> None:
        row = await store.get(conn, ws, key)
        if row is None:
            raise NotFound(f"no task with key {key!r} in this workspace")
        raise InvalidArgument(f"reopen works on done or failed tasks; task {key!r} is {status_of(row)}")
