"""PostgreSQL connections: the transaction wrapper over asyncpg, and asyncpg's own pool for work
that is one statement."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import make_url
from sqlalchemy.ext.asyncio import AsyncConnection

from ..errors import Internal
from .raw import runnable


class PgConnection:
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


async def keep_session(_connection: Any) -> None:
    """On release to asyncpg's pool: nothing to undo (`single()` sets no session state: no SET,
    LISTEN, cursors or advisory locks), so skip the reset query, a round trip per statement."""


async def driver_pool(url: str, size: int) -> Any:
    """asyncpg's pool for the SQLAlchemy URL `url` (its `prepared_statement_cache_size` honoured)."""
    import asyncpg

    parsed = make_url(url)
    query = dict(parsed.query)
    cache = query.pop("prepared_statement_cache_size", None)  # SQLAlchemy's name for it
    dsn = parsed.set(drivername="postgresql", query=query).render_as_string(hide_password=False)
    return await asyncpg.create_pool(
        dsn, min_size=1, max_size=size, max_inactive_connection_lifetime=1800,
        statement_cache_size=int(cache) if cache is not None else 100, reset=keep_session,
    )  # fmt: skip
