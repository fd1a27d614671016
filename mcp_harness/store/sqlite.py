"""SQLite connections: set-up (WAL, synchronous=FULL), the process's writer and short-read
connections, and the connection wrapper the store runs statements through."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, create_engine, event, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import AsyncAdaptedQueuePool, StaticPool

from .raw import runnable

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


def apply_pragmas(dbapi_conn: Any) -> None:
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


def create_private(url: str) -> None:
    """Create a new database file readable and writable by its owner only (0600, whatever the umask),
    before SQLite creates it: SQLite gives the WAL and shared-memory files the database file's mode."""
    path = make_url(url).database
    if not path or path == ":memory:" or path.startswith("file:"):
        return
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return  # an existing database keeps the mode its owner gave it
    try:
        os.fchmod(fd, 0o600)  # the umask may have taken bits away from the mode os.open was given
    finally:
        os.close(fd)


def sqlite_reader(url: str, pool_size: int) -> AsyncEngine:
    engine = create_async_engine(
        url, poolclass=AsyncAdaptedQueuePool, pool_size=pool_size, max_overflow=0, pool_timeout=60,
        hide_parameters=True,  # parameters hold users' data: never in an error message or a log
    )  # fmt: skip

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn, _record):  # noqa: ANN001 - SQLAlchemy's listener signature
        # Turn off the sqlite3 module's own transaction handling: we emit BEGIN ourselves.
        dbapi_conn.isolation_level = None
        apply_pragmas(dbapi_conn)

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn):  # noqa: ANN001
        conn.exec_driver_sql("BEGIN")

    return engine


def sqlite_sync(url: str, *, writer: bool) -> Any:
    """A synchronous pysqlite engine holding one connection: the process's writer (BEGIN IMMEDIATE)
    or its short-read connection (deferred BEGIN)."""
    engine = create_engine(
        url.replace("sqlite+aiosqlite", "sqlite+pysqlite", 1),
        poolclass=StaticPool,
        connect_args={"check_same_thread": False},
        hide_parameters=True,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # noqa: ANN001
        dbapi_conn.isolation_level = None
        apply_pragmas(dbapi_conn)
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


class SyncConnection:
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


def end_transaction(conn: Connection, *, commit: bool) -> None:
    """End a writer transaction begun on the driver, and SQLAlchemy's view of it if a statement
    that went through SQLAlchemy made it begin one."""
    if conn.in_transaction():
        conn.commit() if commit else conn.rollback()
    else:
        raw = conn.connection.dbapi_connection
        raw.commit() if commit else raw.rollback()


def is_busy(exc: Exception) -> bool:
    text = str(getattr(exc, "orig", None) or exc).lower()
    return "locked" in text or "busy" in text
