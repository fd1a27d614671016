"""Checkpoints joined to the work (the console): what a thread's version was saved with.

An agent identity is one session, so "written in the same session" is "written
by the same agent". The rule, in one place:

- A version saved by agent A at time t goes with **the progress entry A wrote nearest to t**, on
  either side, within `LINK_WINDOW` (10 minutes); on a tie, the one written before (an agent records
  what it did, then saves). Further away, an entry is about other work: no entry is better than a
  wrong one. The harness's own notes (agent `harness`) are never A's.
- Its **task** is the task that entry names (`task_key`); when the entry names none, or there is no
  entry, the task A held at t, if its task events show one: the newest task A claimed or took over,
  among A's `HELD_SCAN` newest task events up to t, that no later event ended before t (a completion,
  a failure, a release, a take-over by another agent, a revocation, an expiry, a session's end...).
- The links back (a task page's versions, an entry's) are the same rule read the other way: the
  versions saved near those entries or while the task was held are linked forward, and those that
  land on the task (or the entry) are kept.

Every lookup is an index seek by (workspace, agent, time) (migration 13) and each list is capped, so
a page's links cost about the same at 1,000,000 progress entries as at 10,000.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from mcp_harness.base import Identity, ServiceBase, iso
from mcp_harness.models import CheckpointMeta, ProgressEntry, TaskEvent
from mcp_harness.oversight.store import links as store
from mcp_harness.progress.service import progress_entry
from mcp_harness.store import Connection
from mcp_harness.store.common import now
from mcp_harness.store.records import ProgressRow
from mcp_harness.tasks.events import KINDS

LINK_WINDOW = 600.0  #: seconds either side of a save within which its agent's progress entry goes with it
HELD_SCAN = 20  #: an agent's newest task events (up to a save) looked through for the task it held
#: the task events that end an agent's hold of a task: every one that ends a lease, and a session's end
ENDS = frozenset(k for k, kind in KINDS.items() if kind.ended) | {"lease_end"}
LINKED_AT_ONCE = 200  #: versions linked by one call at most (a page shows 50)
SAVES_SHOWN = 20  #: versions a task page lists
HOLDS_LOOKED = 10  #: the newest holds of a task (on its events page) whose versions a task page looks for
PER_HOLD = 20  #: versions looked at per hold


@dataclass(frozen=True)
class SavedWith:
    """A checkpoint version and the work it was saved with."""

    checkpoint_id: str
    thread: str
    version: int
    agent: str
    saved_at: str
    entry: ProgressEntry | None = None  #: the progress entry its agent wrote nearest the save
    entry_gap: float | None = None  #: seconds from the save to that entry (negative: written before it)
    task_key: str | None = None  #: the entry's task, else the task its agent held when it saved
    task_from: str | None = None  #: `entry` (the entry names it) or `held` (the task events show it held)


@dataclass(frozen=True)
class TaskSaves:
    """The versions saved for one task (the newest `SAVES_SHOWN`), and which entry each went with."""

    versions: list[SavedWith]
    by_entry: dict[int, list[SavedWith]] = field(default_factory=dict)  #: entry seq -> versions saved with it


class ConsoleLinks(ServiceBase):
    """The console's joins of checkpoints to the work; read-only."""

    async def versions(self, ident: Identity, checkpoint_ids: Sequence[str]) -> dict[str, SavedWith]:
        """What each of these checkpoints (of the viewer's workspace) was saved with, by checkpoint id."""
        async with self.db.read() as conn:
            return await _link(conn, ident.workspace, checkpoint_ids)

    async def for_entries(self, ident: Identity, entries: Sequence[ProgressEntry]) -> dict[int, list[SavedWith]]:
        """The versions saved with each of these entries (by seq): a timeline page's links back."""
        seqs = {e.seq for e in entries}
        async with self.db.read() as conn:
            ids = await store.saved_near_entries(conn, ident.workspace, seqs, window=LINK_WINDOW, limit=LINKED_AT_ONCE)
            links = await _link(conn, ident.workspace, ids, tasks=False)  # an entry's chips name no task
        return _by_entry(links.values(), seqs)

    async def for_task(
        self, ident: Identity, key: str, entries: Sequence[ProgressEntry], events: Sequence[TaskEvent]
    ) -> TaskSaves:
        """The versions saved for task `key`: among those saved near its progress entries shown (`entries`)
        or while an agent held it (the claims of `events`, a page of its events, oldest first), the ones
        whose link lands on `key`, the newest first."""
        holds = _holds(events, now())[-HOLDS_LOOKED:]
        async with self.db.read() as conn:
            ids = await store.saved_near_entries(
                conn, ident.workspace, [e.seq for e in entries], window=LINK_WINDOW, limit=LINKED_AT_ONCE // 2
            )
            for agent, since, until in reversed(holds):
                ids += await store.saved_between(conn, ident.workspace, agent, since, until, PER_HOLD)
            links = await _link(conn, ident.workspace, list(dict.fromkeys(ids))[:LINKED_AT_ONCE])
        mine = sorted(
            (s for s in links.values() if s.task_key == key),
            key=lambda s: (s.saved_at, s.thread, s.version),
            reverse=True,
        )
        return TaskSaves(mine[:SAVES_SHOWN], _by_entry(mine, {e.seq for e in entries}))

    async def forked_from(self, ident: Identity, meta: CheckpointMeta) -> tuple[str, int] | None:
        """(thread, version) a thread's first version was forked from; None for any other version."""
        if meta.version != 1 or not meta.parent_id:
            return None
        async with self.db.read() as conn:
            return await store.place(conn, ident.workspace, meta.parent_id)


async def _link(
    conn: Connection, workspace: str, checkpoint_ids: Iterable[str], *, tasks: bool = True
) -> dict[str, SavedWith]:
    """The rule (the module's docstring) for these checkpoints: their entries (two seeks each), then,
    with `tasks`, the task held for those whose entry names none."""
    ids = list(dict.fromkeys(checkpoint_ids))[:LINKED_AT_ONCE]
    rows = await store.saved_with(conn, workspace, ids, window=LINK_WINDOW)
    entries = await store.entries(conn, workspace, (s for r in rows for s in (r.before_seq, r.after_seq) if s))
    nearest = {r.id: _nearest(float(r.created_at), entries.get(r.before_seq), entries.get(r.after_seq)) for r in rows}
    held: dict[str, str] = {}
    if tasks:
        untasked = [r.id for r in rows if not getattr(nearest[r.id], "task_key", None)]
        held = await store.held_when_saved(conn, workspace, untasked, scan=HELD_SCAN, ends=ENDS)
    out: dict[str, SavedWith] = {}
    for r in rows:
        at, entry = float(r.created_at), nearest[r.id]
        task, source = (entry.task_key, "entry") if entry is not None and entry.task_key else (held.get(r.id), "held")
        out[r.id] = SavedWith(
            r.id,
            r.thread,
            int(r.version),
            r.agent,
            iso(at),
            entry=progress_entry(entry) if entry is not None else None,
            entry_gap=round(float(entry.created_at) - at, 3) if entry is not None else None,
            task_key=task,
            task_from=source if task else None,
        )
    return out


def _nearest(at: float, before: ProgressRow | None, after: ProgressRow | None) -> ProgressRow | None:
    """The entry nearer to `at`; on a tie, the one written before."""
    if before is None or after is None:
        return before or after
    return before if at - float(before.created_at) <= float(after.created_at) - at else after


def _by_entry(links: Iterable[SavedWith], seqs: set[int]) -> dict[int, list[SavedWith]]:
    out: dict[int, list[SavedWith]] = {}
    for s in sorted(links, key=lambda s: (s.saved_at, s.thread, s.version)):
        if s.entry is not None and s.entry.seq in seqs:
            out.setdefault(s.entry.seq, []).append(s)
    return out


def _holds(events: Sequence[TaskEvent], at: float) -> list[tuple[str, float, float]]:
    """(agent, from, to) for each claim or take-over among `events` (oldest first), to the event that
    ended it (or now). Times are to the second: each span is widened by one."""
    out: list[tuple[str, float, float]] = []
    for i, e in enumerate(events):
        if e.kind not in ("claim", "take_over"):
            continue
        end = next((x for x in events[i + 1 :] if x.kind in ENDS), None)
        until = _ts(end.created_at) + 1 if end is not None else at
        out.append((e.actor, _ts(e.created_at), until))
    return out


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()
