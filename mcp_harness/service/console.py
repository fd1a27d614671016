"""What the operator console and the metrics read: the board, one task, the dependency graph, the
timeline, threads and their versions, agents. Read-only; every method takes the viewer's `Identity`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..arguments import RestoreStateArgs
from ..config import check_int, check_name
from ..errors import InvalidArgument, NotFound
from ..models import CheckpointMeta, ProgressEntry, TaskCounts, TaskDetail, TaskEvent
from ..store import changes
from ..store import checkpoints as checkpoint_store
from ..store import console as store
from ..store import tasks as task_store
from ..store.common import now
from ..task_states import BLOCKED
from ..task_states import Status as S
from .base import Identity, ServiceBase, iso
from .checkpoints import CheckpointService
from .jsondiff import Change, diff
from .progress import progress_entry
from .search import search_terms
from .task_events import HARNESS
from .task_views import status_of, task_counts, task_detail, task_event

#: the board's columns, left to right (a status another change adds gets its place here)
BOARD_COLUMNS = tuple(str(s) for s in (S.PENDING, S.CLAIMED, S.IN_REVIEW, BLOCKED, S.FAILED, S.DONE, S.CANCELLED))
PROGRESS_STATUSES = ("done", "in_progress", "blocked", "note")


@dataclass(frozen=True)
class Dependency:
    key: str
    status: str  #: as the board shows it (`blocked` for pending behind a failed dependency)
    owner: str | None = None
    title: str | None = None
    kind: str = "work"  #: `gate`: a person's decision, never claimed
    review: bool = False  #: a person approves it once it is completed

    @property
    def holds_back(self) -> bool:
        """Whether a task that depends on this one still waits for it (done and cancelled hold nothing back)."""
        return self.status not in ("done", "cancelled")


@dataclass(frozen=True)
class Card:
    """A task as the board shows it."""

    key: str
    title: str
    status: str
    priority: int
    owner: str | None
    attempts: int
    max_attempts: int
    lease_expires_at: str | None  #: claimed: when the lease runs out
    lease_expired: bool
    retry_at: str | None  #: pending in a retry backoff: when it becomes claimable
    last_error: str | None
    tags: list[str]
    waits_on: list[Dependency]  #: open dependencies (pending and blocked tasks)
    kind: str = "work"  #: `gate`: a person's decision, never claimed
    review: bool = False  #: a person approves it once it is completed
    cancel_reason: str | None = None  #: cancelled: the reason its latest cancel gave
    paths: tuple[str, ...] = ()  #: the path patterns a claim reserves (held while it is claimed)

    @property
    def ready(self) -> bool:
        """Claimable now (pending, every dependency done, no backoff) or held past its lease."""
        if self.status == "pending":
            return not self.waits_on and self.retry_at is None
        return self.status == "claimed" and self.lease_expired


@dataclass(frozen=True)
class Column:
    status: str
    total: int
    cards: list[Card]


@dataclass(frozen=True)
class Board:
    columns: list[Column]
    counts: TaskCounts
    generated_at: str


@dataclass(frozen=True)
class TaskPage:
    task: TaskDetail  #: with its lease
    depends_on: list[Dependency]
    dependents: list[Dependency]
    progress: list[ProgressEntry]
    more_progress: int | None  #: before_seq for older entries, if there are any
    events: list[TaskEvent] = field(default_factory=list)  #: every transition, oldest first


@dataclass(frozen=True)
class Graph:
    nodes: list[Dependency]  #: in creation order
    edges: list[tuple[str, str]]  #: (task, the task it depends on)
    total: int  #: tasks in the workspace (the graph shows the first `len(nodes)`)


@dataclass(frozen=True)
class Timeline:
    entries: list[ProgressEntry]
    next_before_seq: int | None


@dataclass(frozen=True)
class ThreadSummary:
    name: str
    latest_version: int
    size_bytes: int
    updated_at: str


@dataclass(frozen=True)
class AgentRow:
    agent: str
    last_seen: str | None
    holds: list[Card] = field(default_factory=list)


@dataclass(frozen=True)
class Agents:
    agents: list[AgentRow]
    overdue: list[Card]  #: leases past their time that nobody has taken over yet


@dataclass(frozen=True)
class StateDiff:
    old: CheckpointMeta
    new: CheckpointMeta
    changes: list[Change]
    more: int


class ConsoleService(ServiceBase):
    def __init__(self, *args: Any, checkpoints: CheckpointService, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._checkpoints = checkpoints

    @property
    def changes(self) -> changes.ChangeFeed:
        """The process's change feed: pages wait on it to follow changes made by any process."""
        return changes.feed(self.db)

    async def workspaces(self) -> list[str]:
        async with self.db.read() as conn:
            return await store.workspace_names(conn)

    async def board(self, ident: Identity, *, per_column: int = 100) -> Board:
        check_int("per_column", per_column, 1, 5000)
        at = now()
        async with self.db.read() as conn:
            counts = await task_store.counts(conn, ident.workspace)
            rows = {s: await store.column(conn, ident.workspace, s, per_column) for s in BOARD_COLUMNS}
            waiting = [r.key for s in ("pending", "blocked") for r in rows[s]]
            open_deps = await store.open_dependencies(conn, ident.workspace, waiting)
            reasons = await store.cancel_reasons(conn, ident.workspace, [r.key for r in rows["cancelled"]])
        waits: dict[str, list[Dependency]] = {}
        for d in open_deps:
            waits.setdefault(d.task_key, []).append(Dependency(d.key, status_of(d), d.owner))
        columns = [
            Column(status, counts.get(status, 0),
                   [_card(r, at, waits.get(r.key, []), reasons.get(r.key)) for r in rows[status]])
            for status in BOARD_COLUMNS
        ]  # fmt: skip
        return Board(columns=columns, counts=task_counts(counts), generated_at=iso(at))

    async def task(self, ident: Identity, key: str, *, before_seq: int | None = None, limit: int = 50) -> TaskPage:
        check_name("task_key", key)
        async with self.db.read() as conn:
            row = await task_store.get(conn, ident.workspace, key)
            if row is None:
                raise NotFound(f"no task with key {key!r} in workspace {ident.workspace!r}")
            depends_on = await store.dependencies(conn, ident.workspace, key, reverse=False)
            dependents = await store.dependencies(conn, ident.workspace, key, reverse=True)
            entries = await store.timeline(
                conn, ident.workspace, agent=None, task_key=key, thread=None, status=None, text=None,
                before_seq=before_seq, limit=limit + 1,
            )  # fmt: skip
            events = await task_store.events(conn, ident.workspace, key)
        more = entries[limit - 1].seq if len(entries) > limit else None
        return TaskPage(
            task=task_detail(row, now()),
            depends_on=[_dependency(d) for d in depends_on],
            dependents=[_dependency(d) for d in dependents],
            progress=[progress_entry(r) for r in entries[:limit]],
            more_progress=more,
            events=[task_event(e) for e in events],
        )

    async def graph(self, ident: Identity, *, limit: int = 300) -> Graph:
        check_int("limit", limit, 1, 2000)
        async with self.db.read() as conn:
            nodes, edges = await store.graph(conn, ident.workspace, limit)
            total = await store.count_tasks(conn, ident.workspace)
        return Graph([_dependency(n) for n in nodes], edges, total)

    async def timeline(
        self,
        ident: Identity,
        *,
        agent: str | None = None,
        task_key: str | None = None,
        thread: str | None = None,
        status: str | None = None,
        text: str | None = None,
        before_seq: int | None = None,
        limit: int = 50,
    ) -> Timeline:
        """Progress entries newest first, filtered by agent, task, thread and status, and by a full-text
        query on the summary or details; a page of `limit`, then `next_before_seq` for the next."""
        for kind, name in (("agent", agent), ("task_key", task_key), ("thread", thread)):
            if name is not None:
                check_name(kind, name)
        if status is not None and status not in PROGRESS_STATUSES:
            raise InvalidArgument(f"status must be one of {', '.join(PROGRESS_STATUSES)}, got {status!r}")
        if text is not None and len(text) > 200:
            raise InvalidArgument("search text must be at most 200 characters")
        terms = search_terms(text) if text else None
        check_int("limit", limit, 1, 500)
        async with self.db.read() as conn:
            rows = await store.timeline(
                conn, ident.workspace, agent=agent, task_key=task_key, thread=thread, status=status,
                text=terms, before_seq=before_seq, limit=limit + 1,
            )  # fmt: skip
        more = rows[limit - 1].seq if len(rows) > limit else None
        return Timeline([progress_entry(r) for r in rows[:limit]], more)

    async def threads(self, ident: Identity) -> list[ThreadSummary]:
        async with self.db.read() as conn:
            rows = await checkpoint_store.list_threads(conn, ident.workspace)
        return [ThreadSummary(r.name, r.latest_version, r.size_bytes, iso(r.updated_at)) for r in rows]

    async def state(self, ident: Identity, thread: str, version: int | None) -> tuple[CheckpointMeta, dict[str, Any]]:
        """One version of a thread (the latest without `version`): its metadata and state."""
        check_name("thread", thread)
        async with self.db.read() as conn:
            meta, state, _missing = await self._checkpoints.load(
                conn, ident, RestoreStateArgs.of(None, {"thread": thread, "version": version})
            )
        if meta is None or state is None:
            raise NotFound(f"thread {thread!r} has no checkpoint")
        return meta, state

    async def diff(self, ident: Identity, thread: str, old: int, new: int) -> StateDiff:
        """What changed in a thread's state from version `old` to version `new`."""
        old_meta, old_state = await self.state(ident, thread, old)
        new_meta, new_state = await self.state(ident, thread, new)
        found, more = diff(old_state, new_state)
        return StateDiff(old_meta, new_meta, found, more)

    async def agents(self, ident: Identity) -> Agents:
        at = now()
        async with self.db.read() as conn:
            seen = await store.last_seen(conn, ident.workspace)
            held = await store.claimed(conn, ident.workspace)
        seen.pop(HARNESS, None)  # the harness's own log entries: not an agent of the team
        holds: dict[str, list[Card]] = {}
        overdue = []
        for r in held:
            card = _held_card(r, at)
            holds.setdefault(r.owner, []).append(card)
            if card.lease_expired:
                overdue.append(card)
        names = sorted(set(seen) | set(holds), key=lambda a: (-seen.get(a, 0.0), a))
        rows = [AgentRow(a, iso(seen.get(a)), holds.get(a, [])) for a in names]
        return Agents(rows, overdue)

    async def metrics(self) -> tuple[list[tuple[str, str, int]], list[tuple[str, int]]]:
        """Tasks per (workspace, status) over the database, and leases past their time per workspace."""
        async with self.db.read() as conn:
            rows = await store.counts_by_workspace(conn)
            expired = await store.expired_leases_by_workspace(conn, now())
        counts: dict[tuple[str, str], int] = {}
        for workspace, status, blocked, n in rows:
            shown = "blocked" if status == "pending" and blocked else status
            counts[(workspace, shown)] = counts.get((workspace, shown), 0) + n
        return [(w, s, n) for (w, s), n in sorted(counts.items())], expired


def _dependency(row: Any) -> Dependency:
    return Dependency(row.key, status_of(row), row.owner, row.title, row.kind, bool(row.review))


def _card(row: Any, at: float, waits_on: list[Dependency], cancel_reason: str | None = None) -> Card:
    status = status_of(row)
    claimed = row.status == "claimed"
    backoff = row.status == "pending" and row.available_at > at
    return Card(
        key=row.key,
        title=row.title,
        status=status,
        priority=row.priority,
        owner=row.owner,
        attempts=row.attempts,
        max_attempts=row.max_attempts,
        lease_expires_at=iso(row.lease_expires_at) if claimed else None,
        lease_expired=claimed and row.lease_expires_at is not None and row.lease_expires_at <= at,
        retry_at=iso(row.available_at) if backoff else None,
        last_error=None if row.status == "cancelled" else row.last_error,  # the cancel reason says why
        tags=json.loads(row.tags),
        waits_on=waits_on,
        kind=row.kind,
        review=bool(row.review),
        cancel_reason=cancel_reason,
        paths=tuple(json.loads(row.paths)) if getattr(row, "paths", None) else (),
    )


def _held_card(row: Any, at: float) -> Card:
    return Card(
        key=row.key, title=row.title, status="claimed", priority=0, owner=row.owner,
        attempts=row.attempts, max_attempts=row.max_attempts, lease_expires_at=iso(row.lease_expires_at),
        lease_expired=row.lease_expires_at <= at, retry_at=None, last_error=None, tags=[], waits_on=[],
    )  # fmt: skip
