"""What needs a person: the counts of the bar at the top of every console page, and the stuck page's
blockers, the tasks others wait on, each with what holds it and the action that unsticks it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_harness.base import Identity, ServiceBase, iso
from mcp_harness.config import check_name
from mcp_harness.messages import store as message_store
from mcp_harness.oversight.store import reads as store
from mcp_harness.oversight.tasks import AGENTS_SHOWN, Dependency, dependency_of, silent_holders
from mcp_harness.store.common import now
from mcp_harness.tasks.rules import BLOCKED
from mcp_harness.tasks.rules import Status as S
from mcp_harness.tasks.store import tasks as task_store

STUCK_SCAN = 2000  #: tasks of each status the stuck page looks at
STUCK_SHOWN = 25  #: blockers the stuck page lists
WAITING_CAP = 10_000  #: tasks counted behind one blocker (more shows as "10000+")


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


class AttentionReads(ServiceBase):
    """What needs a person (a part of `ConsoleService`)."""

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


def _blocker(
    row: Any, at: float, silent: bool, seen_at: float | None, behind: int, retry_at: float | None = None
) -> Blocker:
    task = dependency_of(row)
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


def span(seconds: float) -> str:
    """`11m 20s`, `2h 5m`: a duration as a person reads it."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    return f"{s // 3600}h {s % 3600 // 60}m"
