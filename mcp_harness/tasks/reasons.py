"""Why a claim found nothing: `reason`, `waiting_on` and `retry_after` (docs/reference/tools.md,
the table of reasons). Runs only after the claim statement took nothing, off the hot path.

The unfinished tasks the claim could take are followed down their dependencies that are not done, to the
tasks at the root of the wait (tasks that wait on nothing unfinished themselves). Each root is classed by
the first entry of `WAITS` that applies to it (knowing whether the root lies outside the claim's
`tags`/`task_key`); the answer is the first entry of `WAITS` that classes any root, and `waiting_on` its
roots first, then those of the other waits (`shared`): a person's review is named even while the answer
is that tasks are held. A new way to wait is one more entry, in its place in the precedence
(`paths_reserved` will come second)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from mcp_harness.models import ClaimReason, ClaimTaskResult, WaitingOn
from mcp_harness.sessions import alive
from mcp_harness.store import Connection
from mcp_harness.store.records import WaitRow
from mcp_harness.tasks.rules import BLOCKED, SETTLED, Status, shown
from mcp_harness.tasks.store import tasks as store

MAX_WAITING_ON = 5
MAX_KNOWN_TAGS = 20


def _never(_row: WaitRow, _at: float) -> float | None:
    return None


def _live(row: WaitRow, at: float) -> bool:
    return row.status == Status.CLAIMED and row.lease_expires_at is not None and row.lease_expires_at > at


def _lease_left(row: WaitRow, at: float) -> float | None:
    """Seconds until the lease ends; 0 for one of the claim's own tasks that became claimable just now."""
    if row.status != Status.CLAIMED or row.lease_expires_at is None:
        return 0.0
    return max(0.0, round(row.lease_expires_at - at, 3))


@dataclass(frozen=True)
class Wait:
    reason: ClaimReason
    #: does this root (at this time, outside the claim's filters or not) make the claim wait for this reason
    applies: Callable[[WaitRow, float, bool], bool]
    retry_after: Callable[[WaitRow, float], float | None]  #: when the root may change by itself


#: In precedence order: the soonest that can change by itself first.
WAITS: tuple[Wait, ...] = (
    Wait(
        "backoff",
        lambda r, at, outside: r.status == Status.PENDING and r.available_at > at,
        lambda r, at: round(r.available_at - at, 3),
    ),
    # `paths_reserved` comes here: decided by the claim itself (`reservations.reserved_answer`, `paths_reserved`)
    # held by a live lease; or, among the claim's own tasks, one that became claimable just now
    Wait(
        "all_claimed",
        lambda r, at, outside: _live(r, at) or (not outside and r.status in (Status.CLAIMED, Status.PENDING)),
        _lease_left,
    ),
    # outside the claim's tags/task_key and held by nobody: waiting will not change it, other work will
    Wait("waiting_on_other_work", lambda r, at, outside: r.status in (Status.CLAIMED, Status.PENDING), _never),
    Wait("waiting_on_review", lambda r, at, outside: r.status == Status.IN_REVIEW, _never),
    Wait("blocked_by_failure", lambda r, at, outside: r.status == Status.FAILED, _never),
)


def _waits_for(row: WaitRow) -> list[str]:
    """The dependencies of a task that are not done (a failed task is a root whatever it depends on)."""
    if row.status == Status.FAILED or not row.waits_for:
        return []
    return json.loads(row.waits_for)


async def _roots(conn: Connection, workspace: str, matched: list[WaitRow]) -> list[WaitRow]:
    """The tasks at the root of the wait of `matched`, in the order they were found."""
    seen: dict[str, WaitRow] = {row.key: row for row in matched}
    roots: dict[str, WaitRow] = {}
    frontier = matched
    while frontier:
        wanted: list[str] = []
        for row in frontier:
            deps = _waits_for(row)
            if not deps:
                roots[row.key] = row
            wanted.extend(d for d in deps if d not in seen)
        fetched = await store.waiting_by_key(conn, workspace, list(dict.fromkeys(wanted))) if wanted else []
        seen.update((row.key, row) for row in fetched)
        frontier = fetched
    return list(roots.values())


#: the statuses whose roots `store.roots` finds by themselves (any other unfinished status: the walk)
_ROOT_STATUSES = frozenset((*Status, BLOCKED))


async def _bounded_roots(conn: Connection, workspace: str, at: float) -> list[WaitRow] | ClaimTaskResult | None:
    """An unfiltered claim's roots read directly, a few of each kind, or its answer when nothing is
    unfinished; None when the workspace has a status they do not cover (then the walk decides)."""
    counts = await store.counts(conn, workspace)
    if any(n and status not in _ROOT_STATUSES for status, n in counts.items()):
        return None
    if not any(n for status, n in counts.items() if status not in SETTLED):
        settled = any(counts.get(status) for status in SETTLED)
        return ClaimTaskResult(task=None, lease=None, reason="all_done" if settled else "none_pending")
    found: list[WaitRow] = [*await store.roots(conn, workspace, now=at, limit=MAX_WAITING_ON)]
    return found or None


async def empty_claim_reason(
    conn: Connection,
    workspace: str,
    *,
    at: float,
    tags: list[str] | None,
    task_key: str | None,
    agent: str | None = None,
    walk: bool = False,
) -> ClaimTaskResult:
    """The answer to a claim that took nothing, judged over the tasks it could take. Without filters
    the roots are read directly (bounded, whatever the backlog); `walk`: always follow every unfinished
    task down its dependencies (what the direct read must agree with). `agent`: the caller (its own
    leases are `mine`)."""
    found = None if walk or tags or task_key is not None else await _bounded_roots(conn, workspace, at)
    if isinstance(found, ClaimTaskResult):
        return found
    if found is not None:
        return _answer(found, at, agent, inside=None)
    matched = await store.waiting(conn, workspace, tags=tags, task_key=task_key)
    if not matched:
        facts = await store.empty_claim_facts(conn, workspace, now=at, tags=tags, task_key=task_key)
        if facts.total:
            return ClaimTaskResult(task=None, lease=None, reason="all_done")
        known = await store.known_tags(conn, workspace, limit=MAX_KNOWN_TAGS) if tags else None
        return ClaimTaskResult(task=None, lease=None, reason="none_pending", known_tags=known)
    inside = None if not (tags or task_key is not None) else {row.key for row in matched}
    return _answer(await _roots(conn, workspace, matched), at, agent, inside=inside)


def _waiting_on(row: WaitRow, wait: Wait, at: float, agent: str | None) -> WaitingOn:
    comment = row.review_comment if row.status in (Status.PENDING, Status.FAILED) else None
    mine = row.status == Status.CLAIMED and agent is not None and row.owner == agent
    return WaitingOn(
        key=row.key,
        status=shown(row.status, False),
        owner=row.owner,
        retry_after=wait.retry_after(row, at),
        mine=mine or None,
        comment=comment,
    )


def _answer(roots: list[WaitRow], at: float, agent: str | None, *, inside: set[str] | None) -> ClaimTaskResult:
    """The reason of the first kind of wait (in `WAITS` order) that any root has, with its roots.
    `inside`: the keys the claim's filters match (None: no filters, nothing lies outside)."""
    classed: dict[str, list[WaitRow]] = {}
    for root in roots:
        outside = inside is not None and root.key not in inside
        wait = next((w for w in WAITS if w.applies(root, at, outside)), None)
        if wait is not None:
            classed.setdefault(wait.reason, []).append(root)
    found = [w for w in WAITS if w.reason in classed]  # the winning wait first
    if not found:  # cannot happen while WAITS classes every unfinished status; answer safely anyway
        return ClaimTaskResult(task=None, lease=None, reason="none_pending")
    groups = []
    for wait in found:
        on = [_waiting_on(r, wait, at, agent) for r in classed[wait.reason]]
        on.sort(key=lambda w: (w.retry_after is None, w.retry_after or 0))
        groups.append(on)
    times = [w.retry_after for w in groups[0] if w.retry_after is not None]
    return ClaimTaskResult(
        task=None,
        lease=None,
        reason=found[0].reason,
        waiting_on=shared(groups),
        retry_after=min(times) if times else None,
    )


def shared(groups: list[list[WaitingOn]]) -> list[WaitingOn]:
    """Up to `MAX_WAITING_ON` roots of every wait, the winning wait's (the first group) first: each other
    wait keeps its first root while there is room (a person's review is not hidden behind held tasks),
    the winning wait takes the rest of the room, then the other waits' further roots, in order."""
    seen: set[str] = set()
    unique: list[list[WaitingOn]] = []
    for group in groups:  # each task once, in the first group that names it
        unique.append([w for w in group if w.key not in seen])
        seen.update(w.key for w in group)
    groups = unique
    others = sum(1 for g in groups[1:] if g)
    taken = [groups[0][: max(1, MAX_WAITING_ON - others)]] + [g[:1] for g in groups[1:]]
    room = MAX_WAITING_ON - sum(map(len, taken))
    for i, group in enumerate(groups):
        more = group[len(taken[i]) :][: max(0, room)]
        taken[i] = taken[i] + more
        room -= len(more)
    return [w for group in taken for w in group][:MAX_WAITING_ON]


#: the reasons that win over `paths_reserved` (before it in the precedence)
BEFORE_PATHS_RESERVED = frozenset({"backoff"})


def paths_reserved(why: ClaimTaskResult, holders: list[WaitingOn]) -> ClaimTaskResult:
    """A claim that took nothing while claimable tasks' paths are reserved by other agents (`holders`):
    `paths_reserved`, unless `why` (the answer without them) has a reason before it in the precedence."""
    if why.reason in BEFORE_PATHS_RESERVED or not holders:
        return why
    times = [h.retry_after for h in holders if h.retry_after is not None]
    # the other waits' roots after the holders; not the tasks claimable now (those the paths held back)
    rest = [w for w in why.waiting_on or [] if not (w.status == Status.PENDING.value and w.retry_after == 0)]
    on = shared([holders, rest])
    return ClaimTaskResult(
        task=None, lease=None, reason="paths_reserved", waiting_on=on, retry_after=min(times) if times else None
    )


async def with_holders(conn: Connection, workspace: str, why: ClaimTaskResult, at: float) -> ClaimTaskResult:
    """`why` with each `waiting_on` entry an agent holds carrying `silent_seconds` (since that agent's
    last call) and `alive` (whether the process that took or renewed the lease runs: null over HTTP)."""
    held = [w.key for w in why.waiting_on or [] if w.owner is not None and w.status == Status.CLAIMED.value]
    if not held:
        return why
    facts = await store.holder_facts(conn, workspace, held)

    def told(w: WaitingOn) -> WaitingOn:
        fact = facts.get(w.key)
        if w.key not in held or fact is None:
            return w
        silent = int(max(0.0, at - fact.seen_at)) if fact.seen_at is not None else None
        return w.model_copy(update={"silent_seconds": silent, "alive": alive(fact.lease_process)})

    return why.model_copy(update={"waiting_on": [told(w) for w in why.waiting_on or []]})
