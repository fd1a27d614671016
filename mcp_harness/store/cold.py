"""The cold paths' SQLAlchemy engine (export/import and prune: `maintenance/store/backup.py`), imported only when one of
them runs: an agent's calls, the server's start and the migrations never load SQLAlchemy.

SQLite: SQLAlchemy over aiosqlite (a worker thread per connection), so a read that streams or runs
long never blocks the event loop. A connection with the execution option `write=True` begins with
BEGIN IMMEDIATE (and waits for the lock in SQLite's busy handler, on its thread).

PostgreSQL: no pool of its own. The engine has `NullPool` and an `async_creator` that hands it the
asyncpg connection `Database` borrowed from the process's one pool for this transaction (`BORROWED`);
SQLAlchemy's close of it is a no-op (the pool takes it back when `Database` releases it), and the
JSON codecs SQLAlchemy would install are skipped (the schema has no JSON column types: values are
text we serialise ourselves), so the pooled connection's session and prepared statements are left
as they were. The engine is in autocommit mode: the transaction is opened on asyncpg by `Database`,
and SQLAlchemy's statements join it.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import AsyncAdaptedQueuePool, NullPool

from mcp_harness.store.sqlite import apply_pragmas

#: the asyncpg connection (from the process's pool) that the next SQLAlchemy connect is given
BORROWED: ContextVar[Any] = ContextVar("mcp_harness_borrowed_connection")


def sqlite_engine(url: str, pool_size: int) -> AsyncEngine:
    engine = create_async_engine(
        url,
        poolclass=AsyncAdaptedQueuePool,
        pool_size=pool_size,
        max_overflow=0,
        pool_timeout=60,
        hide_parameters=True,  # parameters hold users' data: never in an error message or a log
    )

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn, _record):  # noqa: ANN001 - SQLAlchemy's listener signature
        # Turn off the sqlite3 module's own transaction handling: we emit BEGIN ourselves.
        dbapi_conn.isolation_level = None
        apply_pragmas(dbapi_conn)

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn):  # noqa: ANN001
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("write") else "BEGIN")

    return engine


def pg_engine(url: str) -> AsyncEngine:
    async def borrowed(*_args: Any, **_kwargs: Any) -> _Borrowed:
        return _Borrowed(BORROWED.get())

    return create_async_engine(
        url,
        poolclass=NullPool,
        async_creator=borrowed,
        isolation_level="AUTOCOMMIT",
        hide_parameters=True,  # parameters hold users' data: never log them
    )


class _Borrowed:
    """A pooled asyncpg connection as SQLAlchemy's driver connection, for one transaction."""

    __slots__ = ("_driver",)

    def __init__(self, driver: Any) -> None:
        self._driver = driver

    def __getattr__(self, name: str) -> Any:
        return getattr(self._driver, name)

    async def close(self, *_args: Any, **_kwargs: Any) -> None:
        """Not closed: `Database` gives it back to the pool."""

    async def set_type_codec(self, *_args: Any, **_kwargs: Any) -> None:
        """Left as it is (see the module's docstring)."""
