"""How a task row is shown: full views, compact rows, held tasks, leases and list cursors."""

from __future__ import annotations

import base64
import json
import math
from typing import Any, TypeVar, cast

from mcp_harness.base import iso
from mcp_harness.errors import InvalidArgument
from mcp_harness.models import (
    FullTaskRow,
    HeldTask,
    Lease,
    TaskContext,
    TaskCounts,
    TaskDetail,
    TaskEvent,
    TaskKind,
    TaskRow,
    TaskView,
    UpdateTaskResult,
)
from mcp_harness.store.records import TaskEventRow, TaskRecord
from mcp_harness.tasks.rules import KEEP, Outcome, ShownStatus, Status, claim_would_take, shown


def task_counts(counts: dict[str, int]) -> TaskCounts:
    """The counts a result shows: every status the result model names (0 when none); a status the
    store counts but the model does not name yet is left to the views that list any status (the
    console board, the metrics) rather than failing the call."""
    return TaskCounts(**{name: counts.get(name, 0) for name in TaskCounts.model_fields})


def status_of(row: TaskRecord) -> ShownStatus:
    return shown(row.status, row.blocked)


def lease_of(row: TaskRecord, at: float) -> Lease | None:
    if row.status != Status.CLAIMED or row.lease_token is None or row.lease_expires_at is None:
        return None
    left = row.lease_expires_at - at
    return Lease(
        token=row.lease_token,
        attempt=row.attempts,
        expires_at=iso(row.lease_expires_at),
        expires_in_seconds=math.floor(left),  # to the second, as timestamps are
        expired=left < 0 or None,
        last_attempt=row.attempts >= row.max_attempts or None,
    )


def lease_now(row: TaskRecord | None, stored: Lease, at: float) -> Lease:
    """A lease answered again (a replay) as it stands now: `live: false` once its token no longer holds
    the task or it has expired, never a dead lease shown as live. One that ended (released, completed,
    taken over...) has no time left: 0 seconds, and an `expires_at` no later than now (it ended by then at
    the latest; the time it was first answered with may still lie ahead, which reads as time left)."""
    if row is not None and row.status == Status.CLAIMED and row.lease_token == stored.token:
        lease = lease_of(row, at)
        if lease is not None:
            return lease.model_copy(update={"live": False}) if lease.expired else lease
    ended = min(stored.expires_at, iso(at))  # ISO 8601 UTC to the second: text order is time order
    return stored.model_copy(update={"live": False, "expires_in_seconds": 0, "expired": None, "expires_at": ended})


V = TypeVar("V", bound=TaskView)


def task_view(row: TaskRecord, at: float, model: type[V], **extra: object) -> V:
    return model(
        key=row.key,
        title=row.title,
        description=row.description,
        steps=json.loads(row.steps),
        priority=row.priority,
        depends_on=json.loads(row.depends_on),
        tags=json.loads(row.tags),
        status=status_of(row),
        owner=row.owner,
        attempts=row.attempts,
        max_attempts=row.max_attempts,
        available_at=iso(row.available_at) if row.status == Status.PENDING and row.available_at > at else None,
        result=json.loads(row.result) if row.result is not None else None,
        verification=row.verification,
        last_error=row.last_error,
        created_at=iso(row.created_at),
        updated_at=iso(row.updated_at),
        completed_at=iso(row.completed_at),
        review=row.review,
        kind=cast(TaskKind, row.kind),  # 'work' or 'gate' when stored
        review_comment=row.review_comment,
        paths=json.loads(row.paths) if row.paths else None,
        **extra,
    )


def _split(held: dict[str, bool] | None) -> tuple[list[str] | None, list[str] | None]:
    """(exclusive, shared) patterns of what a lease holds, None where empty."""
    held = held or {}
    return [p for p, s in held.items() if not s] or None, [p for p, s in held.items() if s] or None


def task_detail(row: TaskRecord, at: float, held: dict[str, bool] | None = None) -> TaskDetail:
    """The task with its lease and the paths its live lease holds (for people: the CLI)."""
    live = row.status == Status.CLAIMED and (row.lease_expires_at or 0) > at
    exclusive, shared = _split(held if live else None)
    return task_view(row, at, TaskDetail, lease=lease_of(row, at), held_paths=exclusive, shared_paths=shared)


def full_row(
    row: TaskRecord, at: float, context: TaskContext | None = None, added_by: str | None = None
) -> FullTaskRow:
    """`list_tasks(task_key=K)`: every field of the task, with its whole `context` and who added it."""
    return task_view(row, at, FullTaskRow, ready=claim_would_take(row, at), context=context, added_by=added_by)


def action_answer(row: TaskRecord, at: float, outcome: Outcome, **extra: Any) -> UpdateTaskResult:
    """An action's compact answer: key and status, what its outcome set (attempts, a backoff), the
    fields it cleared as null, and `extra` (unblocked, revoked)."""
    given: dict[str, Any] = dict.fromkeys(outcome.cleared)
    if outcome.change.attempts is not KEEP:
        given["attempts"] = row.attempts
    if row.status == Status.PENDING and row.available_at > at:
        given["available_at"] = iso(row.available_at)
    return UpdateTaskResult(key=row.key, status=status_of(row), **given, **extra)


def task_event(row: TaskEventRow) -> TaskEvent:
    return TaskEvent(
        kind=row.kind,
        actor=row.actor,
        attempt=row.attempt,
        created_at=iso(row.created_at),
        detail=json.loads(row.detail) if row.detail else None,
    )


def task_row(row: TaskRecord, at: float) -> TaskRow:
    return TaskRow(
        key=row.key,
        title=row.title,
        status=status_of(row),
        ready=claim_would_take(row, at),
        owner=row.owner,
        priority=row.priority,
        attempts=row.attempts,
        depends_on=json.loads(row.depends_on),
        review=row.review,
        kind=cast(TaskKind, row.kind),  # 'work' or 'gate' when stored
        paths=json.loads(row.paths) if row.paths else None,
    )


def held_task(
    row: TaskRecord, at: float, context: TaskContext | None = None, held: dict[str, bool] | None = None
) -> HeldTask:
    live = row.status == Status.CLAIMED and (row.lease_expires_at or 0) > at  # a lease that ran out holds none
    exclusive, shared = _split(held if live else None)
    return HeldTask(
        key=row.key,
        title=row.title,
        description=row.description,
        steps=json.loads(row.steps),
        lease=lease_of(row, at),
        status=status_of(row),
        review_comment=row.review_comment,
        last_error=row.last_error,
        context=context,
        paths=exclusive,
        shared_paths=shared,
    )


def encode_cursor(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"t:{last_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        prefix, value = raw.split(":", 1)
        number = int(value)
        if prefix != "t" or not 0 <= number < 2**63:  # task ids are positive 64-bit integers
            raise ValueError(prefix)
        return number
    except (ValueError, UnicodeDecodeError):
        raise InvalidArgument("cursor is not one that list_tasks returned") from None
