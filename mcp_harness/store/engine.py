"""The database: one connection path per backend. Driver and SQLAlchemy errors become
`HarnessError`s at this edge (`errors.py`).

PostgreSQL: ONE asyncpg pool per process (plus the change feed's LISTEN connection, `changes.py`).
`write()` and `read()` open a transaction on a pooled connection; `single()` runs one statement in
autocommit on one (no BEGIN/COMMIT, two round trips fewer); row locks (`FOR UPDATE`, `SKIP LOCKED`)
do the ordering. The cold paths (export/import, prune) use SQLAlchemy over the declared tables, and
its engine holds no pool: `cold_read()`/`cold_write()` borrow a connection from the same asyncpg
pool, open the transaction on it and hand it to SQLAlchemy (`cold.py`). At most `pool_size` + 1
connections per process.

SQLite: the event-loop fast path is sqlite3. One writer connection per process, used from the
event-loop thread (a write transaction is a few microseconds of SQL plus one fsync; running it
through aiosqlite costs several cross-thread hops per statement, which dominated the cost of a
claim). Every write transaction opens with `BEGIN IMMEDIATE` (no lock upgrades, so no "database is
locked" from them). The write lock is acquired with `busy_timeout=0` and retried after jittered
async sleeps of about a millisecond, so a process waiting for another process's write neither blocks
its event loop nor oversleeps in SQLite's busy handler. In-process writers queue on an `anyio.Lock`.
Short reads run on a second sqlite3 connection, also on the loop thread. WAL with `synchronous=FULL`:
an acknowledged write survives power loss. The cold paths alone use the async engine, SQLAlchemy over
aiosqlite (a worker thread, so a long read never blocks the loop; writes still queue on the process's
write lock).

Migrations run on the fast path (`migrations.py`: literal SQL files), so opening a database, and a
session's first call, never import SQLAlchemy; `cold.py` is imported by the first cold path.
"""

from __future__ import annotations

import math
import os
import random
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from mcp_harness.errors import Unavailable
from mcp_harness.store import named
from mcp_harness.store.changes import NOTIFY_WRITES
from mcp_harness.store.conditions import FULL, PG_READ_ONLY, sqlite_space, sqlite_writable
from mcp_harness.store.connection import Connection, StorageError
from mcp_harness.store.errors import connect_refused, wrap_errors
from mcp_harness.store.migrations import SCHEMA_VERSION, current_version, migrate
from mcp_harness.store.postgres import PgConnection, driver_pool
from mcp_harness.store.search import over_time_limit
from mcp_harness.store.sqlite import (
    CHECKPOINT_EVERY,
    SQLITE_BUSY_TIMEOUT_MS,
    Deadline,
    SqliteConnection,
    ThreadedSqliteConnection,
    checkpoint,
    connect,
    connect_searcher,
    create_private,
    end_transaction,
    interrupted,
    is_busy,
)
from mcp_harness.store.urls import display, sqlite_path

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

Q = named.load("health")
SEARCH = named.load("search_run")
#: how many searches run at once on SQLite (each on a worker thread and a connection of its own)
SQLITE_SEARCHERS = 4
#: the pause between two tries for SQLite's write lock while another process holds it (jittered by
#: half either way); the event loop's timers fire no sooner than about a millisecond (epoll's
#: granularity), so a shorter pause would not be a shorter wait
WRITE_RETRY = 0.001
#: how long `ping` says "full" after a write met a full disk (unless a write succeeds first): a
#: PostgreSQL server's disk, or a SQLite file at its size limit, is seen only by the writes
FULL_HELD_SECONDS = 30.0


class Database:
    """The connection to one database. `write()`, `read()` and `single()` yield a `Connection` for
    named queries (`named.py`); `cold_read()` and `cold_write()` a SQLAlchemy `AsyncConnection`."""

    def __init__(self, url: str, *, pool_size: int = 5) -> None:
        self.url = url
        self.dialect = "postgresql" if url.startswith("postgresql") else "sqlite"
        self._pool_size = pool_size
        # fast_acquire: a free lock is taken without a trip round the event loop (anyio's default
        # yields on every acquire, a noticeable share of a stdio round trip on a small machine).
        # Waiting for a held lock is unchanged; a transaction never yields until it ends anyway.
        self._write_lock = anyio.Lock(fast_acquire=True)
        self._read_lock = anyio.Lock(fast_acquire=True)
        self._writer: sqlite3.Connection | None = None  # SQLite: made on first use, as is the reader
        self._commits = 0  # SQLite: this process's write transactions, for its checkpoints
        self._reader: sqlite3.Connection | None = None
        self._searchers: list[tuple[sqlite3.Connection, Deadline]] = []  # SQLite: idle search connections
        self._search_slots = anyio.Semaphore(SQLITE_SEARCHERS, fast_acquire=True)
        self._page_slot = anyio.Lock(fast_acquire=True)  # SQLite: one person's page read at a time
        self._full: tuple[str, float] | None = None  # the last write that met a full disk: (why, when)
        self._pool: Any = None  # PostgreSQL: the process's one asyncpg pool, made on first use
        self._pool_lock = anyio.Lock()
        self._cold: AsyncEngine | None = None  # SQLAlchemy, made by the first cold path (`cold.py`)
        if self.dialect == "sqlite":
            create_private(url)

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    async def open(self) -> None:
        """Create or upgrade the schema (guarded against servers starting at once). A failure names
        the database (its file, or its URL without the password). The schema's version is read first:
        a database already up to date is opened without a write transaction, so opening never waits
        behind another process's long write."""
        try:
            async with self.read() as conn:
                if await current_version(conn) == SCHEMA_VERSION:
                    return
            async with self.write() as conn:
                await migrate(conn)
        except Unavailable as exc:
            raise Unavailable(f"{self.name}: {exc.message}", damaged=exc.damaged) from exc
        except StorageError as exc:  # no such database, or the sign-in was refused: said so, no traceback
            refused = connect_refused(exc.__cause__, self.url)
            if refused is None:
                raise
            raise refused from None

    @property
    def name(self) -> str:
        """The database for people: a SQLite file's path, or the URL without its password."""
        return display(self.url)

    async def close(self) -> None:
        for conn in (self._writer, self._reader, *(c for c, _ in self._searchers)):
            if conn is not None:
                conn.close()
        self._writer = self._reader = None
        self._searchers.clear()
        # Shielded: a server stopped by a signal closes while its tasks are being cancelled, and a
        # cancelled close leaves connections behind.
        with anyio.CancelScope(shield=True):
            if self._cold is not None:
                await self._cold.dispose()
                self._cold = None
            if self._pool is not None:
                await self._pool.close()
                self._pool = None

    # -- hot paths: literal SQL on a `Connection` --------------------------------------------------
    @asynccontextmanager
    async def write(self) -> AsyncIterator[Connection]:
        """A write transaction: committed when the block ends, rolled back on any error. One that meets
        a full disk is remembered for `ping`; one that commits forgets it."""
        try:
            async with self._write() as conn:
                yield conn
        except Unavailable as exc:
            if exc.message in FULL:
                self._full = (exc.message, time.monotonic())
            raise
        self._full = None

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[Connection]:
        if not self.is_sqlite:
            async with wrap_errors(), self._pg_transaction() as driver:
                conn = PgConnection(driver)
                yield conn
                await conn.execute(NOTIFY_WRITES)  # the change feed of every process hears of this commit
            return
        async with wrap_errors(), self._write_lock:
            db = await self._begin_immediate()
            try:
                yield SqliteConnection(db)
            except BaseException:
                end_transaction(db, commit=False)
                raise
            end_transaction(db, commit=True)
            self._commits += 1
            if self._commits % CHECKPOINT_EVERY == 0:  # the writer's checkpoints (see `sqlite.WRITER_PRAGMAS`)
                checkpoint(db)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[Connection]:
        """A short read transaction (deferred on SQLite: it takes no lock a writer waits for). On
        SQLite it runs on the loop thread like writes do; a read that streams for long, or that
        awaits anything but the store inside, belongs in `cold_read()`."""
        if not self.is_sqlite:
            async with wrap_errors(), self._pg_transaction() as driver:
                yield PgConnection(driver)
            return
        async with wrap_errors(), self._read_lock:
            if self._reader is None:
                self._reader = connect(self.url, writer=False)
            conn = self._reader
            conn.execute("BEGIN")
            try:
                yield SqliteConnection(conn)
            finally:
                end_transaction(conn, commit=False)  # nothing to keep: end the read snapshot

    @asynccontextmanager
    async def search_read(self, seconds: float) -> AsyncIterator[Connection]:
        """A read transaction that runs a full-text search, which the query's words may make long: its
        statements together are stopped after `seconds` (`over_time_limit` says so), and on SQLite they
        run on a worker thread, on a connection of their own, so neither the event loop nor the other
        reads wait for them (on PostgreSQL the driver awaits the server without holding the loop)."""
        if not self.is_sqlite:
            async with wrap_errors(), self._pg_transaction() as driver:
                conn = PgConnection(driver)
                await conn.fetch_value(SEARCH.search_time_limit, {"ms": str(max(1, round(seconds * 1000)))})
                try:
                    yield conn
                except Exception as exc:
                    if getattr(exc, "sqlstate", None) == "57014":  # query_canceled: the time limit
                        raise over_time_limit(seconds) from None
                    raise
            return
        async with wrap_errors(), self._search_slots:
            if self._searchers:
                db, deadline = self._searchers.pop()
            else:
                db, deadline = await anyio.to_thread.run_sync(connect_searcher, self.url)
                # the tables a search ranks in, made once (made in a read transaction, the rollback ending
                # it would take them away again)
                await anyio.to_thread.run_sync(db.execute, SEARCH.progress_rank_table.sqlite)
            reusable = False
            try:
                deadline.at = time.monotonic() + seconds
                try:
                    yield ThreadedSqliteConnection(db, begin=True)
                except Exception as exc:
                    if interrupted(exc):
                        raise over_time_limit(seconds) from None
                    raise
                finally:
                    deadline.at = float("inf")
                    if db.in_transaction:  # a statement ran (a BEGIN that failed left none)
                        with anyio.CancelScope(shield=True):  # a cancelled search still ends its read
                            await anyio.to_thread.run_sync(partial(end_transaction, db, commit=False))
                    reusable = True
            finally:
                if reusable:
                    self._searchers.append((db, deadline))
                else:
                    db.close()  # in whatever state it was left: never handed out again

    @asynccontextmanager
    async def page_read(self) -> AsyncIterator[Connection]:
        """A read for a person's page (the console), which may be heavy: on SQLite it runs on a worker
        thread, on a connection of its own, one page at a time, so neither the event loop nor the agents'
        reads wait for it while it reads (on PostgreSQL as `read()`: the driver awaits the server)."""
        if not self.is_sqlite:
            async with self.read() as conn:
                yield conn
            return
        async with self._page_slot, self.search_read(math.inf) as conn:  # a searcher's connection, no time limit
            yield conn

    @asynccontextmanager
    async def single(self) -> AsyncIterator[Connection]:
        """For work that is ONE write statement (atomic by itself), and reads that need no snapshot with
        it: on PostgreSQL each runs in autocommit on one pooled connection, without BEGIN/COMMIT (two
        round trips fewer); on SQLite it is a write transaction like any other."""
        if self.is_sqlite:
            async with self.write() as conn:
                yield conn
            return
        async with wrap_errors():
            pool = self._pool or await self._make_pool()
            async with pool.acquire() as driver:
                yield PgConnection(driver)

    async def _make_pool(self) -> Any:
        async with self._pool_lock:
            if self._pool is None:
                self._pool = await driver_pool(self.url, self._pool_size)
        return self._pool

    @asynccontextmanager
    async def _pg_transaction(self, **options: Any) -> AsyncIterator[Any]:
        """A transaction on a connection of the pool; yields asyncpg's connection."""
        pool = self._pool or await self._make_pool()
        async with pool.acquire() as driver, driver.transaction(**options):
            yield driver

    async def _begin_immediate(self) -> sqlite3.Connection:
        """Take SQLite's write lock without blocking the event loop while another process holds it."""
        if self._writer is None:
            self._writer = connect(self.url, writer=True)
        conn = self._writer
        deadline = anyio.current_time() + SQLITE_BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return conn
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or anyio.current_time() > deadline:
                    raise
            # SQLite's lock has no queue: it stands free until a waiter's next try, so the tries stay
            # as close together as the loop's timers allow, however long the wait.
            await anyio.sleep(WRITE_RETRY * random.uniform(0.5, 1.5))

    # -- cold paths: SQLAlchemy ---------------------------------------------------------------------
    def _cold_engine(self) -> AsyncEngine:
        if self._cold is None:
            from mcp_harness.store import cold

            self._cold = (
                cold.sqlite_engine(self.url, max(2, self._pool_size)) if self.is_sqlite else cold.pg_engine(self.url)
            )
        return self._cold

    @asynccontextmanager
    async def cold_read(self) -> AsyncIterator[AsyncConnection]:
        """A read transaction through SQLAlchemy, for reads that stream or run long: on a worker
        thread on SQLite; one repeatable-read snapshot on PostgreSQL, so an export is consistent."""
        if not self.is_sqlite:
            async with wrap_errors(), self._cold_pg_transaction(isolation="repeatable_read", readonly=True) as conn:
                yield conn
            return
        async with wrap_errors(), self._cold_engine().begin() as conn:
            yield conn

    @asynccontextmanager
    async def cold_write(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction through SQLAlchemy, for the cold paths (import, prune). On SQLite it
        holds the process's write lock like `write()`, on a worker-thread connection."""
        if not self.is_sqlite:
            async with wrap_errors(), self._cold_pg_transaction() as conn:
                yield conn
            return
        async with wrap_errors(), self._write_lock, self._cold_engine().connect() as conn:
            await conn.execution_options(write=True)  # BEGIN IMMEDIATE (see `cold.sqlite_engine`)
            async with conn.begin():
                yield conn

    @asynccontextmanager
    async def _cold_pg_transaction(self, **options: Any) -> AsyncIterator[AsyncConnection]:
        """A transaction opened on a connection borrowed from the pool, which SQLAlchemy's statements
        join: its engine is in autocommit mode (it emits no BEGIN of its own) and has no pool."""
        from mcp_harness.store.cold import BORROWED

        engine = self._cold_engine()
        async with self._pg_transaction(**options) as driver:
            token = BORROWED.set(driver)
            pending = True  # reset once SQLAlchemy holds the connection, or on the way out
            try:
                async with engine.connect() as conn:
                    BORROWED.reset(token)
                    pending = False
                    yield conn
            finally:
                if pending:
                    BORROWED.reset(token)

    # -- maintenance -------------------------------------------------------------------------------
    async def vacuum(self) -> None:
        """Give freed pages back to the file system (SQLite: VACUUM, then checkpoint the WAL;
        PostgreSQL: VACUUM the tables prune shrinks). Runs outside any transaction."""
        if not self.is_sqlite:
            async with self.single() as conn:
                await conn.execute(Q.vacuum_pruned)
            return
        async with wrap_errors(), self._write_lock:
            if self._writer is None:
                self._writer = connect(self.url, writer=True)
            db = self._writer
            db.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")  # maintenance may wait
            try:
                db.execute("VACUUM")
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                db.execute("PRAGMA busy_timeout = 0")

    async def size_bytes(self) -> int:
        """Bytes the database takes on disk (SQLite: the file and its WAL)."""
        if self.is_sqlite:
            path = sqlite_path(self.url)
            return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
        async with self.read() as conn:
            return int(await conn.fetch_value(Q.database_size))

    async def ping(self) -> None:
        """Raise `Unavailable` unless the database answers a trivial query and would take a write
        (a read-only database answers reads, and only its writes fail; nor on a full disk: SQLite's file
        system is looked at, and a write that met a full disk is said for `FULL_HELD_SECONDS`)."""
        async with self.read() as conn:
            answer = await conn.fetch_value(Q.ping)
        if answer == "on":
            raise Unavailable(PG_READ_ONLY)
        if self._full is not None and time.monotonic() - self._full[1] < FULL_HELD_SECONDS:
            raise Unavailable(self._full[0])
        path = sqlite_path(self.url) if self.is_sqlite else None
        if path and path != ":memory:" and not path.startswith("file:"):
            sqlite_writable(path)
            sqlite_space(path)
