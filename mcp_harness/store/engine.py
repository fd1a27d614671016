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

PostgreSQL: one pooled asyncpg engine; row locks (`FOR UPDATE`, `SKIP LOCKED`) do the ordering.
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from sqlalchemy import Connection, create_engine, event, make_url, text
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import AsyncAdaptedQueuePool, StaticPool

from ..errors import HarnessError, Internal, Unavailable
from .migrations import migrate
from .raw import asyncpg_errors, pg_error, runnable

log = logging.getLogger(__name__)

SQLITE_BUSY_TIMEOUT_MS = 30_000


#: `wal_autocheckpoint` 300 pages (~1.2 MB): a freshly opened database appends to a growing WAL
#: file until the first checkpoint rewinds it, and a commit that grows the file costs nearly twice
#: one that reuses it (saves measured ~450 us vs ~250 us here); SQLite's default of 1,000 pages
#: kept a new server in that phase for its first ~200 saves. Checkpointing 300 pages costs little.
PRAGMAS = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = FULL",
    "PRAGMA foreign_keys = ON",
    "PRAGMA wal_autocheckpoint = 300",
)


def _apply_pragmas(dbapi_conn: Any) -> None:
    """Set up a new connection. Switching a brand-new file to WAL needs an exclusive lock, and SQLite
    answers BUSY at once (without its busy handler) when several processes open the file together:
    retry briefly. Blocking here is fine: it happens once, when a connection is made."""
    dbapi_conn.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    for pragma in PRAGMAS:
        while True:
            try:
                dbapi_conn.execute(pragma)
                break
            except Exception as exc:  # noqa: BLE001 - sqlite3's or the aiosqlite adapter's OperationalError
                if "locked" not in str(exc).lower() or time.monotonic() > deadline:
                    raise
                time.sleep(random.uniform(0.005, 0.02))


def _sqlite_reader(url: str, pool_size: int) -> AsyncEngine:
    engine = create_async_engine(
        url, poolclass=AsyncAdaptedQueuePool, pool_size=pool_size, max_overflow=0, pool_timeout=60
    )

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn, _record):  # noqa: ANN001 - SQLAlchemy's listener signature
        # Turn off the sqlite3 module's own transaction handling: we emit BEGIN ourselves.
        dbapi_conn.isolation_level = None
        _apply_pragmas(dbapi_conn)

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn):  # noqa: ANN001
        conn.exec_driver_sql("BEGIN")

    return engine


def _sqlite_sync(url: str, *, writer: bool) -> Any:
    """A synchronous pysqlite engine holding one connection: the process's writer (BEGIN IMMEDIATE)
    or its short-read connection (deferred BEGIN)."""
    engine = create_engine(
        url.replace("sqlite+aiosqlite", "sqlite+pysqlite", 1),
        poolclass=StaticPool,
        connect_args={"check_same_thread": False},
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # noqa: ANN001
        dbapi_conn.isolation_level = None
        _apply_pragmas(dbapi_conn)
        if writer:
            # From now on never wait inside SQLite: `_begin_immediate` retries without blocking the
            # loop. Once BEGIN IMMEDIATE holds the write lock, WAL needs no other lock to write and
            # commit (the automatic checkpoint after a commit is PASSIVE and never waits).
            dbapi_conn.execute("PRAGMA busy_timeout = 0")

    @event.listens_for(engine, "begin")
    def _on_begin(conn):  # noqa: ANN001
        # The writer's transactions are opened on the driver (`_begin_immediate`); SQLAlchemy's own
        # begin, when a statement it runs starts one, then joins that transaction.
        if not conn.connection.dbapi_connection.in_transaction:
            conn.exec_driver_sql("BEGIN IMMEDIATE" if writer else "BEGIN")

    return engine


class _SyncConnection:
    """The subset of `AsyncConnection` the store uses, over a synchronous connection: awaiting it
    never suspends, so a write transaction runs start to commit without yielding the loop.

    Statements the store marked `prebuilt` run straight on the sqlite3 connection with SQL compiled
    once (SQLAlchemy's per-execution work costs ~15 us, the SQL itself often ~2 us)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.dialect = conn.dialect
        self._raw = conn.connection.dbapi_connection

    async def execute(self, statement: Any, parameters: Any = None) -> Any:
        compiled = runnable(statement, parameters, self.dialect)
        if compiled is not None:
            return compiled.run(self._raw, parameters)
        return self._conn.execute(statement, parameters)

    async def run_sync(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(self._conn, *args)


class _PgConnection:
    """A PostgreSQL transaction: an `AsyncConnection` in autocommit mode whose asyncpg connection
    is inside a transaction we opened, so SQLAlchemy statements and prebuilt statements run straight
    on asyncpg (compiled once, no per-execution SQLAlchemy work) share it. Without an
    `AsyncConnection` (`single()`, on asyncpg's own pool) only prebuilt statements may run."""

    def __init__(self, conn: AsyncConnection | None, driver: Any, dialect: Any) -> None:
        self._conn = conn
        self._driver = driver
        self.dialect = dialect

    async def execute(self, statement: Any, parameters: Any = None) -> Any:
        compiled = runnable(statement, parameters, self.dialect)
        if compiled is not None:
            return await compiled.run_async(self._driver, parameters)
        if self._conn is None:
            raise Internal("a statement that single() cannot run without SQLAlchemy reached it")
        return await self._conn.execute(statement, parameters)

    async def run_sync(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._conn is None:
            raise Internal("run_sync needs a transaction, not single()")
        return await self._conn.run_sync(fn, *args)


async def _keep_session(_connection: Any) -> None:
    """On release to asyncpg's pool: nothing to undo (`single()` sets no session state: no SET,
    LISTEN, cursors or advisory locks), so skip the reset query, a round trip per statement."""


def _end(conn: Connection, *, commit: bool) -> None:
    """End a writer transaction begun on the driver, and SQLAlchemy's view of it if a statement
    that went through SQLAlchemy made it begin one."""
    if conn.in_transaction():
        conn.commit() if commit else conn.rollback()
    else:
        raw = conn.connection.dbapi_connection
        raw.commit() if commit else raw.rollback()


def _is_busy(exc: Exception) -> bool:
    text = str(getattr(exc, "orig", None) or exc).lower()
    return "locked" in text or "busy" in text


class Database:
    """The connection to one database; `write()` and `read()` open one transaction each."""

    def __init__(self, url: str, *, pool_size: int = 5) -> None:
        self.url = url
        self.dialect = "postgresql" if url.startswith("postgresql") else "sqlite"
        if self.dialect == "sqlite":
            self._sync_writer = _sqlite_sync(url, writer=True)
            self._sync_reader = _sqlite_sync(url, writer=False)
            self._read_conn: Connection | None = None
            self._read_lock = anyio.Lock()
            self._sync_conn: Connection | None = None
            self._write_lock = anyio.Lock()
            self._async_engine = _sqlite_reader(url, max(2, pool_size))
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
            return
        async with _wrap_errors(), self._write_lock:
            conn = await self._begin_immediate()
            try:
                yield _SyncConnection(conn)  # type: ignore[misc]
            except BaseException:
                _end(conn, commit=False)
                raise
            _end(conn, commit=True)

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
                    yield _PgConnection(None, driver, self._async_engine.dialect)  # type: ignore[misc]
            except (OSError, asyncpg_errors()) as exc:  # acquiring: the server is unreachable
                raise pg_error(exc) from exc

    async def _make_driver_pool(self) -> Any:
        """asyncpg's pool, next to SQLAlchemy's: a statement that needs no transaction skips the
        SQLAlchemy pool's check-out and check-in (greenlet hops: a third of a claim's Python time)."""
        import asyncpg

        async with self._driver_pool_lock:
            if self._driver_pool is None:
                url = make_url(self.url)
                query = dict(url.query)
                cache = query.pop("prepared_statement_cache_size", None)  # SQLAlchemy's name for it
                dsn = url.set(drivername="postgresql", query=query).render_as_string(hide_password=False)
                self._driver_pool = await asyncpg.create_pool(
                    dsn, min_size=1, max_size=self._pool_size, max_inactive_connection_lifetime=1800,
                    statement_cache_size=int(cache) if cache is not None else 100, reset=_keep_session,
                )  # fmt: skip
        return self._driver_pool

    @asynccontextmanager
    async def _pg_transaction(self, **options: Any) -> AsyncIterator[AsyncConnection]:
        """One PostgreSQL transaction, opened and committed on asyncpg itself (see `_PgConnection`)."""
        async with self._async_engine.connect() as conn:
            driver = conn.sync_connection.connection.driver_connection  # set up by connect(): no I/O
            try:
                async with driver.transaction(**options):
                    yield _PgConnection(conn, driver, conn.dialect)  # type: ignore[misc]
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
                if not _is_busy(exc) or anyio.current_time() > deadline:
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
            conn.begin()
            try:
                yield _SyncConnection(conn)  # type: ignore[misc]
            finally:
                conn.rollback()  # nothing to keep: end the read snapshot

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
        if _is_busy(exc):
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
