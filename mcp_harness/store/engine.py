"""Engines and transactions for SQLite and PostgreSQL; driver errors become `HarnessError`s here.

SQLite writes: one connection per process, used from the event-loop thread (a write transaction is
a few microseconds of SQL plus one fsync; running it through aiosqlite costs several cross-thread
hops per statement, which dominated the cost of a claim). Every write transaction opens with
`BEGIN IMMEDIATE` (no lock upgrades, so no "database is locked" from them). The write lock is
acquired with `busy_timeout=0` and retried with short jittered async sleeps, so a process waiting
for another process's write neither blocks its event loop nor oversleeps in SQLite's busy handler.
In-process writers queue on an `anyio.Lock`. Reads are deferred transactions on a small aiosqlite
pool (threads: a long read never blocks the loop). WAL with `synchronous=FULL`: an acknowledged
write survives power loss.

PostgreSQL: transactions are opened on asyncpg under an autocommit SQLAlchemy engine, and work that
is one statement runs on asyncpg's own pool (`single()`); row locks (`FOR UPDATE`, `SKIP LOCKED`) do
the ordering. Connection set-up and wrappers: `sqlite.py`, `postgres.py`.
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from ..errors import HarnessError, Internal, Unavailable
from .changes import NOTIFY_WRITES
from .migrations import migrate
from .postgres import PgConnection, driver_pool
from .raw import asyncpg_errors, pg_error
from .sqlite import SQLITE_BUSY_TIMEOUT_MS, SyncConnection, end_transaction, is_busy, sqlite_reader, sqlite_sync

log = logging.getLogger(__name__)


class Database:
    """The connection to one database; `write()` and `read()` open one transaction each."""

    def __init__(self, url: str, *, pool_size: int = 5) -> None:
        self.url = url
        self.dialect = "postgresql" if url.startswith("postgresql") else "sqlite"
        if self.dialect == "sqlite":
            self._sync_writer = sqlite_sync(url, writer=True)
            self._sync_reader = sqlite_sync(url, writer=False)
            self._read_conn: Connection | None = None
            # fast_acquire: a free lock is taken without a trip round the event loop (anyio's default
            # yields on every acquire: ~0.1 ms per call on a 2-core VM, a tenth of a stdio round trip).
            # Waiting for a held lock is unchanged; a transaction never yields until it ends anyway.
            self._read_lock = anyio.Lock(fast_acquire=True)
            self._sync_conn: Connection | None = None
            self._write_lock = anyio.Lock(fast_acquire=True)
            self._async_engine = sqlite_reader(url, max(2, pool_size))
        else:
            # Autocommit at the SQLAlchemy level: transactions are opened on asyncpg itself
            # (`_pg_transaction`), and `single()` runs without one.
            engine = create_async_engine(
                url, pool_size=pool_size, max_overflow=pool_size, pool_recycle=1800, pool_timeout=60,
                isolation_level="AUTOCOMMIT",
            )  # fmt: skip
            self._sync_writer = None
            self._async_engine = engine
            self._pool_size = pool_size
            self._driver_pool: Any = None  # asyncpg's own pool, for `single()`: made on first use
            self._driver_pool_lock = anyio.Lock()

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    async def open(self) -> None:
        """Create or upgrade the schema (guarded against servers starting at once)."""
        async with self.write() as conn:
            await migrate(conn, self.dialect)

    async def close(self) -> None:
        if self._sync_writer is not None:
            if self._sync_conn is not None:
                self._sync_conn.close()
                self._sync_conn = None
            self._sync_writer.dispose()
            if self._read_conn is not None:
                self._read_conn.close()
                self._read_conn = None
            self._sync_reader.dispose()
        elif self._driver_pool is not None:
            await self._driver_pool.close()
            self._driver_pool = None
        await self._async_engine.dispose()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction: committed when the block ends, rolled back on any error."""
        if self._sync_writer is None:
            async with _wrap_errors(), self._pg_transaction() as conn:
                yield conn
                await conn.execute(NOTIFY_WRITES)  # the change feed of every process hears of this commit
            return
        async with _wrap_errors(), self._write_lock:
            conn = await self._begin_immediate()
            try:
                yield SyncConnection(conn)  # type: ignore[misc]
            except BaseException:
                end_transaction(conn, commit=False)
                raise
            end_transaction(conn, commit=True)

    @asynccontextmanager
    async def single(self) -> AsyncIterator[AsyncConnection]:
        """For work that is ONE statement (atomic by itself): on PostgreSQL it runs without
        BEGIN/COMMIT, two round trips fewer; on SQLite it is a write transaction like any other."""
        if self._sync_writer is not None:
            async with self.write() as conn:
                yield conn
            return
        async with _wrap_errors():
            pool = self._driver_pool or await self._make_driver_pool()
            try:
                async with pool.acquire() as driver:
                    yield PgConnection(None, driver, self._async_engine.dialect)  # type: ignore[misc]
            except (OSError, asyncpg_errors()) as exc:  # acquiring: the server is unreachable
                raise pg_error(exc) from exc

    async def _make_driver_pool(self) -> Any:
        """asyncpg's pool, next to SQLAlchemy's: a statement that needs no transaction skips the
        SQLAlchemy pool's check-out and check-in (greenlet hops: a third of a claim's Python time)."""
        async with self._driver_pool_lock:
            if self._driver_pool is None:
                self._driver_pool = await driver_pool(self.url, self._pool_size)
        return self._driver_pool

    @asynccontextmanager
    async def _pg_transaction(self, **options: Any) -> AsyncIterator[AsyncConnection]:
        """One PostgreSQL transaction, opened and committed on asyncpg itself (see `PgConnection`)."""
        async with self._async_engine.connect() as conn:
            driver = conn.sync_connection.connection.driver_connection  # set up by connect(): no I/O
            try:
                async with driver.transaction(**options):
                    yield PgConnection(conn, driver, conn.dialect)  # type: ignore[misc]
            except DBAPIError:
                raise
            except Exception as exc:  # BEGIN/COMMIT failures arrive as asyncpg's own exceptions
                converted = pg_error(exc)
                if converted is exc:
                    raise
                raise converted from exc

    async def _begin_immediate(self) -> Connection:
        """Take SQLite's write lock without blocking the event loop while another process holds it."""
        if self._sync_conn is None:
            self._sync_conn = self._sync_writer.connect()
        conn = self._sync_conn
        raw = conn.connection.dbapi_connection
        deadline = anyio.current_time() + SQLITE_BUSY_TIMEOUT_MS / 1000
        delay = 0.0005
        while True:
            try:
                raw.execute("BEGIN IMMEDIATE")  # on the driver: SQLAlchemy's begin costs ~20 us more
                return conn
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or anyio.current_time() > deadline:
                    raise DBAPIError.instance("BEGIN IMMEDIATE", (), exc, sqlite3.Error) from exc
            await anyio.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 1.5, 0.005)

    async def vacuum(self) -> None:
        """Give freed pages back to the file system (SQLite: checkpoint the WAL, then VACUUM;
        PostgreSQL: VACUUM the tables prune shrinks). Runs outside any transaction."""
        if self._sync_writer is not None:
            async with _wrap_errors(), self._write_lock:
                if self._sync_conn is None:
                    self._sync_conn = self._sync_writer.connect()
                raw = self._sync_conn.connection.dbapi_connection
                raw.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")  # maintenance may wait
                try:
                    raw.execute("VACUUM")
                    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                finally:
                    raw.execute("PRAGMA busy_timeout = 0")
            return
        async with _wrap_errors(), self._async_engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text("VACUUM (ANALYZE) blobs, checkpoints"))

    async def size_bytes(self) -> int:
        """Bytes the database takes on disk (SQLite: the file and its WAL)."""
        if self._sync_writer is not None:
            path = self._sync_writer.url.database
            return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
        async with self.read() as conn:
            return int((await conn.execute(text("SELECT pg_database_size(current_database())"))).scalar_one())

    async def ping(self) -> None:
        """Raise `Unavailable` unless the database answers a trivial query."""
        async with self.read() as conn:
            await conn.execute(text("SELECT 1"))

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A short read transaction (deferred on SQLite: it takes no lock a writer waits for). On
        SQLite it runs on the loop thread like writes do; a read that streams for long, or that
        awaits anything but the store inside, belongs in `read_long()`."""
        if self._sync_writer is None:
            async with _wrap_errors(), self._pg_transaction() as conn:
                yield conn
            return
        async with _wrap_errors(), self._read_lock:
            if self._read_conn is None:
                self._read_conn = self._sync_reader.connect()
            conn = self._read_conn
            conn.connection.dbapi_connection.execute("BEGIN")  # on the driver, as writes are begun
            try:
                yield SyncConnection(conn)  # type: ignore[misc]
            finally:
                end_transaction(conn, commit=False)  # nothing to keep: end the read snapshot

    @asynccontextmanager
    async def read_long(self) -> AsyncIterator[AsyncConnection]:
        """A read transaction on a worker-thread connection, for reads that stream or run long
        (PostgreSQL: one repeatable-read snapshot, so an export is consistent)."""
        if self._sync_writer is None:
            async with _wrap_errors(), self._pg_transaction(isolation="repeatable_read", readonly=True) as conn:
                yield conn
            return
        async with _wrap_errors(), self._async_engine.begin() as conn:
            yield conn


@asynccontextmanager
async def _wrap_errors() -> AsyncIterator[None]:
    """Callers never see SQLAlchemy or driver types: map them to the contract's errors."""
    try:
        yield
    except HarnessError:
        raise
    except OperationalError as exc:
        if is_busy(exc):
            raise Unavailable("the database is busy (locked by another writer); retry shortly") from exc
        log.error("database operational error: %s", exc)
        raise Unavailable("the database is not reachable right now; retry shortly") from exc
    except (DBAPIError, OSError) as exc:
        if isinstance(exc, DBAPIError) and exc.connection_invalidated:
            raise Unavailable("the database connection was lost; retry shortly") from exc
        if isinstance(exc, OSError):
            raise Unavailable(f"the database is not reachable: {exc.strerror or exc}") from exc
        raise
    except SQLAlchemyError as exc:
        raise Internal("a storage error happened") from exc
