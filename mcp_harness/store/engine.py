"""Engines and transactions for SQLite and PostgreSQL; driver errors become `HarnessError`s here.

SQLite: one writer connection per process (writes queue in-process instead of fighting for the file
lock in SQLite's sleeping busy handler), every write transaction opened with `BEGIN IMMEDIATE` (no
lock upgrades, so no "database is locked" from them), reads deferred on a small pool of their own,
WAL with `synchronous=FULL` so an acknowledged write survives power loss.

PostgreSQL: one pooled engine; row locks (`FOR UPDATE`, `SKIP LOCKED`) do the ordering.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import event
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import AsyncAdaptedQueuePool

from ..errors import HarnessError, Internal, Unavailable
from .migrations import migrate

log = logging.getLogger(__name__)

SQLITE_BUSY_TIMEOUT_MS = 30_000


def _sqlite_engine(url: str, *, writer: bool, pool_size: int) -> AsyncEngine:
    engine = create_async_engine(
        url, poolclass=AsyncAdaptedQueuePool, pool_size=pool_size, max_overflow=0, pool_timeout=60
    )

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn, _record):  # noqa: ANN001 - SQLAlchemy's listener signature
        # Turn off the sqlite3 module's own transaction handling: we emit BEGIN ourselves.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        for pragma in (
            f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}",
            "PRAGMA journal_mode = WAL",
            "PRAGMA synchronous = FULL",
            "PRAGMA foreign_keys = ON",
        ):
            cur.execute(pragma)
        cur.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn):  # noqa: ANN001
        conn.exec_driver_sql("BEGIN IMMEDIATE" if writer else "BEGIN")

    return engine


class Database:
    """The connection to one database; `write()` and `read()` open one transaction each."""

    def __init__(self, url: str, *, pool_size: int = 5) -> None:
        self.url = url
        self.dialect = "postgresql" if url.startswith("postgresql") else "sqlite"
        if self.dialect == "sqlite":
            self._writer = _sqlite_engine(url, writer=True, pool_size=1)
            self._reader = _sqlite_engine(url, writer=False, pool_size=max(2, pool_size))
        else:
            engine = create_async_engine(
                url, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True, pool_timeout=60
            )
            self._writer = self._reader = engine

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    async def open(self) -> None:
        """Create or upgrade the schema (guarded against servers starting at once)."""
        async with self.write() as conn:
            await migrate(conn, self.dialect)

    async def close(self) -> None:
        await self._writer.dispose()
        if self._reader is not self._writer:
            await self._reader.dispose()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction: committed when the block ends, rolled back on any error."""
        async with _wrap_errors(), self._writer.begin() as conn:
            yield conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A read transaction (deferred on SQLite: it takes no write lock)."""
        async with _wrap_errors(), self._reader.begin() as conn:
            yield conn


@asynccontextmanager
async def _wrap_errors() -> AsyncIterator[None]:
    """Callers never see SQLAlchemy or driver types: map them to the contract's errors."""
    try:
        yield
    except HarnessError:
        raise
    except OperationalError as exc:
        text = str(exc.orig).lower() if exc.orig is not None else str(exc).lower()
        if "locked" in text or "busy" in text:
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
