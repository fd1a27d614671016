"""Changing a task: one method per action (heartbeat, complete, fail, release need the lease token and are
fenced by it; reopen revives a finished task), behind `update`, the dispatcher the update_task tool calls.
The operator's actions (approve, reject, retry_now, cancel, release without a token) are in `task_review`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..arguments import UpdateTaskArgs
from ..errors import Forbidden, InvalidArgument, LeaseLost, NotFound, TooLarge
from ..jsonvalue import canonical, check_depth, dumps
from ..models import HeartbeatResult, UpdateTaskResult
from ..store import Connection
from ..store import tasks as store
from ..store.common import now
from ..store.records import TaskRecord
from .base import Identity
from .task_events import event, lease_history, logged
from .task_views import lease_of, status_of, task_view
from .task_wait import WaitingClaims

#: one action's change inside the write transaction: (connection, time) -> the updated row
Change = Callable[[Connection, float], Awaitable[TaskRecord]]
Answer = UpdateTaskResult | HeartbeatResult
#: actions for people: the `operator` role only (an operator may also `release` without the lease token)
OPERATOR_ACTIONS = ("approve", "reject", "retry_now", "cancel")
#: what an agent refused a person's action does instead (it is told what to do, not how to gain the role)
AGENT_INSTEAD = {
    "approve": "record_progress asking for review, then claim other work (claim_task says "
    "waiting_on_review while a person decides)",
    "retry_now": "wait out the backoff (claim_task's retry_after) or claim other work",
    "cancel": "record_progress saying why the task is not needed; a person decides",
    "release": "only the lease's holder (with its lease_token) or a person releases it; claim other work",
}
AGENT_INSTEAD["reject"] = AGENT_INSTEAD["approve"]
#: the actions of a lease's holder, fenced by its token
LEASED = ("heartbeat", "complete", "fail", "release")


def in_review(args: UpdateTaskArgs) -> InvalidArgument:
    return InvalidArgument(
        f"task {args.task_key} is in review: a person approves or rejects it; nothing to {args.action}"
    )


class UpdatingTasks(WaitingClaims):
    async def update(self, ident: Identity, args: UpdateTaskArgs | None = None, /, **fields: Any) -> Answer:
        """Check the arguments, then run the action's method (`args`, or its fields as keywords)."""
        args = UpdateTaskArgs.of(args, fields)
        if (
            args.action in LEASED
            and not args.lease_token
            and not (args.action == "release" and ident.role == "operator")
        ):
            raise await self._without_lease(ident, args)
        self._check_update(ident, args)
        canonical(args.fingerprint(), what="arguments")
        run: Callable[[Identity, UpdateTaskArgs], Awaitable[Answer]] = getattr(self, f"_{args.action}")
        return await run(ident, args)

    def _check_update(self, ident: Identity, args: UpdateTaskArgs) -> None:
        """Refuse what the action or the caller's role does not allow: a missing lease token, verification,
        reason or comment, values over the limits."""
        action, operator = args.action, ident.role == "operator"
        if action in OPERATOR_ACTIONS and not operator:
            raise Forbidden(
                f"{action} is a person's decision (the 'operator' role); this connection has the "
                f"{ident.role!r} role. Instead: {AGENT_INSTEAD[action]}"
            )
        if action == "complete" and not (args.verification or "").strip():
            raise InvalidArgument("complete needs verification: say how the result was verified")
        if action in ("reopen", "cancel") and not (args.reason or "").strip():
            raise InvalidArgument(f"{action} needs a reason (it is recorded in the progress log)")
        if action == "reject" and not (args.comment or "").strip():
            raise InvalidArgument("reject needs a comment: what to change (the next claimer reads it)")
        if args.result is not None:
            check_depth(args.result, self.limits.max_depth, what="result")
            if len(canonical(args.result, what="result")) > self.limits.max_value_bytes:
                raise TooLarge(f"result is over the limit of {self.limits.max_value_bytes} bytes")
        for name in ("verification", "error", "reason", "comment"):
            text = getattr(args, name)
            if text is not None and len(text) > self.limits.max_text_chars:
                raise TooLarge(f"{name} is {len(text)} characters, over the limit of {self.limits.max_text_chars}")

    async def _without_lease(self, ident: Identity, args: UpdateTaskArgs) -> InvalidArgument:
        """Why a lease action without its lease_token cannot run: a task in review has no lease to act
        on (a person decides it), any other needs the token claim_task returned."""
        async with self.db.read() as conn:
            row = await self._current(conn, ident.workspace, args.task_key)
        if row.status == "in_review":
            return in_review(args)
        instead = f"; without it, {AGENT_INSTEAD['release']}" if args.action == "release" else ""
        return InvalidArgument(f"{args.action} needs the lease_token that claim_task returned{instead}")

    # -- the actions ------------------------------------------------------------------------------
    async def _heartbeat(self, ident: Identity, args: UpdateTaskArgs) -> Answer:
        """Extend the lease (by lease_seconds, else by the length the claim asked for): answers the lease."""
        seconds = args.lease_seconds

        async def body(conn: Connection) -> tuple[TaskRecord, float]:
            at = now()
            current = await self._current(conn, ident.workspace, args.task_key)
            values = {
                "lease_expires_at": at + (seconds or current.lease_seconds or 900),
                "lease_seconds": seconds or current.lease_seconds,
                "updated_at": at,
            }
            return await self._leased(conn, ident, args, values, None, at), at

        def finish(raw: tuple[TaskRecord, float]) -> HeartbeatResult:
            return HeartbeatResult(lease=lease_of(*raw))

        return await self.exactly_once(ident, args, HeartbeatResult, body, finish=finish)

    async def _complete(self, ident: Identity, args: UpdateTaskArgs) -> Answer:
        """Finish the task with its result and how it was verified; its dependents may become ready. The
        same lease completing again (a retry) answers the task unchanged."""
        result_json = dumps(args.result) if args.result is not None else None
        done_event = event("complete", ident.agent, {"verification": args.verification})

        def done(at: float) -> dict[str, Any]:
            return {
                "status": "done",
                "ready": False,  # finished tasks leave the claim scan
                "result": result_json,
                "verification": args.verification,
                "last_error": None,
                "completed_at": at,
                "lease_expires_at": None,
                "updated_at": at,
            }

        if args.idempotency_key is None:
            # The common case, a task nothing depends on, is one statement (see ClaimingTasks._claim_single).
            at = now()
            async with self.db.single() as conn:
                row = await store.update_leased(
                    conn, ident.workspace, args.task_key, args.lease_token, done(at), done_event, at,
                    leaf_only=True,
                )  # fmt: skip
            if row is not None:
                self._notify(ident.workspace)
                return task_view(row, at, UpdateTaskResult, unblocked=[])

        async def change(conn: Connection, at: float) -> TaskRecord:
            current = await self._current(conn, ident.workspace, args.task_key)
            if current.status in ("done", "in_review") and current.lease_token == args.lease_token:
                return current  # completed by this very lease already: nothing to do
            if current.review:  # a person approves it: it waits in review, its lease ended (its token kept)
                submitted = {**done(at), "status": "in_review", "completed_at": None}
                ev = event("submit", ident.agent, {"verification": args.verification})
                return await self._leased(conn, ident, args, submitted, ev, at)
            return await self._leased(conn, ident, args, done(at), done_event, at)

        return await self._transact(ident, args, change)

    async def _fail(self, ident: Identity, args: UpdateTaskArgs) -> Answer:
        """Give the task up as failed: retried after a backoff while attempts remain (and retry), else failed."""

        async def change(conn: Connection, at: float) -> TaskRecord:
            current = await self._current(conn, ident.workspace, args.task_key)
            gone = {"lease_token": None, "lease_expires_at": None, "last_error": args.error, "updated_at": at}
            if args.retry and current.attempts < current.max_attempts:
                delay = min(
                    self.settings.backoff_cap_seconds,
                    self.settings.backoff_base_seconds * 2 ** max(0, current.attempts - 1),
                )
                values = {**gone, "status": "pending", "owner": None, "available_at": at + delay}
                detail = {"error": args.error, "retry_in": delay}
            else:
                values = {**gone, "status": "failed", "ready": False}
                detail = {"error": args.error}
            ev = event("fail", ident.agent, detail)
            row = await self._leased(conn, ident, args, values, ev, at)
            await logged(conn, ident.workspace, row.key, current.attempts, ev, at, recorded=True)
            return row

        return await self._transact(ident, args, change)

    async def _release(self, ident: Identity, args: UpdateTaskArgs) -> Answer:
        """Hand the task back unfinished, at once claimable, without using up an attempt (an operator
        may do it without the lease token: see `task_review`)."""
        if not args.lease_token:
            return await self._operator_release(ident, args)

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
            return await self._leased(conn, ident, args, values, event("release", ident.agent), at)

        return await self._transact(ident, args, change)

    async def _reopen(self, ident: Identity, args: UpdateTaskArgs) -> Answer:
        """Revive a done, failed or cancelled task (attempts start again; its result and verification are cleared,
        their old values kept in the reopen event), noting why in the progress log."""
        task_key, reason = args.task_key, args.reason

        async def change(conn: Connection, at: float) -> TaskRecord:
            ws = ident.workspace
            before = await self._current(conn, ws, task_key)
            deps_done, _blocked = (await store.compute_flags(conn, ws, [task_key]))[task_key]
            gate = before.kind == "gate"
            row = await store.update_where_status(
                conn,
                ws,
                task_key,
                ("done", "failed", "cancelled"),
                {
                    # a gate whose dependencies are done goes straight back to a person
                    "status": "in_review" if gate and deps_done else "pending",
                    "ready": deps_done and not gate,
                    "attempts": 0,
                    "owner": None,
                    "lease_token": None,
                    "lease_expires_at": None,
                    "available_at": 0.0,
                    "completed_at": None,
                    "result": None,
                    "verification": None,
                    "updated_at": at,  # last_error is kept: the reason is in the event and the log, not an error
                },
            )
            if row is None:
                raise InvalidArgument(
                    f"reopen works on done, failed or cancelled tasks; task {task_key!r} is {status_of(before)}"
                )
            old = {"status": before.status, "result": before.result, "verification": before.verification,
                   "last_error": before.last_error}  # fmt: skip
            ev = event("reopen", ident.agent, {"reason": reason, **{k: v for k, v in old.items() if v is not None}})
            await logged(conn, ws, task_key, before.attempts, ev, at)
            return row

        return await self._transact(ident, args, change)

    # -- shared steps -----------------------------------------------------------------------------
    async def _transact(self, ident: Identity, args: UpdateTaskArgs, change: Change) -> UpdateTaskResult:
        """Run one action's change exactly once; the task's dependents' flags are brought up to date (a
        revoked lease logged) and waiting claims are woken."""
        action, task_key = args.action, args.task_key

        async def body(conn: Connection) -> tuple[TaskRecord, float, store.Settled]:
            at = now()
            row = await change(conn, at)
            settled = store.Settled.nothing()
            if row.dependents:
                settled = await store.propagate(conn, ident.workspace, [task_key], at)
            for lost in settled.revoked:
                ev = event("revoke", ident.agent, {"owner": lost.owner, "dependency": task_key})
                await logged(conn, ident.workspace, lost.key, lost.attempts, ev, at)
            for gate in settled.opened:  # its last dependency settled just now: a person decides
                await logged(conn, ident.workspace, gate, 0, event("submit", ident.agent, {"after": task_key}), at)
            for back in settled.returned:
                ev = event("returned", ident.agent, {"dependency": task_key})
                await logged(conn, ident.workspace, back.key, back.attempts, ev, at)
            return row, at, settled

        def finish(raw: tuple[TaskRecord, float, store.Settled]) -> UpdateTaskResult:
            row, at, settled = raw
            extra: dict[str, Any] = {}
            if action in ("complete", "approve", "cancel"):
                extra["unblocked"] = settled.unblocked
            elif action == "reopen":
                extra["revoked"] = [lost.key for lost in settled.revoked]
            return task_view(row, at, UpdateTaskResult, **extra)

        result = await self.exactly_once(ident, args, UpdateTaskResult, body, finish=finish)
        self._notify(ident.workspace)
        return result

    async def _current(self, conn: Connection, ws: str, key: str) -> TaskRecord:
        """The task's row before the change (heartbeat, fail and release derive values from it)."""
        row = await store.get(conn, ws, key)
        if row is None:
            raise NotFound(f"no task with key {key!r} in this workspace")
        return row

    async def _leased(
        self,
        conn: Connection,
        ident: Identity,
        args: UpdateTaskArgs,
        values: dict[str, Any],
        ev: store.Event | None,
        at: float,
    ) -> TaskRecord:
        """Apply `values` (and record `ev`) if the caller's lease still holds, else say why it does not."""
        row = await store.update_leased(conn, ident.workspace, args.task_key, args.lease_token, values, ev, at)
        if row is None:
            await self._explain_lease_lost(conn, ident.workspace, args)
        return row

    async def _explain_lease_lost(self, conn: Connection, ws: str, args: UpdateTaskArgs) -> None:
        """`lease_lost`, saying what happened to the lease, from the task's events."""
        key, action = args.task_key, args.action
        row = await self._current(conn, ws, key)
        if row.status == "in_review":  # its lease ended when it was submitted
            raise in_review(args)
        now_ = f"it is {status_of(row)} now" + (
            f", held by agent {row.owner!r} (attempt {row.attempts})" if row.status == "claimed" else ""
        )
        ended = lease_history(await store.events(conn, ws, key), args.lease_token)
        if ended is None:
            raise LeaseLost(
                f"cannot {action} task {key!r}: this lease_token never held it ({now_}); "
                "use the lease.token that claim_task returned for this task"
            )
        why = f": {ended}" if ended else ""
        raise LeaseLost(f"cannot {action} task {key!r}: your lease has ended{why}; {now_}")
