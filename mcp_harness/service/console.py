"""What the operator console and the metrics read: the board, one task, the dependency graph, the
timeline, threads and their versions, agents. Read-only; every method takes the viewer's `Identity`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..arguments import RestoreStateArgs
from ..config import check_int, check_name
from ..errors import InvalidArgument, NotFound
from ..models import PROGRESS_STATUSES, CheckpointMeta, ProgressEntry, TaskCounts, TaskDetail, TaskEvent
from ..sessions import alive
from ..store import changes, console_paths, reservations
from ..store import checkpoints as checkpoint_store
from ..store import console as store
from ..store import messages as message_store
from ..store import tasks as task_store
from ..store.common import now
from ..task_states import BLOCKED, BOARD_ORDER, SETTLED, STATUS_AFTER, UNDER_WAY
from ..task_states import Status as S
from ..task_states import shown as shown_status
from .base import Identity, ServiceBase, iso
from .checkpoints import CheckpointService
from .jsondiff import Change, diff
from .progress import progress_entry
from .search import reading, search_terms
from .task_events import HARNESS, KINDS
from .task_views import status_of, task_counts, task_detail, task_event

WAITS_SHOWN = 4  #: dependencies a board card names (then "and N more"): a card stays small at any plan size
DEPS_PAGE = 100  #: dependencies and dependents a task page lists at a time
EVENTS_PAGE = 100  #: task events a task page shows at a time
HELD_SHOWN = 500  #: held tasks the agents page lists


async def silent_holders(conn: Any, workspace: str, at: float, after: float | None) -> list[Any]:
    """The running leases whose holder is silent: its process is gone (a stdio server's, on this
    machine), or it has made no call for more than half the lease (`after` seconds when set: the
    console's setting), so a working agent that thinks for a few minutes between calls is not accused."""
    quiet = at - after if after is not None else None
    rows = await store.silent_holders(conn, workspace, at, quiet, HELD_SHOWN)
    return [r for r in rows if r.quiet or alive(r.lease_process) is False]


STUCK_SCAN = 2000  #: tasks of each status the stuck page looks at
STUCK_SHOWN = 25  #: blockers the stuck page lists
PACE_EVENTS = 5000  #: task events the pace page reads (the newest)
FILTER_EVENTS = 1000  #: task events whose actors the agent filter offers (the newest; contacts add the rest)
BURN_BUCKETS = 40  #: points of the burn-up chart
WAITING_CAP = 10_000  #: tasks counted behind one blocker (more shows as "10000+")
ROOT_STEPS = 50  #: dependencies followed up from a task to the root of what holds it back
AGENTS_SHOWN = 500  #: agents the agents page lists (the ones heard from last)
GRAPH_EDGES = 3000  #: edges the graph draws at most


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
class TimelineEvent:
    """A task's transition, shown beside the progress entries."""

    task_key: str
    event: TaskEvent


@dataclass(frozen=True)
class Timeline:
    entries: list[ProgressEntry]
    next_before_seq: int | None
    events: list[TimelineEvent] = field(default_factory=list)  #: in the entries' time span, newest first


@dataclass(frozen=True)
class ThreadSummary:
    name: str
    latest_version: int
    size_bytes: int
    updated_at: str


@dataclass(frozen=True)
class AgentRow:
    agent: str
    last_seen: str | None  #: its last contact: any call, or else the last thing it wrote
    holds: list[Card] = field(default_factory=list)
    last_tool: str | None = None  #: the tool of its last recorded call
    #: what its last claim answered (`claimed`, or why nothing), or what it then did with the task (`completed:K`)
    claim_outcome: str | None = None
    claim_at: str | None = None
    silent: bool = False  #: it holds a lease and has made no call for `silent_after` seconds
    overdue: bool = False  #: it holds a lease past its time and has made no call since the lease ran out

    @property
    def state(self) -> str:
        """`overdue` (its lease ran out and it made no call since), `silent`, `working` (holds a task), or
        `idle`."""
        return "overdue" if self.overdue else "silent" if self.silent else "working" if self.holds else "idle"

    @property
    def let_go(self) -> tuple[str, str] | None:
        """(`completed`, `released` or `failed`, the task's key) when its last word was that about the
        task it held (`contacts.LET_GO`): what it did before it went idle."""
        verb, _, key = (self.claim_outcome or "").partition(":")
        return (verb, key) if key else None


@dataclass(frozen=True)
class Agents:
    agents: list[AgentRow]
    overdue: list[Card]  #: leases past their time that nobody has taken over yet
    silent: list[Card] = field(default_factory=list)  #: leases still running whose holder went quiet
    silent_after: float | None = None  #: seconds without a call that make a holder silent (None: half its lease)


@dataclass(frozen=True)
class Needs:
    """What needs a person in a workspace: the bar at the top of every console page."""

    in_review: int  #: completed work waiting for approve or reject (gates apart)
    gates: int  #: gates waiting for a person's decision
    overdue: int  #: leases past their time that nobody has taken over yet
    silent: int  #: leases still running whose holder has made no call for a while
    failed: int
    blocked: int  #: pending behind a failed dependency
    messages: int = 0  #: messages to the operators nobody has acknowledged yet (the Inbox's count)

    @property
    def total(self) -> int:
        return self.in_review + self.gates + self.overdue + self.silent + self.failed + self.blocked + self.messages


@dataclass(frozen=True)
class Blocker:
    """A task others wait on, and the one thing that gets it moving."""

    task: Dependency
    waiting: int  #: tasks that depend on it directly
    why: str  #: what holds it, in a sentence
    action: str | None  #: the operator action that unsticks it (`reopen`, `release`, `approve`, `retry_now`)
    lease_expires_at: str | None = None
    last_error: str | None = None
    behind: int = 0  #: tasks that wait on it in all, directly or through others (up to `WAITING_CAP`)
    retry_at: str | None = None  #: pending in a retry backoff: when it becomes claimable


@dataclass(frozen=True)
class Stuck:
    blockers: list[Blocker]  #: the most waited on first
    scanned: int  #: tasks of each status looked at (the list is exact below this many)


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


@dataclass(frozen=True)
class StatusTime:
    status: str
    median: float  #: seconds a task spent in it, the median of the spells seen
    total: float  #: seconds, over every spell seen
    spells: int


@dataclass(frozen=True)
class Pace:
    """How fast the work goes: from the newest `PACE_EVENTS` task events and the tasks' own times."""

    in_status: list[StatusTime]  #: pending (waiting to be claimed), claimed (worked on), in review
    review_wait: float | None  #: median seconds from entering review to a person's decision
    oldest_review: float | None  #: seconds the task longest in review has waited so far
    done_last_hour: int
    per_hour: list[int]  #: tasks done in each of the last 24 hours, oldest first
    scope: list[tuple[float, int]]  #: burn-up: (time, tasks planned so far)
    done: list[tuple[float, int]]  #: burn-up: (time, tasks done so far)
    events_seen: int
    hours_covered: float = 24.0  #: of the last 24 hours, those since the first task was made (a young project)

    @property
    def per_hour_rate(self) -> float:
        """Tasks done an hour over the time the last 24 hours actually cover."""
        return sum(self.per_hour) / max(self.hours_covered, 1 / 60)


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

    async def needs(self, workspace: str) -> Needs:
        """What needs a person in `workspace` (the caller has checked the viewer may see it): a few
        counter rows and small indexed counts, cheap at any size."""
        check_name("workspace", workspace)
        at = now()
        async with self.db.read() as conn:
            counts = await task_store.counts(conn, workspace)
            gates = await store.gates_in_review(conn, workspace)
            overdue = await store.expired_leases(conn, workspace, at)
            silent = len(await silent_holders(conn, workspace, at, self.settings.silent_after_seconds))
            messages = await message_store.count_unread_operators(conn, workspace)
        return Needs(
            in_review=counts.get(S.IN_REVIEW, 0) - gates,
            gates=gates,
            overdue=overdue,
            silent=silent,
            failed=counts.get(S.FAILED, 0),
            blocked=counts.get(BLOCKED, 0),
            messages=messages,
        )

    async def stuck(self, ident: Identity) -> Stuck:
        """The tasks others wait on, most waited on first, each with what unsticks it: a failure to
        reopen, a silent or overdue holder to release, a review or gate to decide, or a ready task
        nobody claims."""
        at = now()
        ws = ident.workspace
        async with self.db.page_read() as conn:
            rows = []
            for status in (S.FAILED, S.CLAIMED, S.IN_REVIEW, S.PENDING):
                rows += await store.holding_back(conn, ws, status, STUCK_SCAN, STUCK_SHOWN)
            silent = {r.key for r in await silent_holders(conn, ws, at, self.settings.silent_after_seconds)}
            seen = await store.contacts(conn, ws, AGENTS_SHOWN)
            rows = [r for r in rows if r.status != S.PENDING or r.ready]  # a pending task that waits is no root
            rows.sort(key=lambda r: -r.dependents)
            rows = rows[: STUCK_SHOWN * 2]
            behind = {r.key: await store.waiting_on(conn, ws, r.key, WAITING_CAP) for r in rows}
            pending = await task_store.get_many(conn, ws, [r.key for r in rows if r.status == S.PENDING])
        backoff = {k: t.available_at for k, t in pending.items() if t.available_at > at}  # a retry backoff
        last = {c.agent: float(c.seen_at) for c in seen}
        rows.sort(key=lambda r: (-behind[r.key], -r.dependents))  # the most held back, in all, first
        blockers = [
            _blocker(r, at, r.key in silent, last.get(r.owner or ""), behind[r.key], backoff.get(r.key))
            for r in rows[:STUCK_SHOWN]
        ]
        return Stuck(blockers, STUCK_SCAN)

    async def pace(self, ident: Identity) -> Pace:
        """Time in each status, review waiting time, throughput and the plan's burn-up."""
        at = now()
        ws = ident.workspace
        async with self.db.page_read() as conn:
            events = await store.recent_task_events(conn, ws, PACE_EVENTS)
            keys = sorted({e.task_key for e in events})
            born = await store.created_at(conn, ws, keys)
            counts = await task_store.counts(conn, ws)
            t0 = await store.first_created(conn, ws)
            step = max(1.0, (at - t0) / BURN_BUCKETS) if t0 is not None else 1.0
            created, finished = await store.burn_up(conn, ws, t0 or at, step) if t0 is not None else ({}, {})
        spells: dict[str, list[float]] = {s: [] for s in UNDER_WAY}
        review: list[float] = []
        state: dict[str, tuple[str, float]] = {}
        for e in events:
            key, when = e.task_key, float(e.created_at)
            status, since = state.get(key, (S.PENDING, born.get(key, when)))
            if status in spells:
                spells[status].append(when - since)
                if status == S.IN_REVIEW and e.kind in ("approve", "reject"):
                    review.append(when - since)
            state[key] = (STATUS_AFTER.get(e.kind, status), when)
        waiting_review = [at - since for status, since in state.values() if status == S.IN_REVIEW]
        done_times = [float(e.created_at) for e in events if e.kind in ("complete", "approve")]
        per_hour = [0] * 24
        for when in done_times:
            hours_ago = int((at - when) // 3600)
            if 0 <= hours_ago < 24:
                per_hour[23 - hours_ago] += 1
        scope, done, planned, made = [], [], 0, 0
        for b in range(BURN_BUCKETS + 1):
            planned += created.get(b, 0)
            made += finished.get(b, 0)
            scope.append(((t0 or at) + (b + 1) * step, planned))
            done.append(((t0 or at) + (b + 1) * step, made))
        total_now = sum(counts.values())
        if scope:  # the plan as it is now (tasks purged or imported since keep the chart honest at its end)
            scope[-1] = (at, total_now)
            done[-1] = (at, counts.get(S.DONE, 0))
        return Pace(
            in_status=[StatusTime(s, _median(v), sum(v), len(v)) for s, v in spells.items()],
            review_wait=_median(review) if review else None,
            oldest_review=max(waiting_review) if waiting_review else None,
            done_last_hour=per_hour[-1],
            per_hour=per_hour,
            scope=scope,
            done=done,
            events_seen=len(events),
            hours_covered=min(24.0, (at - t0) / 3600) if t0 is not None else 24.0,
        )

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

    async def agent_names(self, ident: Identity) -> list[str]:
        """Everyone heard from in the workspace (for filters as choices), by name."""
        async with self.db.page_read() as conn:
            seen = await store.last_seen(conn, ident.workspace)
            contacts = await store.contacts(conn, ident.workspace, AGENTS_SHOWN)
            actors = await store.recent_actors(conn, ident.workspace, FILTER_EVENTS)
        # every actor seen: agents, the people who acted (operators) and the harness itself (expiries)
        names = set(seen) | {c.agent for c in contacts} | set(actors)
        return sorted(names)[:AGENTS_SHOWN]

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
                path.append(_dependency(row))
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
            depends_on=[_dependency(d) for d in depends_on],
            dependents=[_dependency(d) for d in dependents],
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
        with_events: bool = False,
        kind: str | None = None,
    ) -> Timeline:
        """Progress entries newest first, filtered by agent, task, thread and status, and by a full-text
        query on the summary or details; a page of `limit`, then `next_before_seq` for the next. With
        `with_events`, the task events of the page's time span beside them: of one `kind` if given, and
        those whose text (error, reason, comment) has every word of `text` when it is given."""
        if kind is not None and kind not in KINDS:
            raise InvalidArgument(f"kind must be one of {', '.join(sorted(KINDS))}, got {kind!r}")
        for field_name, name in (("agent", agent), ("task_key", task_key), ("thread", thread)):
            if name is not None:
                check_name(field_name, name)
        if status is not None and status not in PROGRESS_STATUSES:
            raise InvalidArgument(f"status must be one of {', '.join(PROGRESS_STATUSES)}, got {status!r}")
        if text is not None and len(text) > 200:
            raise InvalidArgument("search text must be at most 200 characters")
        terms = search_terms(text) if text else None
        check_int("limit", limit, 1, 500)
        async with reading(self.db, terms) as conn:
            rows = await store.timeline(
                conn,
                ident.workspace,
                agent=agent,
                task_key=task_key,
                thread=thread,
                status=status,
                text=terms,
                before_seq=before_seq,
                limit=limit + 1,
            )
            events = []
            if with_events and thread is None and status is None:
                shown = rows[:limit]
                # the span of this page: up to its newest entry (or now, on the first page), back to its
                # oldest entry when more entries follow (else to the beginning)
                until = float(shown[0].created_at) if shown and before_seq is not None else now()
                since = float(shown[-1].created_at) if shown and len(rows) > limit else None
                events = await store.events_window(
                    conn,
                    ident.workspace,
                    agent=agent,
                    task_key=task_key,
                    since=since,
                    until=until,
                    limit=EVENTS_PAGE,
                )
        more = rows[limit - 1].seq if len(rows) > limit else None
        shown_events = [TimelineEvent(e.task_key, task_event(e)) for e in events if kind is None or e.kind == kind]
        if text:
            words = [w.lower() for w in re.findall(r"\w+", text)]
            shown_events = [e for e in shown_events if all(w in _event_text(e.event) for w in words)]
        return Timeline([progress_entry(r) for r in rows[:limit]], more, shown_events)

    async def thread_names(self, ident: Identity, limit: int = 200) -> list[str]:
        """The first `limit` threads by name (for the timeline's filter as choices): bounded at any size."""
        async with self.db.page_read() as conn:
            return await store.thread_names(conn, ident.workspace, limit)

    async def threads(self, ident: Identity) -> list[ThreadSummary]:
        async with self.db.page_read() as conn:
            rows = await checkpoint_store.list_threads(conn, ident.workspace)
        return [ThreadSummary(r.name, r.latest_version, r.size_bytes, iso(r.updated_at)) for r in rows]

    async def state(self, ident: Identity, thread: str, version: int | None) -> tuple[CheckpointMeta, dict[str, Any]]:
        """One version of a thread (the latest without `version`): its metadata and state."""
        check_name("thread", thread)
        async with self.db.page_read() as conn:
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
        """Every agent: its last contact, what it holds (with the lease clock) or what its last claim
        answered; leases past their time; leases whose holder went silent before they ended."""
        at = now()
        quiet = self.settings.silent_after_seconds
        async with self.db.page_read() as conn:
            seen = await store.last_seen(conn, ident.workspace)
            contacts = {c.agent: c for c in await store.contacts(conn, ident.workspace, AGENTS_SHOWN)}
            held = await store.claimed(conn, ident.workspace, HELD_SHOWN)
            silent_rows = await silent_holders(conn, ident.workspace, at, self.settings.silent_after_seconds)
            reserved: dict[str, dict[str, bool]] = {}
            for res in await reservations.live(conn, ident.workspace, at):  # few: claimed tasks' leases only
                reserved.setdefault(res.key, {})[res.pattern] = bool(res.shared)
        seen.pop(HARNESS, None)  # the harness's own log entries: not an agent of the team
        for name, c in contacts.items():
            seen[name] = max(seen.get(name, 0.0), float(c.seen_at))
        quiet_keys = {r.key: r for r in silent_rows}
        holds: dict[str, list[Card]] = {}
        overdue, silent = [], []
        gone = set()  #: holders whose lease ran out and who made no call since: gone, not working
        for r in held:
            quiet_row = quiet_keys.get(r.key)
            card = _held_card(r, at, iso(seen.get(r.owner)) if quiet_row is not None else None, reserved.get(r.key))
            holds.setdefault(r.owner, []).append(card)
            if card.lease_expired:
                overdue.append(card)
                if seen.get(r.owner, 0.0) < r.lease_expires_at:
                    gone.add(r.owner)
            elif quiet_row is not None:
                silent.append(card)
        silent_owners = {c.owner for c in silent}
        names = sorted(set(seen) | set(holds), key=lambda a: (-seen.get(a, 0.0), a))[:AGENTS_SHOWN]
        rows = []
        for a in names:
            c = contacts.get(a)
            rows.append(
                AgentRow(
                    a,
                    iso(seen.get(a)),
                    holds.get(a, []),
                    last_tool=c.tool if c else None,
                    claim_outcome=c.claim_outcome if c else None,
                    claim_at=iso(c.claim_at) if c and c.claim_at else None,
                    silent=a in silent_owners,
                    overdue=a in gone,
                )
            )
        return Agents(rows, overdue, silent, quiet)

    async def ages(self) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
        """Per workspace: seconds the task longest in review has waited, and the task longest ready."""
        at = now()
        async with self.db.read() as conn:
            review, ready = await store.oldest(conn, at)
        return _ages(review, at), _ages(ready, at)

    async def metrics(self) -> tuple[list[tuple[str, str, int]], list[tuple[str, int]]]:
        """Tasks per (workspace, status) over the database, and leases past their time per workspace."""
        async with self.db.read() as conn:
            rows = await store.counts_by_workspace(conn)
            expired = await store.expired_leases_by_workspace(conn, now())
        counts: dict[tuple[str, str], int] = {}
        for workspace, status, blocked, n in rows:
            shown = shown_status(status, blocked)
            counts[(workspace, shown)] = counts.get((workspace, shown), 0) + n
        return [(w, s, n) for (w, s), n in sorted(counts.items())], expired


def _event_text(event: TaskEvent) -> str:
    """What a search matches in a task event: its kind, actor and the words of its detail (lower case)."""
    detail = " ".join(str(v) for v in (event.detail or {}).values())
    return f"{event.kind} {event.actor} {detail}".lower()


def _ages(rows: list[tuple[str, float]], at: float) -> list[tuple[str, float]]:
    return [(w, round(max(0.0, at - since), 3)) for w, since in sorted(rows)]


def _dependency(row: Any) -> Dependency:
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


def _median(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def span(seconds: float) -> str:
    """`11m 20s`, `2h 5m`: a duration as a person reads it."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    return f"{s // 3600}h {s % 3600 // 60}m"


def _blocker(
    row: Any, at: float, silent: bool, seen_at: float | None, behind: int, retry_at: float | None = None
) -> Blocker:
    task = _dependency(row)
    n = behind
    lease = iso(row.lease_expires_at) if row.status == S.CLAIMED else None
    if row.status == S.FAILED:
        why, action = (
            f"failed (attempt {row.attempts} of {row.max_attempts}): {_count(n, 'waiting task')} "
            f"{'is' if n == 1 else 'are'} blocked",
            "reopen",
        )
    elif row.status == S.CLAIMED and row.lease_expires_at is not None and row.lease_expires_at <= at:
        why, action = f"held by {row.owner}, whose lease ran out: release it so another agent takes it", "release"
    elif row.status == S.CLAIMED and silent:
        since = f" for {span(at - seen_at)}" if seen_at else ""
        why, action = f"held by {row.owner}, silent{since}: release it so another agent takes it", "release"
    elif row.status == S.CLAIMED:
        why, action = f"held by {row.owner}, who is working on it", None
    elif row.status == S.IN_REVIEW and row.kind == "gate":
        why, action = "a gate waiting for a person's decision", "approve"
    elif row.status == S.IN_REVIEW:
        why, action = "completed, waiting for a person's review", "approve"
    elif retry_at is not None:
        why, action = f"failed, will be retried: claimable in {span(retry_at - at)} (its retry backoff)", "retry_now"
    else:
        why, action = "ready, but no agent has claimed it yet: start an agent or check its tags", None
    error = row.last_error if row.status == S.FAILED or retry_at is not None else None
    return Blocker(task, row.dependents, why, action, lease, error, n, iso(retry_at) if retry_at is not None else None)


def _count(n: int, noun: str) -> str:
    """`1 waiting task`, `3 waiting tasks`."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _held_card(row: Any, at: float, silent_since: str | None = None, held: dict[str, bool] | None = None) -> Card:
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
