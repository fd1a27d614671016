"""SQLite: connection set-up (WAL, synchronous=FULL) and the `Connection` over sqlite3 that the hot
paths and the migrations run on (the cold paths' aiosqlite engine is in `cold.py`)."""

from __future__ import annotations

import os
import random
import sqlite3
import time
from typing import Any

import anyio

from mcp_harness.store.connection import NO_PARAMS, Dialect, Params, Query
from mcp_harness.store.urls import sqlite_path

SQLITE_BUSY_TIMEOUT_MS = 30_000


#: `wal_autocheckpoint` 300 pages (~1.2 MB): a freshly opened database appends to a growing WAL
#: file until the first checkpoint rewinds it, and a commit that grows the file costs nearly twice
#: one that reuses it; SQLite's default of 1,000 pages kept a new server in that phase for its first
#: few hundred saves. Checkpointing 300 pages costs little.
#: The writer connection checkpoints on a count of its own commits instead (`WRITER_PRAGMAS`).
PRAGMAS = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = FULL",
    "PRAGMA foreign_keys = ON",
    "PRAGMA wal_autocheckpoint = 300",
)
#: The writer: SQLite's automatic checkpoint runs after every commit while the WAL holds more than its
#: limit, and with several processes writing the WAL is often not rewound after a checkpoint (another
#: process's transaction was reading it at that moment), so past the limit EVERY commit checkpointed:
#: two more fsyncs a commit (the WAL's and the database file's), measured 4.4 fsyncs a claim+complete
#: with 4 processes against 2.2 with one. So the writer checkpoints after every `CHECKPOINT_EVERY` of
#: its commits (`Database.write`: a passive checkpoint, which never waits), a bounded share whatever
#: the number of processes, and SQLite's own only past `WAL_LIMIT_PAGES` (~40 MB), as a bound.
CHECKPOINT_EVERY = 20
WAL_LIMIT_PAGES = 10_000
WRITER_PRAGMAS = ("PRAGMA busy_timeout = 0", f"PRAGMA wal_autocheckpoint = {WAL_LIMIT_PAGES}")


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
    path = sqlite_path(url)
    if path == ":memory:" or path.startswith("file:"):
        return
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return  # an existing database keeps the mode its owner gave it
    try:
        os.fchmod(fd, 0o600)  # the umask may have taken bits away from the mode os.open was given
    finally:
        os.close(fd)


def connect(url: str, *, writer: bool) -> sqlite3.Connection:
    """The process's writer connection (it never waits inside SQLite: `Database` retries BEGIN
    IMMEDIATE without blocking the loop) or its short-read connection. Transactions are begun and
    ended by `Database` itself (`isolation_level=None`: the sqlite3 module opens none)."""
    conn = sqlite3.connect(sqlite_path(url), isolation_level=None, check_same_thread=False, cached_statements=256)
    try:
        apply_pragmas(conn)
        if writer:
            # Once BEGIN IMMEDIATE holds the write lock, WAL needs no other lock to write and commit
            # (a checkpoint after a commit is PASSIVE and never waits).
            for pragma in WRITER_PRAGMAS:
                conn.execute(pragma)
    except BaseException:
        conn.close()
        raise
    return conn


def checkpoint(conn: sqlite3.Connection) -> None:
    """A passive checkpoint: copies what no reader still needs from the WAL into the database file,
    never waiting (the writer's `busy_timeout` is 0); the next write rewinds a WAL copied whole. The
    commit before it stands whatever happens here: a checkpoint that cannot run now is left for the next."""
    try:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    except sqlite3.OperationalError:
        pass


def end_transaction(conn: sqlite3.Connection, *, commit: bool) -> None:
    """Commit or roll back; a commit that fails is rolled back, so the connection is never left
    inside a transaction (which would refuse the next BEGIN)."""
    if not commit:
        conn.rollback()
        return
    try:
        conn.commit()
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise


def is_busy(exc: BaseException) -> bool:
    text = str(getattr(exc, "orig", None) or exc).lower()
    return "locked" in text or "busy" in text


class SqliteConnection:
    """`Connection` over one sqlite3 connection: awaiting it never suspends, so a write transaction
    runs from BEGIN to COMMIT without yielding the loop (a statement is microseconds of SQL)."""

    dialect: Dialect = "sqlite"
    __slots__ = ("_db",)

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    async def execute(self, query: Query, params: Params = NO_PARAMS) -> int:
        return self._db.execute(query.sqlite, params).rowcount

    async def execute_many(self, query: Query, rows: Any) -> None:
        self._db.executemany(query.sqlite, rows)

    async def execute_script(self, sql: str) -> None:
        self._db.execute(sql)

    async def fetch_all(self, query: Query, params: Params = NO_PARAMS) -> list[Any]:
        return _fetch_all(self._db, query, params)

    async def fetch_one(self, query: Query, params: Params = NO_PARAMS) -> Any | None:
        rows = await self.fetch_all(query, params)
        return rows[0] if rows else None

    async def fetch_value(self, query: Query, params: Params = NO_PARAMS) -> Any:
        return _fetch_value(self._db, query, params)


def _fetch_all(db: sqlite3.Connection, query: Query, params: Params) -> list[Any]:
    cursor = db.execute(query.sqlite, params)
    first = cursor.fetchone()
    if first is None:
        return []
    make = query.maker("sqlite", lambda: [d[0] for d in cursor.description])
    rows = [make(first)]
    rows.extend(map(make, cursor))  # every row: a statement left unfinished would hold its lock
    return rows


def _fetch_value(db: sqlite3.Connection, query: Query, params: Params) -> Any:
    rows = db.execute(query.sqlite, params).fetchall()
    return rows[0][0] if rows else None


def _execute(db: sqlite3.Connection, sql: str, params: Params) -> int:
    return db.execute(sql, params).rowcount


class Deadline:
    """When the statements of a connection must stop (`time.monotonic()`); SQLite asks between steps
    of the statement it runs (a progress handler) and stops it with "interrupted" once it has passed."""

    __slots__ = ("at",)

    def __init__(self) -> None:
        self.at = float("inf")

    def passed(self) -> bool:
        return time.monotonic() > self.at


#: how many virtual-machine steps SQLite takes between two looks at the deadline (well under a millisecond)
DEADLINE_STEPS = 5_000


def connect_searcher(url: str) -> tuple[sqlite3.Connection, Deadline]:
    """A read connection for searches, whose statements stop when its `Deadline` passes."""
    conn = connect(url, writer=False)
    conn.execute("PRAGMA temp_store = MEMORY")  # the temporary tables searches rank in (`search_run.sql`)
    deadline = Deadline()
    conn.set_progress_handler(deadline.passed, DEADLINE_STEPS)
    return conn, deadline


def interrupted(exc: BaseException) -> bool:
    """Whether `exc` is SQLite's answer to a statement stopped at its deadline."""
    return isinstance(exc, sqlite3.OperationalError) and str(exc) == "interrupted"


class ThreadedSqliteConnection:
    """`Connection` over one sqlite3 connection whose statements run on a worker thread: the event loop
    goes on while one runs (sqlite3 lets go of the interpreter while SQLite works). For reads that may
    take long, such as a full-text search; never for writes, whose transaction must not yield. With
    `begin`, the read transaction is begun with the first statement, in the same trip to the thread."""

    dialect: Dialect = "sqlite"
    __slots__ = ("_db", "_begin")

    def __init__(self, db: sqlite3.Connection, *, begin: bool = False) -> None:
        self._db = db
        self._begin = begin

    async def _run(self, work: Any, *args: Any) -> Any:
        begin, self._begin = self._begin, False
        return await anyio.to_thread.run_sync(_begun if begin else _now, self._db, work, *args)

    async def execute(self, query: Query, params: Params = NO_PARAMS) -> int:
        return await self._run(_execute, query.sqlite, params)

    async def execute_many(self, query: Query, rows: Any) -> None:
        await self._run(_execute_many, query.sqlite, rows)

    async def execute_script(self, sql: str) -> None:
        await self._run(_execute, sql, NO_PARAMS)

    async def fetch_all(self, query: Query, params: Params = NO_PARAMS) -> list[Any]:
        return await self._run(_fetch_all, query, params)

    async def fetch_one(self, query: Query, params: Params = NO_PARAMS) -> Any | None:
        rows = await self.fetch_all(query, params)
        return rows[0] if rows else None

    async def fetch_value(self, query: Query, params: Params = NO_PARAMS) -> Any:
        return await self._run(_fetch_value, query, params)


def _now(db: sqlite3.Connection, work: Any, *args: Any) -> Any:
    return work(db, *args)


def _begun(db: sqlite3.Connection, work: Any, *args: Any) -> Any:
    db.execute("BEGIN")
    return work(db, *args)


def _execute_many(db: sqlite3.Connection, sql: str, rows: Any) -> None:
    db.executemany(sql, rows)
