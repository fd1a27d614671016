"""The change feed: one per database per process, telling waiters that some process committed a
write in the workspace they wait on.

    feed = changes.feed(db)                                      # made on first use
    version = await feed.wait(version, timeout, workspace=W)     # once W changed, or at timeout
    woken = await feed.wait_until(check, timeout, workspace=W, ...)   # a waiting claim: re-check on W's commits

Per workspace: a commit anywhere tells the feed only that something changed in this database; the
feed then reads a fingerprint of each workspace someone waits on (`FINGERPRINT`: a few rows of small
tables that every write of a workspace touches: its task counts, its row in `workspaces`, its threads
and schemas) and wakes only the waiters of the workspaces whose fingerprint moved. A write in A, from
any process, wakes nothing that waits on B.

PostgreSQL: every write transaction ends with `NOTIFY` when it wrote anything (`NOTIFY_WRITES`, run
by `Database.write()` inside the transaction, so a listener hears of a commit, never of a rollback);
NOTIFY reaches only the listeners of this database. The feed LISTENs on one connection of its own.
Single statements outside a transaction (claims and leaf completions on asyncpg's pool) send no
NOTIFY, which would double their round trips: while someone waits, the feed also reads the
fingerprints once a second, which catches those (a row's `xmin` moves with every change to it). That
look reads this database only; writes to other databases on the server wake nothing.

SQLite: `PRAGMA data_version` on a connection of the feed's own changes whenever another connection
(of any process) commits a change; reading it costs a few microseconds, so the feed checks it every
`SQLITE_INTERVAL` seconds, and only while someone waits; the fingerprints are read when it moved.

However many pages or claims wait, one of them does the watching for all (the others wait on an
event); when nobody waits, nothing runs.
"""

from __future__ import annotations

import logging
import sqlite3
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from mcp_harness.store.connection import Query
from mcp_harness.store.urls import pg_dsn, sqlite_path

log = logging.getLogger(__name__)
CHANNEL = "mcp_harness_change"
#: run at the end of every PostgreSQL write transaction: a NOTIFY only if the transaction wrote
#: (a transaction id is assigned on the first write), so a claim that found nothing wakes nobody
NOTIFY_WRITES = Query(
    f"SELECT pg_notify('{CHANNEL}', '') WHERE pg_current_xact_id_if_assigned() IS NOT NULL", name="NOTIFY_WRITES"
)
SQLITE_INTERVAL = 0.025  #: seconds between `data_version` checks while someone waits
PG_FALLBACK_INTERVAL = 1.0  #: seconds between fingerprint reads for writes that sent no NOTIFY (single statements)

#: What every write of a workspace changes: its task counts (kept by triggers on every status change,
#: claims included), its row in `workspaces` (progress), its threads (checkpoints) and its schemas.
#: PostgreSQL sums the rows' `xmin` (the transaction that last wrote each row); SQLite has no such
#: column but serial writers: the values themselves. Each reads a few rows through a primary key or
#: an index, however large the workspace.
FINGERPRINT = {
    "postgresql": (
        "SELECT concat_ws(',', "
        "(SELECT coalesce(sum(xmin::text::bigint), 0) FROM task_counts WHERE workspace = $1), "
        "(SELECT coalesce(sum(xmin::text::bigint), 0) FROM workspaces WHERE name = $1), "
        "(SELECT coalesce(sum(xmin::text::bigint), 0) FROM threads WHERE workspace = $1), "
        "(SELECT coalesce(sum(xmin::text::bigint), 0) FROM state_schemas WHERE workspace = $1))"
    ),
    "sqlite": (
        "SELECT (SELECT coalesce(group_concat(status || ':' || blocked || ':' || n), '') FROM task_counts "
        "WHERE workspace = ?1) "
        "|| ',' || (SELECT coalesce(max(progress_seq), 0) FROM workspaces WHERE name = ?1) "
        "|| ',' || (SELECT coalesce(sum(latest_version), 0) || ':' || count(*) FROM threads WHERE workspace = ?1) "
        "|| ',' || (SELECT count(*) FROM state_schemas WHERE workspace = ?1)"
    ),
}
_REMEMBERED = 10_000  #: fingerprints kept for workspaces nobody waits on any more (then forgotten)


class ChangeFeed:
    """Commits by any process, per workspace, as version numbers that grow (see the module docstring)."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._is_sqlite = not url.startswith("postgresql")
        self._versions: dict[str, int] = {}  #: workspace -> grows with each change seen there
        self._watched: Counter[str] = Counter()  #: workspaces someone waits on now, and how many wait
        #: how often the waiters now want SQLite looked at (the watcher looks as often as the most eager)
        self._intervals: Counter[float] = Counter()
        self._prints: dict[str, str | None] = {}  #: workspace -> its last fingerprint
        self.claim_waits = 0  #: times a claim waited for work (`wait_until` calls), for metrics
        self._event = anyio.Event()  #: set (and replaced) whenever a version moves
        self._signal = anyio.Event()  #: PostgreSQL: set by a NOTIFY (something in this database changed)
        self._watching = False
        self._sqlite: sqlite3.Connection | None = None
        self._data_version: int | None = None
        self._listener: Any = None  # asyncpg connection LISTENing on CHANNEL
        self._connect_lock = anyio.Lock()

    def version_of(self, workspace: str) -> int:
        """The workspace's version now: compare it with a later one, never interpret it."""
        return self._versions.get(workspace, 0)

    def _bump(self, workspaces: Any) -> None:
        for workspace in workspaces:
            self._versions[workspace] = self._versions.get(workspace, 0) + 1
        self._wake()

    def _wake(self) -> None:
        self._event.set()
        self._event = anyio.Event()

    def _notified(self, *_args: Any) -> None:
        """A NOTIFY: some transaction of this database committed a write; the watcher looks which."""
        self._signal.set()

    async def wait(
        self,
        seen: int,
        timeout: float,
        *,
        workspace: str,
        also: anyio.Event | None = None,
        interval: float = SQLITE_INTERVAL,
    ) -> int:
        """Wait until the workspace's version moves past `seen` (a commit there by any process), `also`
        is set, or `timeout` seconds pass; returns the workspace's version then. `interval`: how soon
        after a commit a SQLite waiter must hear of it (a waiter that can wait longer, such as an idle
        runner, asks for a longer one and costs less CPU)."""
        self._watched[workspace] += 1
        self._intervals[interval] += 1
        try:
            with anyio.move_on_after(timeout):
                while self.version_of(workspace) == seen and not (also is not None and also.is_set()):
                    if self._watching:
                        event = self._event
                        if also is None:
                            await event.wait()
                        else:
                            await _first(event, also)
                        continue
                    self._watching = True
                    try:
                        await self._watch(workspace, seen, also)
                    finally:
                        self._watching = False
                        self._wake()  # hand the watching over to another waiter, if any
        finally:
            self._watched[workspace] -= 1
            if self._watched[workspace] <= 0:
                del self._watched[workspace]
            self._intervals[interval] -= 1
            if self._intervals[interval] <= 0:
                del self._intervals[interval]
        return self.version_of(workspace)

    async def wait_until(
        self,
        check: Callable[[], Awaitable[bool]],
        timeout: float,
        *,
        workspace: str,
        recheck: float,
        local: anyio.Event,
    ) -> bool:
        """For a waiting claim: return True as soon as `local` is set (a change by this process) or
        `check()` (a cheap read) says yes, which it is asked after every commit seen in the workspace
        and every `recheck` seconds (the clock alone makes work claimable: leases run out, backoffs
        end). False at timeout."""
        self.claim_waits += 1
        until = anyio.current_time() + timeout
        seen = self.version_of(workspace)
        while (left := until - anyio.current_time()) > 0:
            seen = await self.wait(seen, min(recheck, left), workspace=workspace, also=local)
            if local.is_set() or await check():
                return True
        return False

    def _done(self, workspace: str, seen: int, also: anyio.Event | None) -> bool:
        return self.version_of(workspace) != seen or (also is not None and also.is_set())

    async def _watch(self, workspace: str, seen: int, also: anyio.Event | None) -> None:
        """Look for commits until one is seen in `workspace` (or the caller's wait ends by timeout or
        `also`), waking the waiters of every other workspace that changed meanwhile."""
        if self._is_sqlite:
            while not self._done(workspace, seen, also):
                if self._sqlite_changed():
                    self._compare({ws: self._sqlite_print(ws) for ws in list(self._watched)})
                if not self._done(workspace, seen, also):
                    pause = min(self._intervals, default=SQLITE_INTERVAL)
                    with anyio.move_on_after(pause):
                        await (also.wait() if also is not None else anyio.sleep(pause))
            return
        while not self._done(workspace, seen, also):
            try:
                listener = await self._pg_listener()
                self._signal = anyio.Event()  # what commits after this look is heard next time
                prints = {ws: await listener.fetchval(FINGERPRINT["postgresql"], ws) for ws in list(self._watched)}
            except Exception as exc:  # noqa: BLE001 - the database is away: waiters fall back to their checks
                log.warning("change feed: cannot listen for changes (%s); retrying", type(exc).__name__)
                self._listener = None
            else:
                self._compare(prints)
            if self._done(workspace, seen, also):
                return
            with anyio.move_on_after(PG_FALLBACK_INTERVAL):
                await _first(self._signal, *((also,) if also is not None else ()))

    def _compare(self, prints: dict[str, str | None]) -> None:
        """Bump the workspaces whose fingerprint moved (one seen for the first time only sets its
        baseline)."""
        changed = []
        for ws, now in prints.items():
            if ws in self._prints and self._prints[ws] != now:
                changed.append(ws)
            self._prints[ws] = now
        if len(self._prints) > _REMEMBERED:
            self._prints = {ws: self._prints[ws] for ws in self._watched if ws in self._prints}
        if changed:
            self._bump(changed)

    def _sqlite_changed(self) -> bool:
        """Whether another connection committed since the last look (always True on the first look,
        so new waiters get their baseline)."""
        if self._sqlite is None:
            path = sqlite_path(self._url)
            if not path or path == ":memory:":
                return False  # nothing to watch: another connection could not see this database anyway
            self._sqlite = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            current = self._sqlite.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error as exc:  # waiters fall back to their own checks; the next look tries again
            log.warning("change feed: cannot read data_version (%s)", exc)
            return False
        moved = current != self._data_version or any(ws not in self._prints for ws in self._watched)
        self._data_version = current
        return moved

    def _sqlite_print(self, workspace: str) -> str | None:
        assert self._sqlite is not None
        try:
            return self._sqlite.execute(FINGERPRINT["sqlite"], (workspace,)).fetchone()[0]
        except sqlite3.Error as exc:
            log.warning("change feed: cannot read a workspace's fingerprint (%s)", exc)
            return self._prints.get(workspace)

    async def _pg_listener(self) -> Any:
        async with self._connect_lock:
            if self._listener is None or self._listener.is_closed():
                import asyncpg

                listener = await asyncpg.connect(pg_dsn(self._url)[0], timeout=10)
                await listener.add_listener(CHANNEL, self._notified)
                listener.add_termination_listener(self._lost)
                self._listener = listener
        return self._listener

    def _lost(self, *_args: Any) -> None:
        """The LISTEN connection ended (a server restart): reconnect on the next wait, and assume a
        change everywhere, since notifications may have been missed."""
        self._listener = None
        self._bump(list(self._watched))

    async def close(self) -> None:
        if self._sqlite is not None:
            self._sqlite.close()
            self._sqlite = None
        if self._listener is not None:
            listener, self._listener = self._listener, None
            listener.remove_termination_listener(self._lost)
            await listener.close()


async def _first(*events: anyio.Event) -> None:
    """Return when any of the events is set."""
    async with anyio.create_task_group() as tg:
        for event in events:

            async def waiter(e: anyio.Event = event) -> None:
                await e.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(waiter)


_feeds: weakref.WeakKeyDictionary[Any, ChangeFeed] = weakref.WeakKeyDictionary()


def feed(db: Any) -> ChangeFeed:
    """The change feed of this process for `db` (a `Database`), made on first use."""
    found = _feeds.get(db)
    if found is None:
        found = _feeds[db] = ChangeFeed(db.url)
    return found


async def close(db: Any) -> None:
    """Close the feed of `db`, if it has one (when the database is closed)."""
    found = _feeds.pop(db, None)
    if found is not None:
        await found.close()
