"""Acting on a task: `TaskActions.act`, the one entry point that the update_task tool, the CLI and the console
all call, so a person's approve from a shell and from the page run the same code.

Each action is a row of `tasks.rules.RULES` (who takes it, from which statuses, the change and its event);
this module applies a row: it checks the caller and the arguments, reads the task, refuses what the row
does not allow with a message a person can act on, has the store write the row's `TaskChange` (fenced by
the lease token for the holder's actions, else by the allowed statuses), records the event and the
harness's progress entry, and brings the dependents up to date (`store.propagate`, which settles each by
`tasks.rules.settle`), all in one write transaction, exactly once. Two actions answer differently and
have a handler of their own (`HANDLED`): heartbeat answers the lease, complete of a task nothing depends
on is one statement."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from mcp_harness.arguments import UpdateTaskArgs
from mcp_harness.base import Identity, ServiceBase
from mcp_harness.config import Settings
from mcp_harness.contacts import let_go, riding
from mcp_harness.errors import Forbidden, InvalidArgument, LeaseLost, NotFound, TooLarge
from mcp_harness.jsonvalue import canonical, check_depth, dumps
from mcp_harness.models import HeartbeatResult, UpdateTaskResult
from mcp_harness.store import Connection, Database
from mcp_harness.store.common import now
from mcp_harness.store.records import TaskRecord
from mcp_harness.tasks import reservations as task_paths
from mcp_harness.tasks.events import event, lease_history, logged
from mcp_harness.tasks.rules import (
    RULES,
    UNKNOWN,
    Action,
    ActionInput,
    Outcome,
    Rule,
    Status,
    Who,
    after_take_over,
    completed,
    ran_out_on_last_attempt,
)
from mcp_harness.tasks.store import reservations
from mcp_harness.tasks.store import tasks as store
from mcp_harness.tasks.views import action_answer, lease_now, lease_of, status_of
from mcp_harness.tasks.wait import Wakeup

Answer = UpdateTaskResult | HeartbeatResult
Handler = Callable[[Identity, UpdateTaskArgs, Action], Awaitable[Answer]]


def in_review(args: UpdateTaskArgs) -> InvalidArgument:
    return InvalidArgument(
        f"task {args.task_key} is in review: a person approves or rejects it; nothing to {args.action}"
    )


class TaskActions(ServiceBase):
    """Applies `tasks.rules.RULES` rows to tasks (see the module's docstring)."""

    def __init__(self, db: Database, settings: Settings, wakeup: Wakeup) -> None:
        super().__init__(db, settings)
        self.wakeup = wakeup
        #: the actions with a handler of their own; every other runs `_transact`
        self.handled: dict[Action, Handler] = {
            Action.HEARTBEAT: self._heartbeat,
            Action.COMPLETE: self._complete,
            Action.RESERVE: self._reservations,
            Action.UNRESERVE: self._reservations,
        }

    async def act(self, ident: Identity, args: UpdateTaskArgs) -> Answer:
        """Check the caller and the arguments, then apply the action's row."""
        action = Action(args.action)
        if RULES[action].who is Who.HOLDER and not args.lease_token:
            if action is not Action.RELEASE or ident.role != "operator":
                raise await self._without_lease(ident, args)
            action = Action.OPERATOR_RELEASE  # a person releases a lease without its token
        self._check(ident, args, RULES[action])
        if action in (Action.RESERVE, Action.UNRESERVE):
            args = args.model_copy(update={"paths": task_paths.patterns(args.paths)})
        elif args.paths is not None or args.shared:
            raise InvalidArgument("paths and shared go with the reserve and unreserve actions only")
        canonical(args.fingerprint(), what="arguments")
        return await self.handled.get(action, self._transact)(ident, args, action)

    def _check(self, ident: Identity, args: UpdateTaskArgs, rule: Rule) -> None:
        """Refuse what the caller's role or the arguments do not allow: a person's action from an agent,
        a missing verification, reason or comment, values over the limits."""
        if rule.who is Who.OPERATOR and ident.role != "operator":
            raise Forbidden(
                f"{args.action} is a person's decision (the 'operator' role); this connection has the "
                f"{ident.role!r} role. Instead: {rule.instead}"
            )
        if rule.required and rule.argument and not (getattr(args, rule.argument) or "").strip():
            raise InvalidArgument(rule.blank_refusal(args.action))
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
        if row.status == Status.IN_REVIEW:
            return in_review(args)
        instead = f"; without it, {RULES[Action.RELEASE].instead}" if args.action == Action.RELEASE.value else ""
        return InvalidArgument(f"{args.action} needs the lease_token that claim_task returned{instead}")

    def _given(self, args: UpdateTaskArgs, at: float, ident: Identity | None = None) -> ActionInput:
        return ActionInput(
            process=ident.process if ident is not None else None,
            at=at,
            lease_token=args.lease_token,
            lease_seconds=args.lease_seconds,
            result=dumps(args.result) if args.result is not None else None,
            verification=args.verification,
            error=args.error,
            retry=args.retry,
            reason=args.reason,
            comment=args.comment,
            paths=tuple(args.paths or ()),
            shared=args.shared,
            backoff_base=self.settings.backoff_base_seconds,
            backoff_cap=self.settings.backoff_cap_seconds,
        )

    # -- applying a row ---------------------------------------------------------------------------
    async def _apply(
        self, conn: Connection, ident: Identity, args: UpdateTaskArgs, action: Action, at: float
    ) -> tuple[TaskRecord, Outcome]:
        """Apply the action's row to the task inside the caller's transaction: the updated row and the
        outcome (for the same call again, a retry that changes nothing, the outcome of its first time)."""
        ws, key, rule = ident.workspace, args.task_key, RULES[action]
        before = await self._current(conn, ws, key)
        given = self._given(args, at, ident)
        if rule.repeat is not None and rule.repeat(before, given):
            # the same call again (a retry): nothing to do, and the same answer as the first time
            return before, rule.change(before, given)
        if rule.reads_dependencies:
            given = replace(given, deps_done=(await store.compute_flags(conn, ws, [key]))[key][0])
        if rule.who is not Who.HOLDER and not rule.allows(before, at):
            raise InvalidArgument(rule.refusal.format(key=key, status=status_of(before)))
        if before.status in rule.operator_from and ident.role != "operator":
            raise Forbidden(
                f"{args.action} of a {before.status} task is a person's decision (the 'operator' role); this "
                f"connection has the {ident.role!r} role. Instead: {rule.operator_instead.format(key=key)}"
            )
        outcome = rule.change(before, given)
        ev = event(outcome.event, ident.agent, outcome.detail) if outcome.event else None
        if rule.who is Who.HOLDER:  # fenced by the lease token; the store records the event with the change
            row = await store.update_leased(conn, ws, key, args.lease_token or "", outcome.change, ev, at)
            if row is None:
                raise await self._lease_lost(conn, ws, args, ident.agent)
        else:
            row = await store.update_where_status(conn, ws, key, rule.allowed, outcome.change)
            if row is None:  # changed since it was read
                raise InvalidArgument(
                    rule.refusal.format(key=key, status=status_of(await self._current(conn, ws, key)))
                )
        if ev is not None:
            await logged(conn, ws, key, before.attempts, ev, at, recorded=rule.who is Who.HOLDER)
        return row, outcome

    async def _transact(self, ident: Identity, args: UpdateTaskArgs, action: Action) -> UpdateTaskResult:
        """Apply the row exactly once; the task's dependents are settled (a revoked lease, a gate that
        enters or leaves review logged) and waiting claims are woken."""
        task_key, reports = args.task_key, RULES[action].reports

        async def body(conn: Connection) -> tuple[TaskRecord, Outcome, float, store.Settled]:
            at = now()
            row, outcome = await self._apply(conn, ident, args, action, at)
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
            return row, outcome, at, settled

        def finish(raw: tuple[TaskRecord, Outcome, float, store.Settled]) -> UpdateTaskResult:
            row, outcome, at, settled = raw
            extra: dict[str, Any] = {}
            if reports == "unblocked":
                extra["unblocked"] = settled.unblocked
            elif reports == "revoked":
                extra["revoked"] = [lost.key for lost in settled.revoked]
            return action_answer(row, at, outcome, **extra)

        async def replay(conn: Connection, stored: UpdateTaskResult) -> UpdateTaskResult:
            """A replay shows the task's status now (its answer may be long out of date)."""
            row = await store.get(conn, ident.workspace, task_key)
            return stored if row is None else stored.model_copy(update={"status": status_of(row)})

        result = await self.exactly_once(ident, args, UpdateTaskResult, body, finish=finish, replay=replay)
        self.wakeup.notify(ident.workspace)
        return result

    # -- the handlers -----------------------------------------------------------------------------
    async def _heartbeat(self, ident: Identity, args: UpdateTaskArgs, action: Action) -> HeartbeatResult:
        """Answers the extended lease; nothing else changes, so no dependent is settled and no claim woken."""

        async def body(conn: Connection) -> tuple[TaskRecord, float]:
            at = now()
            before = await self._current(conn, ident.workspace, args.task_key)
            # a lease that ran out comes back with its paths only where they are still free
            await task_paths.check_revival(conn, ident.workspace, ident.agent, before, args.lease_token or "", at)
            row, _outcome = await self._apply(conn, ident, args, action, at)
            return row, at

        def finish(raw: tuple[TaskRecord, float]) -> HeartbeatResult:
            lease = lease_of(*raw)
            assert lease is not None  # a heartbeat leaves the task claimed under this token
            return HeartbeatResult(lease=lease)

        async def replay(conn: Connection, stored: HeartbeatResult) -> HeartbeatResult:
            """A replay shows the lease as it stands now: `live: false` once it no longer holds the task."""
            row = await store.get(conn, ident.workspace, args.task_key)
            return stored.model_copy(update={"lease": lease_now(row, stored.lease, now())})

        return await self.exactly_once(ident, args, HeartbeatResult, body, finish=finish, replay=replay)

    async def _reservations(self, ident: Identity, args: UpdateTaskArgs, action: Action) -> UpdateTaskResult:
        """reserve / unreserve: the lease's path reservations change under the reservations' lock (see
        `tasks/reservations.py`); the answer says what the lease holds now."""
        reserve = action is Action.RESERVE

        async def body(conn: Connection) -> tuple[TaskRecord, Outcome, float, dict[str, bool]]:
            at = now()
            await reservations.lock(conn, ident.workspace)
            row, outcome = await self._apply(conn, ident, args, action, at)
            held = await task_paths.change(
                conn,
                ident.workspace,
                ident.agent,
                row,
                args.lease_token or "",
                list(args.paths or []),
                reserve=reserve,
                shared=args.shared,
                at=at,
            )
            return row, outcome, at, held

        def finish(raw: tuple[TaskRecord, Outcome, float, dict[str, bool]]) -> UpdateTaskResult:
            row, outcome, at, held = raw
            exclusive = sorted(p for p, shared in held.items() if not shared)
            shared = sorted(p for p, shared in held.items() if shared)
            return action_answer(row, at, outcome, held_paths=exclusive, shared_paths=shared)

        return await self.exactly_once(ident, args, UpdateTaskResult, body, finish=finish)

    async def _complete(self, ident: Identity, args: UpdateTaskArgs, action: Action) -> UpdateTaskResult:
        """The common case, a task nothing depends on and not for review, is one statement (see
        `TaskClaimer._claim_single`); any other takes the transaction of `_transact`."""
        if args.idempotency_key is None:
            at = now()
            outcome = completed(self._given(args, at))
            ev = event("complete", ident.agent, outcome.detail)
            with riding(ident, let_go("complete", args.task_key)) as ride:  # the contact row, in the statement
                async with self.db.single() as conn:
                    row = await store.update_leased(
                        conn,
                        ident.workspace,
                        args.task_key,
                        args.lease_token or "",
                        outcome.change,
                        ev,
                        at,
                        leaf_only=True,
                        contact=ride.contact,
                    )
                ride.done = row is not None
            if row is not None:
                self.wakeup.notify(ident.workspace)
                return action_answer(row, at, outcome, unblocked=[])
        return await self._transact(ident, args, action)

    # -- shared steps -----------------------------------------------------------------------------
    async def _current(self, conn: Connection, ws: str, key: str) -> TaskRecord:
        """The task's row before the change."""
        row = await store.get(conn, ws, key)
        if row is None:
            raise NotFound(f"no task with key {key!r} in this workspace{UNKNOWN}")
        return row

    async def _lease_lost(
        self, conn: Connection, ws: str, args: UpdateTaskArgs, agent: str
    ) -> InvalidArgument | LeaseLost:
        """`lease_lost`, saying what happened to the lease, from the task's events; when another agent
        holds the task now, what to do with the work done under the lost lease."""
        key, action = args.task_key, args.action
        row = await self._current(conn, ws, key)
        if row.status == Status.IN_REVIEW:  # its lease ended when it was submitted
            return in_review(args)
        now_ = f"it is {status_of(row)} now" + (
            f", held by agent {row.owner!r} (attempt {row.attempts})" if row.status == Status.CLAIMED else ""
        )
        ended = lease_history(await store.events(conn, ws, key), args.lease_token or "")
        if ended is None:
            return LeaseLost(
                f"cannot {action} task {key!r}: this lease_token never held it ({now_}); "
                "use the lease.token that claim_task returned for this task"
            )
        why = f": {ended}" if ended else ""
        way_out = ""
        if row.status == Status.FAILED and ran_out_on_last_attempt(row.last_error):
            way_out = (
                f". If the work is finished: update_task(task_key={key!r}, action='reopen', reason=...), then "
                f"claim_task(task_key={key!r}), then complete with the new lease_token"
            )
        elif row.status == Status.CLAIMED and row.owner is not None and row.owner != agent:
            way_out = ": " + after_take_over(key, row.owner)
        elif row.status == Status.PENDING:
            way_out = f": claim_task(task_key={key!r}) takes it again when it is claimable (or says what it waits on)"
        return LeaseLost(f"cannot {action} task {key!r}: your lease has ended{why}; {now_}{way_out}")
