"""Progress log rules: append-only entries, ordered by a per-workspace `seq`."""

from __future__ import annotations

import json
from typing import Any, cast

from mcp_harness.arguments import RecordProgressArgs
from mcp_harness.base import Identity, ServiceBase, iso, new_id
from mcp_harness.errors import InvalidArgument, LeaseLost, NotFound, TooLarge
from mcp_harness.jsonvalue import canonical, check_depth, dumps
from mcp_harness.models import ProgressEntry, ProgressStatus, RecordProgressResult
from mcp_harness.progress import store
from mcp_harness.search.service import reading, search_terms
from mcp_harness.store import Connection
from mcp_harness.store.common import now
from mcp_harness.store.records import ProgressRow
from mcp_harness.tasks.rules import Status, after_take_over, taken_from
from mcp_harness.tasks.store import tasks as task_store


def progress_entry(row: ProgressRow) -> ProgressEntry:
    return ProgressEntry(
        entry_id=row.entry_id,
        seq=row.seq,
        created_at=iso(row.created_at),
        agent=row.agent,
        thread=row.thread,
        status=cast(ProgressStatus, row.status),  # one of them, as recorded
        summary=row.summary,
        details=row.details,
        next_steps=json.loads(row.next_steps) if row.next_steps else None,
        task_key=row.task_key,
        artifacts=json.loads(row.artifacts) if row.artifacts else None,
    )


async def append_entry(
    conn: Connection,
    ident: Identity,
    *,
    summary: str,
    thread: str = "main",
    status: str = "note",
    details: str | None = None,
    next_steps: list[str] | None = None,
    task_key: str | None = None,
    artifacts: dict[str, Any] | None = None,
    at: float | None = None,
) -> RecordProgressResult:
    """Append inside the caller's transaction (tasks use it to log a reopen atomically); the harness's
    entry about a task event is dated `at`, the event's time (a handoff's `context` pairs them)."""
    created = now() if at is None else at
    row: dict[str, Any] = {
        "entry_id": new_id("pg"),
        "workspace": ident.workspace,
        "thread": thread,
        "agent": ident.agent,
        "status": status,
        "summary": summary,
        "details": details,
        "next_steps": dumps(next_steps) if next_steps is not None else None,
        "task_key": task_key,
        "artifacts": dumps(artifacts) if artifacts is not None else None,
        "created_at": created,
    }
    seq = await store.append(conn, row)
    return RecordProgressResult(entry_id=row["entry_id"], seq=seq, created_at=iso(created))


class ProgressService(ServiceBase):
    async def record(self, ident: Identity, args: RecordProgressArgs) -> RecordProgressResult:
        """Append an entry to the progress log."""
        summary, details, artifacts = args.summary, args.details, args.artifacts
        if not summary.strip():
            raise InvalidArgument("summary must not be empty")
        limit = self.limits.max_text_chars
        for name, text in (("summary", summary), ("details", details)):
            if text is not None and len(text) > limit:
                raise TooLarge(f"{name} is {len(text)} characters, over the limit of {limit}")
        if artifacts is not None:
            check_depth(artifacts, self.limits.max_depth, what="artifacts")
            if len(canonical(artifacts, what="artifacts")) > self.limits.max_value_bytes:
                raise TooLarge(f"artifacts are over the limit of {self.limits.max_value_bytes} bytes")
        entry = args.fingerprint()
        canonical(entry, what="progress entry")  # NaN, lone surrogates: refuse before storing

        async def body(conn: Connection) -> RecordProgressResult:
            warning = await self._check_task(conn, ident, args) if args.task_key is not None else None
            result = await append_entry(conn, ident, **entry)
            return result.model_copy(update={"warning": warning}) if warning else result

        return await self.exactly_once(ident, args, RecordProgressResult, body)

    async def _check_task(self, conn: Connection, ident: Identity, args: RecordProgressArgs) -> str | None:
        """Refuse a task_key that names no task, and an entry about a task by the agent whose lease on it
        was taken over (its successor works on it now); warn when `done` is said of a task the caller still holds
        (a progress entry completes nothing: the lease would run out and the task be retried)."""
        key = args.task_key
        assert key is not None  # the caller checks it
        task = await task_store.get(conn, ident.workspace, key)
        if task is None:
            raise NotFound(
                f"no task with key {key!r} in this workspace: list_tasks shows the keys "
                "(omit task_key for progress about no task)"
            )
        if task.status == Status.CLAIMED and task.owner is not None and task.owner != ident.agent:
            events = await task_store.events(conn, ident.workspace, key)
            said = ((e.kind, e.actor, json.loads(e.detail).get("previous_owner") if e.detail else None) for e in events)
            if taken_from(said, ident.agent):
                raise LeaseLost(
                    f"not recorded: your lease on task {key!r} was taken over by agent {task.owner!r}, who works "
                    "on it now: " + after_take_over(key, task.owner)
                )
        held = task.status == Status.CLAIMED and task.owner == ident.agent and (task.lease_expires_at or 0) > now()
        if args.status == "done" and held:
            return (
                f"task {key!r} is still claimed by you: complete it with update_task(action=complete, "
                "lease_token, verification), or its lease will expire and the task be retried"
            )
        return None

    async def recent(
        self,
        ident: Identity,
        *,
        thread: str | None = None,
        task_key: str | None = None,
        limit: int = 20,
        before_seq: int | None = None,
    ) -> list[ProgressEntry]:
        async with self.db.read() as conn:
            rows = await store.recent(
                conn, ident.workspace, thread=thread, task_key=task_key, limit=limit, before_seq=before_seq
            )
        return [progress_entry(r) for r in rows]

    async def search(self, ident: Identity, query: str, *, limit: int = 20) -> list[ProgressEntry]:
        """The entries that best match a full-text `query` (see `search.py`), best first."""
        if len(query) > 500:
            raise InvalidArgument(f"the search query is {len(query)} characters, over the limit of 500")
        terms = search_terms(query)
        async with reading(self.db, terms) as conn:
            rows = await store.search(conn, ident.workspace, terms, limit=limit)
        return [progress_entry(r) for r in rows]
