"""The console's task views: the board's columns and cards, one task's page, the dependency graph, the
task table, and what holds a task back (the root of its wait, who holds it, whether they went silent)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mcp_harness.base import Identity, ServiceBase, iso
from mcp_harness.config import check_int, check_name
from mcp_harness.errors import InvalidArgument, NotFound
from mcp_harness.models import ProgressEntry, TaskCounts, TaskDetail, TaskEvent
from mcp_harness.oversight.store import paths as console_paths
from mcp_harness.oversight.store import reads as store
from mcp_harness.progress.service import progress_entry
from mcp_harness.sessions import alive
from mcp_harness.store.common import now
from mcp_harness.tasks.rules import BLOCKED, BOARD_ORDER, SETTLED
from mcp_harness.tasks.rules import Status as S
from mcp_harness.tasks.store import reservations
from mcp_harness.tasks.store import tasks as task_store
from mcp_harness.tasks.views import status_of, task_counts, task_detail, task_event

WAITS_SHOWN = 4  #: dependencies a board card names (then "and N more"): a card stays small at any plan size
DEPS_PAGE = 100  #: dependencies and dependents a task page lists at a time
EVENTS_PAGE = 100  #: task events a task page shows at a time
HELD_SHOWN = 500  #: held tasks the agents page lists
AGENTS_SHOWN = 500  #: agents the agents page lists (the ones heard from last)
ROOT_STEPS = 50  #: dependencies followed up from a task to the root of what holds it back
GRAPH_EDGES = 3000  #: edges the graph draws at most


async def silent_holders(conn: Any, workspace: str, at: float, after: float | None) -> list[Any]:
    """The running leases whose holder is silent: its process is gone (a stdio server's, on this
    machine), or it has made no call for more than half the lease (`after` seconds when set: the
    console's setting), so a working agent that thinks for a few minutes between calls is not accused."""
    quiet = at - after if after is not None else None
    rows = await store.silent_holders(conn, workspace, at, quiet, HELD_SHOWN)
    return [r for r in rows if r.quiet or alive(r.lease_process) is False]


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
        return self.status not in SETTLED


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
    waits_on: list[Dependency]  #: open dependencies (pending and blocked tasks), the first `WAITS_SHOWN`
    kind: str = "work"  #: `gate`: a person's decision, never claimed
    review: bool = False  #: a person approves it once it is completed
    cancel_reason: str | None = None  #: cancelled: the reason its latest cancel gave
    paths: tuple[str, ...] = ()  #: the path patterns a claim reserves (declared with the task)
    #: claimed: what its live lease holds now, (pattern, shared), exclusive ones first (reserve/unreserve
    #: change it after the claim); empty once the lease has run out
    held: tuple[tuple[str, bool], ...] = ()
    waits_on_total: int = 0  #: open dependencies in all (a card shows `waits_on`, "and N more")
    silent_since: str | None = None  #: claimed: its holder's last contact, when that is long ago

    @property
    def ready(self) -> bool:
        """Claimable now (pending, every dependency done, no backoff) or held past its lease."""
        if self.status == S.PENDING:
            return not self.waits_on and self.retry_at is None
        return self.status == S.CLAIMED and self.lease_expired


@dataclass(frozen=True)
class Column:
    status: str
    total: int
    cards: list[Card]
    offset: int = 0  #: the column's place of its first card (a column paged on its own)


@dataclass(frozen=True)
class Board:
    columns: list[Column]
    counts: TaskCounts
    generated_at: str


@dataclass(frozen=True)
class TaskPage:
    task: TaskDetail  #: with its lease
    depends_on: list[Dependency]  #: a page of them, from `depends_on_offset`
    dependents: list[Dependency]  #: a page of them, from `dependents_offset`
    progress: list[ProgressEntry]
    more_progress: int | None  #: before_seq for older entries, if there are any
    events: list[TaskEvent] = field(default_factory=list)  #: the newest transitions (a page), oldest first
    more_events: int | None = None  #: before this event id for older events, if there are any
    depends_on_total: int = 0
    dependents_total: int = 0
    depends_on_offset: int = 0
    dependents_offset: int = 0


@dataclass(frozen=True)
class Graph:
    nodes: list[Dependency]  #: in creation order
    edges: list[tuple[str, str]]  #: (task, the task it depends on)
    total: int  #: tasks in the workspace (the graph shows the first `len(nodes)`)


@dataclass(frozen=True)
class TableRow:
    key: str
    title: str
    status: str
    owner: str | None
    priority: int
    tags: list[str]
    attempts: int
    max_attempts: int
    updated_at: str
    kind: str
    review: bool


@dataclass(frozen=True)
class TaskTable:
    rows: list[TableRow]
    total: int  #: tasks that match the filters
    offset: int
    limit: int


@dataclass(frozen=True)
class Holder:
    """Who holds a claimed task, and whether they went quiet (the root of a wait a person can release)."""

    owner: str
    silent_for: float | None  #: seconds since its last call (or heartbeat), when that is `silent_after` or more
    lease_expired: bool

    @property
    def gone(self) -> bool:
        """Worth releasing: quiet for a while, or past its lease."""
        return self.silent_for is not None or self.lease_expired


class TaskReads(ServiceBase):
    """The task views (a part of `ConsoleService`)."""

    async def board(self, ident: Identity, *, per_column: int = 50, only: str | None = None, offset: int = 0) -> Board:
        """Every column's first `per_column` cards; or, `only`, that column's cards from `offset`."""
        check_int("per_column", per_column, 1, 500)
        check_int("offset", offset, 0)
        if only is not None and only not in BOARD_ORDER:
            raise InvalidArgument(f"column must be one of {', '.join(BOARD_ORDER)}, got {only!r}")
        shown = (only,) if only else BOARD_ORDER
        at = now()
        async with self.db.page_read() as conn:
            counts = await task_store.counts(conn, ident.workspace)
            rows = {s: await store.column(conn, ident.workspace, s, per_column, offset if only else 0) for s in shown}
            waiting = [r.key for s in (S.PENDING, BLOCKED) for r in rows.get(s, [])]
            open_deps = await store.open_dependencies(conn, ident.workspace, waiting, WAITS_SHOWN)
            cancelled = [r.key for r in rows.get(S.CANCELLED, [])]
            reasons = await store.cancel_reasons(conn, ident.workspace, cancelled)
            silent = {
                r.key: r for r in await silent_holders(conn, ident.workspace, at, self.settings.silent_after_seconds)
            }
            held = await console_paths.held_by_tasks(conn, ident.workspace, [r.id for r in rows.get(S.CLAIMED, [])], at)
        waits: dict[str, list[Dependency]] = {}
        totals: dict[str, int] = {}
        for d in open_deps:
            waits.setdefault(d.task_key, []).append(Dependency(d.key, status_of(d), d.owner))
            totals[d.task_key] = int(d.n)
        columns = [
            Column(
                status,
                counts.get(status, 0),
                [
                    _card(
                        r,
                        at,
                        waits.get(r.key, []),
                        reasons.get(r.key),
                        totals.get(r.key, 0),
                        silent.get(r.key),
                        held.get(r.key),
                    )
                    for r in rows[status]
                ],
                offset if only else 0,
            )
            for status in shown
        ]
        return Board(columns=columns, counts=task_counts(counts), generated_at=iso(at))

    async def task(
        self,
        ident: Identity,
        key: str,
        *,
        before_seq: int | None = None,
        limit: int = 50,
        before_event: int | None = None,
        deps_offset: int = 0,
        needed_offset: int = 0,
    ) -> TaskPage:
        """One task with a page of each list: its progress (`before_seq`), its events (`before_event`), what
        it depends on (`deps_offset`) and what depends on it (`needed_offset`)."""
        check_name("task_key", key)
        check_int("offset", deps_offset, 0)
        check_int("offset", needed_offset, 0)
        ws = ident.workspace
        async with self.db.page_read() as conn:
            row = await task_store.get(conn, ws, key)
            if row is None:
                raise NotFound(f"no task with key {key!r} in workspace {ws!r}")
            depends_on, deps_total = await store.dependencies(
                conn, ws, key, reverse=False, limit=DEPS_PAGE, offset=deps_offset
            )
            dependents, needed_total = await store.dependencies(
                conn, ws, key, reverse=True, limit=DEPS_PAGE, offset=needed_offset
            )
            entries = await store.timeline(
                conn,
                ws,
                agent=None,
                task_key=key,
                thread=None,
                status=None,
                text=None,
                before_seq=before_seq,
                limit=limit + 1,
            )
            events = await store.task_events(conn, ws, key, before_id=before_event, limit=EVENTS_PAGE + 1)
            held = await reservations.held(conn, row.id, row.lease_token) if row.lease_token else None
        more = entries[limit - 1].seq if len(entries) > limit else None
        more_events = events[EVENTS_PAGE - 1].id if len(events) > EVENTS_PAGE else None
        return TaskPage(
            task=task_detail(row, now(), held),  # with the paths its live lease holds
            depends_on=[dependency_of(d) for d in depends_on],
            dependents=[dependency_of(d) for d in dependents],
            progress=[progress_entry(r) for r in entries[:limit]],
            more_progress=more,
            events=[task_event(e) for e in reversed(events[:EVENTS_PAGE])],
            more_events=more_events,
            depends_on_total=deps_total,
            dependents_total=needed_total,
            depends_on_offset=deps_offset,
            dependents_offset=needed_offset,
        )

    async def graph(self, ident: Identity, *, limit: int = 300) -> Graph:
        check_int("limit", limit, 1, 2000)
        async with self.db.page_read() as conn:
            nodes, edges = await store.graph(conn, ident.workspace, limit, GRAPH_EDGES)
            total = sum((await task_store.counts(conn, ident.workspace)).values())  # the counters: a few rows
        return Graph([dependency_of(n) for n in nodes], edges, total)

    async def table(
        self,
        ident: Identity,
        *,
        status: str | None = None,
        owner: str | None = None,
        tag: str | None = None,
        sort: str = "created",
        descending: bool = False,
        offset: int = 0,
        limit: int = 200,
    ) -> TaskTable:
        """A page of tasks for the table view: filtered by status, owner and tag, sorted by one column."""
        if status is not None and status not in BOARD_ORDER:
            raise InvalidArgument(f"status must be one of {', '.join(BOARD_ORDER)}, got {status!r}")
        if sort not in store.TABLE_SORTS:
            raise InvalidArgument(f"sort must be one of {', '.join(store.TABLE_SORTS)}, got {sort!r}")
        for kind, name in (("owner", owner), ("tag", tag)):
            if name is not None:
                check_name(kind, name)
        check_int("offset", offset, 0)
        check_int("limit", limit, 1, 500)
        async with self.db.page_read() as conn:
            rows, total = await store.task_table(
                conn,
                ident.workspace,
                status=status,
                owner=owner,
                tag=tag,
                sort=sort,
                descending=descending,
                limit=limit,
                offset=offset,
            )
        shown = [
            TableRow(
                r.key,
                r.title,
                status_of(r),
                r.owner,
                r.priority,
                json.loads(r.tags),
                r.attempts,
                r.max_attempts,
                iso(r.updated_at),
                r.kind,
                bool(r.review),
            )
            for r in rows
        ]
        return TaskTable(shown, total, offset, limit)

    async def task_keys(self, ident: Identity, limit: int = 500) -> list[str]:
        """The workspace's first `limit` task keys, by key (the timeline's task filter offers them)."""
        async with self.db.page_read() as conn:
            rows, _total = await store.task_table(
                conn,
                ident.workspace,
                status=None,
                owner=None,
                tag=None,
                sort="key",
                descending=False,
                limit=limit,
                offset=0,
            )
        return [r.key for r in rows]

    async def root_of_wait(self, ident: Identity, key: str) -> list[Dependency]:
        """What holds `key` back, step by step up its dependencies: the last is the root (a failure, a
        task held or in review, or one ready to claim). Empty when nothing holds it back."""
        check_name("task_key", key)
        path: list[Dependency] = []
        seen = {key}
        async with self.db.page_read() as conn:
            current = key
            for _ in range(ROOT_STEPS):
                row = await store.holding_dependency(conn, ident.workspace, current)
                if row is None or row.key in seen:
                    break
                path.append(dependency_of(row))
                seen.add(row.key)
                if row.status != S.PENDING or (row.ready and not row.blocked):
                    break  # the root: a failure, a task held or in review, or one ready to claim
                current = row.key
        return path

    async def holder(self, ident: Identity, key: str) -> Holder | None:
        """Who holds `key` and how long they have been quiet; None when it is not claimed."""
        check_name("task_key", key)
        at = now()
        async with self.db.page_read() as conn:
            row = await task_store.get(conn, ident.workspace, key)
            if row is None or row.status != S.CLAIMED or row.owner is None:
                return None
            contacts = {c.agent: float(c.seen_at) for c in await store.contacts(conn, ident.workspace, AGENTS_SHOWN)}
        last = max(contacts.get(row.owner, 0.0), float(row.updated_at))  # a heartbeat updates the task
        quiet = at - last
        ends = row.lease_expires_at
        expired = ends is not None and ends <= at
        after = self.settings.silent_after_seconds
        silent = (quiet >= after if after is not None else quiet > (row.lease_seconds or 0) / 2) or (
            ends is not None and expired and last < ends
        )
        return Holder(row.owner, quiet if silent else None, expired)


def dependency_of(row: Any) -> Dependency:
    return Dependency(row.key, status_of(row), row.owner, row.title, row.kind, bool(row.review))


def _card(
    row: Any,
    at: float,
    waits_on: list[Dependency],
    cancel_reason: str | None = None,
    waits_total: int = 0,
    silent: Any = None,
    held: dict[str, bool] | None = None,
) -> Card:
    status = status_of(row)
    claimed = row.status == S.CLAIMED
    backoff = row.status == S.PENDING and row.available_at > at
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
        last_error=None if row.status == S.CANCELLED else row.last_error,  # the cancel reason says why
        tags=json.loads(row.tags),
        waits_on=waits_on,
        kind=row.kind,
        review=bool(row.review),
        cancel_reason=cancel_reason,
        paths=tuple(json.loads(row.paths)) if getattr(row, "paths", None) else (),
        waits_on_total=max(waits_total, len(waits_on)),
        silent_since=(iso(silent.seen_at) if silent.seen_at is not None else iso(row.updated_at)) if silent else None,
        held=_held(held) if claimed and row.lease_expires_at is not None and row.lease_expires_at > at else (),
    )


def _held(held: dict[str, bool] | None) -> tuple[tuple[str, bool], ...]:
    """(pattern, shared) of what a lease holds: exclusive first, then by pattern."""
    return tuple(sorted((held or {}).items(), key=lambda ps: (ps[1], ps[0])))


def held_card(row: Any, at: float, silent_since: str | None = None, held: dict[str, bool] | None = None) -> Card:
    return Card(
        key=row.key,
        title=row.title,
        status=S.CLAIMED.value,
        priority=0,
        owner=row.owner,
        attempts=row.attempts,
        max_attempts=row.max_attempts,
        lease_expires_at=iso(row.lease_expires_at),
        lease_expired=row.lease_expires_at <= at,
        retry_at=None,
        last_error=None,
        tags=[],
        waits_on=[],
        silent_since=silent_since,
        held=_held(held),
    )
