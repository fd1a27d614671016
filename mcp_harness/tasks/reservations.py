"""Path reservations: a claim of a task with `paths` reserves them, exclusively, for the
lease's life; the holder may reserve more (exclusive or shared) or drop some. A reservation is live
while its lease is; whether two patterns may name one file is `paths.overlap` (exact; unsure: overlap).

Every change of a workspace's reservations happens under one lock (`store.reservations.lock`;
SQLite's BEGIN IMMEDIATE does the same): a claim of a task with paths, `reserve`, and a heartbeat that
revives an expired lease. A claim of a task without paths never touches them and stays one statement
(`store.tasks.PathMode` `first`): so no two live exclusive reservations ever overlap."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from mcp_harness.errors import InvalidArgument, LeaseLost, TaskConflict
from mcp_harness.models import ClaimTaskResult, WaitingOn
from mcp_harness.store import Connection
from mcp_harness.store.records import ClaimedTask, TaskRecord
from mcp_harness.tasks.patterns import MAX_PATHS, PatternError, normalize_all, overlap
from mcp_harness.tasks.reasons import MAX_WAITING_ON, paths_reserved
from mcp_harness.tasks.rules import Status
from mcp_harness.tasks.store import reservations as held_paths
from mcp_harness.tasks.store import tasks as store
from mcp_harness.tasks.store.tasks import PathMode

#: how many claimable tasks with paths a claim looks at (in claim order) for one it may take
MAX_CANDIDATES = 200


def patterns(raw: Iterable[str] | None, what: str = "paths") -> list[str]:
    """Normalized patterns (`paths.normalize`), or `invalid_argument` saying what is wrong."""
    try:
        return normalize_all(raw or [])
    except PatternError as exc:
        raise InvalidArgument(f"{what}: {exc}") from None


def task_paths(row: TaskRecord) -> list[str]:
    return json.loads(row.paths) if row.paths else []


@dataclass(frozen=True)
class Clash:
    """Another agent's live reservation that stops one of ours: the holding task, its owner, its pattern."""

    key: str
    owner: str
    pattern: str
    retry_after: float
    shared: bool = False  #: the holder reserved it shared (for reading)

    def says(self) -> str:
        how = "shared" if self.shared else "exclusively"
        return f"{self.pattern!r} is reserved {how} by agent {self.owner!r} (task {self.key!r})"


async def find_clashes(
    conn: Connection, workspace: str, agent: str, wanted: Iterable[str], *, shared: bool, at: float, own_key: str = ""
) -> list[Clash]:
    """Other agents' live reservations that `wanted` (shared or exclusive) may not overlap: every one for
    an exclusive reservation, the exclusive ones for a shared one; never the caller's own. Each pattern
    reads only the reservations its anchor allows (`store.reservations.near`), so a claim costs about
    the same past 1,000 live reservations as past none."""
    out: dict[tuple[str, str], Clash] = {}
    for mine in wanted:
        for row in await held_paths.near(conn, workspace, mine, at):
            if row.owner == agent or row.key == own_key or (shared and row.shared):
                continue
            if overlap(mine, row.pattern):
                left = max(0.0, round(row.lease_expires_at - at, 3))
                out.setdefault((row.key, row.pattern), Clash(row.key, row.owner, row.pattern, left, bool(row.shared)))
    return sorted(out.values(), key=lambda c: (c.retry_after, c.key, c.pattern))


async def claim_reserving(
    conn: Connection,
    workspace: str,
    agent: str,
    at: float,
    tags: list[str] | None,
    task_key: str | None,
    take: Take,
) -> tuple[ClaimedTask | None, list[Clash]]:
    """The claim inside a write transaction, under the reservations' lock: the best claimable task whose
    paths no other agent's live reservation overlaps (tasks without paths as ever), its paths reserved
    in the same transaction. With nothing taken, the clashes that held tasks back. Without a claimable
    task with paths no lock is taken: the claim then takes only tasks without paths, reserving nothing."""
    found: list[Clash] = []
    allowed = None
    candidates = await store.path_candidates(
        conn, workspace, now=at, tags=tags, task_key=task_key, limit=MAX_CANDIDATES
    )
    if candidates:  # judged under the lock, as they are once it is held
        await held_paths.lock(conn, workspace)
        candidates = await store.path_candidates(
            conn, workspace, now=at, tags=tags, task_key=task_key, limit=MAX_CANDIDATES
        )
    for candidate in candidates:
        stop = await find_clashes(
            conn, workspace, agent, json.loads(candidate.paths), shared=False, at=at, own_key=candidate.key
        )
        if not stop:
            allowed = candidate.id
            break
        found.extend(stop)
    row = await take("allowed", allowed)
    if row is not None and row.paths:
        await held_paths.reserve(
            conn, workspace, row.id, row.lease_token or "", dict.fromkeys(task_paths(row), False), fresh=True
        )
    return row, found if row is None else []


async def claim_would_succeed(
    conn: Connection, workspace: str, agent: str, at: float, tags: list[str] | None, task_key: str | None
) -> bool:
    """Whether a claim by `agent` would get a task now, reservations considered (what waiting claims poll:
    a task whose paths another agent holds does not wake them)."""
    if await store.claimable_exists(conn, workspace, now=at, tags=tags, task_key=task_key, without_paths=True):
        return True
    candidates = await store.path_candidates(
        conn, workspace, now=at, tags=tags, task_key=task_key, limit=MAX_CANDIDATES
    )
    if not candidates:
        return False
    for c in candidates:
        if not await find_clashes(conn, workspace, agent, json.loads(c.paths), shared=False, at=at, own_key=c.key):
            return True
    return False


class Take(Protocol):
    """The claim statement with the claimer's lease (a callable: path mode, allowed id -> claimed row)."""

    async def __call__(self, paths: PathMode, allowed: int | None) -> ClaimedTask | None: ...


def reserved_answer(found: list[Clash], why: ClaimTaskResult) -> ClaimTaskResult:
    """What a claim that took nothing answers when tasks were held back by reservations: `paths_reserved`
    naming the holders, unless a reason before it in the precedence (`backoff`) applies."""
    holders: dict[str, tuple[Clash, list[str]]] = {}
    for clash in found:
        patterns_held = holders.setdefault(clash.key, (clash, []))[1]
        if clash.pattern not in patterns_held:
            patterns_held.append(clash.pattern)
    waiting = [
        WaitingOn(key=c.key, status=Status.CLAIMED.value, owner=c.owner, retry_after=c.retry_after, paths=held)
        for c, held in holders.values()
    ]
    on = sorted(waiting, key=lambda w: w.retry_after or 0)[:MAX_WAITING_ON]
    return paths_reserved(why, on)


async def check_revival(conn: Connection, workspace: str, agent: str, row: TaskRecord, token: str, at: float) -> None:
    """A heartbeat on a lease that ran out (nobody re-claimed the task) revives its reservations: only
    where they are free; else `lease_lost` naming the holder."""
    if row.lease_expires_at is None or row.lease_expires_at > at or row.lease_token != token:
        return
    mine = await held_paths.held(conn, row.id, token)
    if not mine:
        return
    await held_paths.lock(conn, workspace)
    stop: list[Clash] = []
    for pattern, shared in mine.items():
        stop += await find_clashes(conn, workspace, agent, [pattern], shared=shared, at=at, own_key=row.key)
    if stop:
        raise LeaseLost(
            f"cannot heartbeat task {row.key!r}: your lease ran out and its paths were taken meanwhile: "
            f"{stop[0].says()}; its lease ends in {stop[0].retry_after:g}s. Release this task (with your "
            "lease_token) or wait, then claim it again"
        )


async def change(
    conn: Connection,
    workspace: str,
    agent: str,
    row: TaskRecord,
    token: str,
    wanted: list[str],
    *,
    reserve: bool,
    shared: bool,
    at: float,
) -> dict[str, bool]:
    """Reserve (under the lock, refusing a clash with `task_conflict` naming the holder) or drop `wanted`
    under the lease; answers what the lease holds now."""
    if not wanted:
        raise InvalidArgument(f"{'reserve' if reserve else 'unreserve'} needs paths: the patterns to change")
    await held_paths.lock(conn, workspace)
    mine = await held_paths.held(conn, row.id, token)
    if not reserve:
        unknown = [p for p in wanted if p not in mine]
        if unknown:
            raise InvalidArgument(f"this lease does not hold {unknown[0]!r}; it holds {sorted(mine) or 'no paths'}")
        await held_paths.unreserve(conn, row.id, token, wanted)
        return {p: s for p, s in mine.items() if p not in wanted}
    total = {**mine, **dict.fromkeys(wanted, shared)}
    if len(total) > MAX_PATHS:
        raise InvalidArgument(f"a lease holds at most {MAX_PATHS} path patterns; this would make {len(total)}")
    stop = await find_clashes(conn, workspace, agent, wanted, shared=shared, at=at, own_key=row.key)
    if stop:
        first = next((c for c in stop if not c.shared), stop[0])  # an exclusive one is the one to name
        others = [f"{c.pattern!r} of {c.owner!r}" for c in stop if c is not first]
        more = f" (also {', '.join(others[:3])}{', ...' if len(others) > 3 else ''})" if others else ""
        if shared:  # only exclusive reservations stop a shared one
            then = "a shared reservation waits only for exclusive ones: work on other paths, wait for that lease "
            then += "to end, or message the holder"
        elif all(c.shared for c in stop):
            then = "others read it: reserve it shared if reading is enough, work on other paths, or message them"
        else:
            then = "work on other paths, or message the holder"
        raise TaskConflict(
            f"cannot reserve{' shared' if shared else ''}: {first.says()} for {math.ceil(first.retry_after)} s more"
            f"{more}; {then}"
        )
    await held_paths.reserve(conn, workspace, row.id, token, dict.fromkeys(wanted, shared))
    return total
