"""How fast the work goes, in figures: the pace page (time in each status, review waits, throughput, the
burn-up), and the ages and counts the metrics export."""

from __future__ import annotations

from dataclasses import dataclass

from mcp_harness.base import Identity, ServiceBase
from mcp_harness.oversight.store import reads as store
from mcp_harness.store.common import now
from mcp_harness.tasks.rules import STATUS_AFTER, UNDER_WAY
from mcp_harness.tasks.rules import Status as S
from mcp_harness.tasks.rules import shown as shown_status
from mcp_harness.tasks.store import tasks as task_store

PACE_EVENTS = 5000  #: task events the pace page reads (the newest)
BURN_BUCKETS = 40  #: points of the burn-up chart


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


class PaceReads(ServiceBase):
    """The figures (a part of `ConsoleService`)."""

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


def _median(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _ages(rows: list[tuple[str, float]], at: float) -> list[tuple[str, float]]:
    return [(w, round(max(0.0, at - since), 3)) for w, since in sorted(rows)]
