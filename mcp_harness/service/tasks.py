"""Task rules: dependencies, atomic claims, fenced leases, retries with backoff, long-poll waits."""

from __future__ import annotations

import secrets
from typing import Any, Literal

import anyio
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from ..config import LEASE_SECONDS, check_int, check_name
from ..errors import InvalidArgument, LeaseLost, NotFound, TaskConflict, TooLarge
from ..jsonvalue import canonical, check_depth, dumps, value_hash
from ..models import (
    AddTasksResult,
    ClaimTaskResult,
    HeldTask,
    ListTasksResult,
    TaskCounts,
    TaskSpec,
    TaskView,
)
from ..store import changes
from ..store import tasks as store
from ..store.common import now
from .base import Identity, ServiceBase
from .progress import append_entry
from .task_graph import topological_order
from .task_views import decode_cursor, encode_cursor, held_task, status_of, task_row, task_view

Action = Literal["heartbeat", "complete", "fail", "release", "reopen"]


#: adding this many tasks (through this process, since the last time) refreshes planner statistics
STATISTICS_BATCH = 50


async def _take(
    conn: AsyncConnection, ident: Identity, at: float, lease_seconds: int, tags: list[str] | None, task_key: str | None
) -> RowMapping | None:
    """The claim statement with a new lease token: the claimed row, or None."""
    return await store.claim(
        conn, ident.workspace, agent=ident.agent, token=secrets.token_urlsafe(18), now=at,
        lease_seconds=lease_seconds, tags=tags, task_key=task_key,
    )  # fmt: skip


class TaskService(ServiceBase):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._changed = anyio.Event()  # wakes this process's waiting claims at once
        self._added_since_statistics = 0

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    # -- add -------------------------------------------------------------------------------------
    async def add(
        self, ident: Identity, *, tasks: list[TaskSpec], idempotency_key: str | None = None
    ) -> AddTasksResult:
        if not tasks:
            raise InvalidArgument("tasks must hold at least one task")
        if len(tasks) > self.limits.max_tasks_per_call:
            raise InvalidArgument(f"at most {self.limits.max_tasks_per_call} tasks per call, got {len(tasks)}")
        specs = {}
        for spec in tasks:
            if spec.key in specs:
                raise InvalidArgument(f"task key {spec.key!r} appears twice in this call")
            if spec.description is not None and len(spec.description) > self.limits.max_text_chars:
                raise TooLarge(
                    f"task {spec.key!r}: description is {len(spec.description)} characters, "
                    f"over the limit of {self.limits.max_text_chars}"
                )
            specs[spec.key] = spec
        hashes = {k: value_hash(canonical(s.model_dump(mode="json"), what=f"task {k!r}")) for k, s in specs.items()}
        args = {"tasks": [s.model_dump(mode="json") for s in tasks]}

        async def body(conn: AsyncConnection) -> AddTasksResult:
            wanted = list(specs) + [d for s in specs.values() for d in s.depends_on]
            existing = await store.get_many(conn, ident.workspace, wanted)
            unchanged, new = [], {}
            for key, spec in specs.items():
                if key in existing:
                    if existing[key]["content_hash"] != hashes[key]:
                        raise TaskConflict(
                            f"task {key!r} already exists with different content; tasks are never edited: "
                            "use a new key (or reopen the existing task)"
                        )
                    unchanged.append(key)
                else:
                    new[key] = spec
            order = topological_order(new, existing)
            at = now()
            flags: dict[str, tuple[bool, bool]] = {}
            rows = []
            for key in order:
                spec = new[key]
                ready, blocked = True, False
                for dep in spec.depends_on:
                    if dep in new:
                        status, dep_blocked = "pending", flags[dep][1]
                    else:
                        status, dep_blocked = existing[dep]["status"], bool(existing[dep]["blocked"])
                    ready = ready and status == "done"
                    blocked = blocked or status == "failed" or dep_blocked
                flags[key] = (ready, blocked)
                rows.append(
                    {
                        "workspace": ident.workspace,
                        "key": key,
                        "title": spec.title,
                        "description": spec.description,
                        "steps": dumps(spec.steps),
                        "priority": spec.priority,
                        "depends_on": dumps(spec.depends_on),
                        "tags": dumps(spec.tags),
                        "max_attempts": spec.max_attempts,
                        "content_hash": hashes[key],
                        "status": "pending",
                        "ready": ready,
                        "blocked": blocked,
                        "available_at": 0.0,
                        "created_at": at,
                        "updated_at": at,
                        "_deps": list(dict.fromkeys(spec.depends_on)),
                        "_tags": list(dict.fromkeys(spec.tags)),
                    }
                )
            fan_in: dict[str, int] = {}
            for row in rows:
                for dep in row["_deps"]:
                    fan_in[dep] = fan_in.get(dep, 0) + 1
            for row in rows:
                row["dependents"] = fan_in.pop(row["key"], 0)
            await store.add_dependents(conn, ident.workspace, fan_in)  # what is left names existing tasks
            # Insert in the caller's order so creation order (and claim age) follows the list given.
            position = {k: i for i, k in enumerate(specs)}
            rows.sort(key=lambda r: position[r["key"]])
            await store.insert(conn, ident.workspace, rows)
            return AddTasksResult(created=[k for k in specs if k in new], unchanged=unchanged)

        result = await self.exactly_once(ident, "add_tasks", idempotency_key, args, AddTasksResult, body)
        if result.created:
            self._notify()
        self._added_since_statistics += len(result.created)
        if self._added_since_statistics >= STATISTICS_BATCH:
            # many new tasks change what the planner should expect of a claim (see refresh_statistics)
            self._added_since_statistics = 0
            async with self.db.single() as conn:
                await store.refresh_statistics(conn)
        return result

    # -- claim -----------------------------------------------------------------------------------
    async def claim(
        self,
        ident: Identity,
        *,
        lease_seconds: int = 900,
        tags: list[str] | None = None,
        task_key: str | None = None,
        wait_seconds: float = 0,
        idempotency_key: str | None = None,
    ) -> ClaimTaskResult:
        check_int("lease_seconds", lease_seconds, *LEASE_SECONDS)
        check_int("wait_seconds", wait_seconds, 0, 60)
        if task_key is not None:
            check_name("task_key", task_key)
        args = {"lease_seconds": lease_seconds, "tags": tags, "task_key": task_key, "wait_seconds": wait_seconds}
        deadline = anyio.current_time() + wait_seconds

        async def body(conn: AsyncConnection) -> tuple[RowMapping, float] | ClaimTaskResult:
            return await self._claim_once(conn, ident, lease_seconds, tags, task_key)

        def finish(raw: tuple[RowMapping, float] | ClaimTaskResult) -> ClaimTaskResult:
            if isinstance(raw, ClaimTaskResult):
                return raw
            view = task_view(*raw)
            return ClaimTaskResult(task=view, lease=view.lease)

        while True:
            if idempotency_key is None:
                taken = await self._claim_single(ident, lease_seconds, tags, task_key)
                if taken is not None:
                    return taken
            result = await self.exactly_once(
                ident,
                "claim_task",
                idempotency_key,
                args,
                ClaimTaskResult,
                body,
                finish=finish,
                remember=lambda r: r.task is not None,
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
        if tags:
            return None  # the tag filter expands to a list per call: not a statement single() runs
        at = now()
        async with self.db.single() as conn:
            row = await _take(conn, ident, at, lease_seconds, tags, task_key)
        if row is None:
            return None
        view = task_view(row, at)
        return ClaimTaskResult(task=view, lease=view.lease)

    async def _claim_once(
        self,
        conn: AsyncConnection,
        ident: Identity,
        lease_seconds: int,
        tags: list[str] | None,
        task_key: str | None,
    ) -> tuple[RowMapping, float] | ClaimTaskResult:
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
        retry_after = round(facts["next_available_at"] - at, 3) if facts["next_available_at"] else None
        if facts["waiting_on_deps"]:
            reason = "blocked_by_dependencies"
        elif facts["claimed"]:
            reason = "all_claimed"
        elif facts["total"] and facts["finished"] == facts["total"]:
            reason = "all_done"
        else:
            reason = "none_pending"
        return ClaimTaskResult(task=None, lease=None, reason=reason, retry_after=retry_after)

    async def _wait_for_work(
        self, ident: Identity, tags: list[str] | None, task_key: str | None, remaining: float
    ) -> None:
        """Sleep until a claim may succeed: woken at once by this process's own changes; by the change
        feed (a commit by any process) once a cheap read-only check finds a claimable task; and by that
        check every poll interval (the clock alone makes work claimable: a lease running out, a backoff
        ending). No shared counter is written for this, so completes never contend on a hot row."""

        async def claimable() -> bool:
            async with self.db.read() as conn:
                return await store.claimable_exists(conn, ident.workspace, now=now(), tags=tags, task_key=task_key)

        await changes.feed(self.db).wait_until(
            claimable, remaining, recheck=self.settings.poll_interval_seconds, local=self._changed
        )

    # -- update ----------------------------------------------------------------------------------
    async def update(
        self,
        ident: Identity,
        *,
        task_key: str,
        action: Action,
        lease_token: str | None = None,
        lease_seconds: int | None = None,
        result: Any = None,
        verification: str | None = None,
        error: str | None = None,
        retry: bool = True,
        reason: str | None = None,
        idempotency_key: str | None = None,
    ) -> TaskView:
        check_name("task_key", task_key)
        if action != "reopen" and not lease_token:
            raise InvalidArgument(f"{action} needs the lease_token that claim_task returned")
        if action == "complete" and not (verification or "").strip():
            raise InvalidArgument("complete needs verification: say how the result was verified")
        if action == "reopen" and not (reason or "").strip():
            raise InvalidArgument("reopen needs a reason (it is recorded in the progress log)")
        check_int("lease_seconds", lease_seconds, *LEASE_SECONDS)
        result_json = None
        if result is not None:
            check_depth(result, self.limits.max_depth, what="result")
            if len(canonical(result, what="result")) > self.limits.max_value_bytes:
                raise TooLarge(f"result is over the limit of {self.limits.max_value_bytes} bytes")
            result_json = dumps(result)
        for name, text in (("verification", verification), ("error", error), ("reason", reason)):
            if text is not None and len(text) > self.limits.max_text_chars:
                raise TooLarge(f"{name} is {len(text)} characters, over the limit of {self.limits.max_text_chars}")
        args = {
            "task_key": task_key,
            "action": action,
            "lease_token": lease_token,
            "lease_seconds": lease_seconds,
            "result": result,
            "verification": verification,
            "error": error,
            "retry": retry,
            "reason": reason,
        }
        canonical(args, what="arguments")
        if action == "complete" and idempotency_key is None:
            # The common case, a task nothing depends on, is one statement (see _claim_single).
            at = now()
            done = self._leased_values(action, at, lease_seconds, result_json, verification, error, retry)(None)
            async with self.db.single() as conn:
                row = await store.update_leased(conn, ident.workspace, task_key, lease_token, done, leaf_only=True)
            if row is not None:
                self._notify()
                return task_view(row, at)

        async def body(conn: AsyncConnection) -> tuple[RowMapping, float]:
            at = now()
            ws = ident.workspace
            if action == "reopen":
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
            else:
                # complete needs nothing from the current row; the others derive values from it
                current = None if action == "complete" else await store.get(conn, ws, task_key)
                if current is None and action != "complete":
                    raise NotFound(f"no task with key {task_key!r} in this workspace")
                values = self._leased_values(action, at, lease_seconds, result_json, verification, error, retry)
                row = await store.update_leased(conn, ws, task_key, lease_token, values(current))
                if row is None:
                    await self._explain_lease_lost(conn, ws, task_key, action)
            if action != "heartbeat" and row["dependents"]:
                await store.propagate(conn, ws, [task_key])
            return row, at

        view = await self.exactly_once(
            ident, "update_task", idempotency_key, args, TaskView, body, finish=lambda raw: task_view(*raw)
        )
        if action != "heartbeat":
            self._notify()
        return view

    def _leased_values(
        self,
        action: str,
        at: float,
        lease_seconds: int | None,
        result_json: str | None,
        verification: str | None,
        error: str | None,
        retry: bool,
    ):
        def values(row: RowMapping | None) -> dict[str, Any]:
            if action == "heartbeat":
                return {
                    "lease_expires_at": at + (lease_seconds or row["lease_seconds"] or 900),
                    "lease_seconds": lease_seconds or row["lease_seconds"],
                    "updated_at": at,
                }
            if action == "complete":
                return {
                    "status": "done",
                    "ready": False,  # finished tasks leave the claim scan
                    "result": result_json,
                    "verification": verification,
                    "completed_at": at,
                    "lease_expires_at": None,
                    "updated_at": at,
                }
            if action == "release":
                return {
                    "status": "pending",
                    "owner": None,
                    "lease_token": None,
                    "lease_expires_at": None,
                    "attempts": max(0, row["attempts"] - 1),
                    "available_at": at,
                    "updated_at": at,
                }
            # fail
            if retry and row["attempts"] < row["max_attempts"]:
                delay = min(
                    self.settings.backoff_cap_seconds,
                    self.settings.backoff_base_seconds * 2 ** max(0, row["attempts"] - 1),
                )
                return {
                    "status": "pending",
                    "owner": None,
                    "lease_token": None,
                    "lease_expires_at": None,
                    "available_at": at + delay,
                    "last_error": error,
                    "updated_at": at,
                }
            return {
                "status": "failed",
                "ready": False,
                "lease_token": None,
                "lease_expires_at": None,
                "last_error": error,
                "updated_at": at,
            }

        return values

    async def _explain_lease_lost(self, conn: AsyncConnection, ws: str, key: str, action: str) -> None:
        row = await store.get(conn, ws, key)
        if row is None:
            raise NotFound(f"no task with key {key!r} in this workspace")
        if row["status"] == "claimed":
            raise LeaseLost(
                f"cannot {action} task {key!r}: your lease was superseded (the task was claimed again, now by "
                f"agent {row['owner']!r} on attempt {row['attempts']})"
            )
        why = f" ({row['last_error']})" if row["last_error"] == store.REVOKED_BY_REOPEN else ""
        raise LeaseLost(f"cannot {action} task {key!r}: it is {status_of(row)} now, your lease has ended{why}")

    async def _explain_not_reopenable(self, conn: AsyncConnection, ws: str, key: str) -> None:
        row = await store.get(conn, ws, key)
        if row is None:
            raise NotFound(f"no task with key {key!r} in this workspace")
        raise InvalidArgument(f"reopen works on done or failed tasks; task {key!r} is {status_of(row)}")

    # -- read ------------------------------------------------------------------------------------
    async def list(
        self,
        ident: Identity,
        *,
        status: list[str] | None = None,
        tag: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> ListTasksResult:
        check_int("limit", limit, 1, 500)
        after = decode_cursor(cursor) if cursor else 0
        async with self.db.read() as conn:
            rows = await store.page(conn, ident.workspace, statuses=status, tag=tag, limit=limit + 1, after_id=after)
            counts = await store.counts(conn, ident.workspace)
        more = len(rows) > limit
        rows = rows[:limit]
        return ListTasksResult(
            tasks=[task_row(r) for r in rows],
            counts=TaskCounts(**counts),
            next_cursor=encode_cursor(rows[-1]["id"]) if more else None,
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
                after = rows[-1]["id"]
            counts = await store.counts(conn, ident.workspace)
        return out, TaskCounts(**counts)

    async def brief(self, conn: AsyncConnection, ident: Identity) -> tuple[list[HeldTask], TaskCounts]:
        """This agent's held tasks and the workspace counts, inside the caller's read."""
        at = now()
        held = [held_task(r, at) for r in await store.held_by(conn, ident.workspace, ident.agent)]
        return held, TaskCounts(**await store.counts(conn, ident.workspace))
