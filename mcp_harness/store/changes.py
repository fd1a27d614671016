"""The change feed: one per database per process, telling waiters that some process committed a write.

    feed = changes.feed(db)            # the process's feed for this database (made on first use)
    version = await feed.wait(version, timeout)          # returns once a commit is seen, or at timeout
    woken = await feed.wait_until(check, timeout, ...)   # a waiting claim: re-check on every commit

PostgreSQL: every write transaction ends with `NOTIFY` when it wrote anything (`NOTIFY_WRITES`, run
by `Database.write()` inside the transaction, so a listener hears of a commit, never of a rollback);
the feed LISTENs on one connection of its own. Single statements outside a transaction (claims and
leaf completions on asyncpg's pool) send no NOTIFY, which would double their round trips: while
someone waits, the feed also looks once a second whether any transaction id was handed out
(`pg_current_snapshot()`), which catches those for the console.

SQLite: `PRAGMA data_version` on a connection of the feed's own changes whenever another connection
(of any process) commits a change; reading it costs a few microseconds, so the feed checks it every
`SQLITE_INTERVAL` seconds, and only while someone waits.

However many pages or claims wait, one of them does the watching for all (the others wait on an
event); when nobody waits, nothing runs.
"""

from __future__ import annotations

import logging
import sqlite3
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from .connection import Query
from .urls import pg_dsn, sqlite_path

log = logging.getLogger(__name__)
CHANNEL = "mcp_harness_change"
#: run at the end of every PostgreSQL write transaction: a NOTIFY only if the transaction wrote
#: (a transaction id is assigned on the first write), so a claim that found nothing wakes nobody
NOTIFY_WRITES = Query(
    f"SELECT pg_notify('{CHANNEL}', '') WHERE pg_current_xact_id_if_assigned() IS NOT NULL", name="NOTIFY_WRITES"
)
SQLITE_INTERVAL = 0.025  #: seconds between `data_version` checks while someone waits
PG_XID_INTERVAL = 1.0  #: seconds between checks for writes that sent no NOTIFY (single statements)


class ChangeFeed:
    """Commits by any process, as a version number that grows (see the module docstring)."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._is_sqlite = not url.startswith("postgresql")
        self.version = 0  #: grows by one (or more) for each commit seen; compare, never interpret
        self.claim_waits = 0  #: times a claim waited for work (`wait_until` calls), for metrics
        self._event = anyio.Event()
        self._watching = False
        self._sqlite: sqlite3.Connection | None = None
        self._data_version: int | None = None
        self._listener: Any = None  # asyncpg connection LISTENing on CHANNEL
        self._xid: int | None = None
        self._connect_lock = anyio.Lock()

    def _bump(self, *_args: Any) -> None:
        self.version += 1
        self._wake()

    def _wake(self) -> None:
        self._event.set()
        self._event = anyio.Event()

    async def wait(self, seen: int, timeout: float, *, also: anyio.Event | None = None) -> int:
        """Wait until `version` moves past `seen` (a commit by any process), `also` is set, or `timeout`
        seconds pass; returns the version then."""
        with anyio.move_on_after(timeout):
            while self.version == seen and not (also is not None and also.is_set()):
                if self._watching:
                    event = self._event
                    if also is None:
                        await event.wait()
                    else:
                        await _first(event, also)
                    continue
                self._watching = True
                try:
                    await self._watch(seen, also)
                finally:
                    self._watching = False
                    self._wake()  # hand the watching over to another waiter, if any
        return self.version

    async def wait_until(
        self, check: Callable[[], Awaitable[bool]], timeout: float, *, recheck: float, local: anyio.Event
    ) -> bool:
        """For a waiting claim: return True as soon as `local` is set (a change by this process) or
        `check()` (a cheap read) says yes, which it is asked after every commit seen and every `recheck`
        seconds (the clock alone makes work claimable: leases run out, backoffs end). False at timeout."""
        self.claim_waits += 1
        until = anyio.current_time() + timeout
        seen = self.version
        while (left := until - anyio.current_time()) > 0:
            seen = await self.wait(seen, min(recheck, left), also=local)
            if local.is_set() or await check():
                return True
        return False

    async def _watch(self, seen: int, also: anyio.Event | None) -> None:
        """Look for commits until one is seen (or the caller's wait ends by timeout or `also`)."""
        if self._is_sqlite:
            while self.version == seen and not (also is not None and also.is_set()):
                self._check_sqlite()
                if self.version == seen:
                    with anyio.move_on_after(SQLITE_INTERVAL):
                        await (also.wait() if also is not None else anyio.sleep(SQLITE_INTERVAL))
            return
        while self.version == seen and not (also is not None and also.is_set()):
            try:
                listener = await self._pg_listener()
                xid = int(await listener.fetchval(_XID_SQL))
            except Exception as exc:  # noqa: BLE001 - the database is away: waiters fall back to their checks
                log.warning("change feed: cannot listen for changes (%s); retrying", type(exc).__name__)
                self._listener, xid = None, None
            if self._xid is not None and xid is not None and xid != self._xid:
                self._bump()
            self._xid = xid
            with anyio.move_on_after(PG_XID_INTERVAL):
                if also is None:
                    await self._event.wait()
                else:
                    await _first(self._event, also)

    def _check_sqlite(self) -> None:
        if self._sqlite is None:
            path = sqlite_path(self._url)
            if not path or path == ":memory:":
                return  # nothing to watch: another connection could not see this database anyway
            self._sqlite = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            current = self._sqlite.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error as exc:  # waiters fall back to their own checks; the next look tries again
            log.warning("change feed: cannot read data_version (%s)", exc)
            return
        if self._data_version is not None and current != self._data_version:
            self._bump()
        self._data_version = current

    async def _pg_listener(self) -> Any:
        async with self._connect_lock:
            if self._listener is None or self._listener.is_closed():
                import asyncpg

                listener = await asyncpg.connect(pg_dsn(self._url)[0], timeout=10)
                await listener.add_listener(CHANNEL, self._bump)
                listener.add_termination_listener(self._lost)
                self._listener = listener
                self._xid = None
        return self._listener

    def _lost(self, *_args: Any) -> None:
        """The LISTEN connection ended (a server restart): reconnect on the next wait, and assume a
        change, since notifications may have been missed."""
        self._listener = None
        self._bump()

    async def close(self) -> None:
        if self._sqlite is not None:
            self._sqlite.close()
            self._sqlite = None
        if self._listener is not None:
            listener, self._listener = self._listener, None
            listener.remove_termination_listener(self._lost)
            await listener.close()


_XID_SQL = "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint"


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
