"""PostgreSQL: the `Connection` over asyncpg that hot paths run on, and asyncpg's own pool for work
that is one statement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp_harness.store.connection import NO_PARAMS, Dialect, Params, Query
from mcp_harness.store.urls import pg_dsn


class PgConnection:
    """`Connection` over one asyncpg connection: inside a transaction `Database` opened on it, or
    (`single()`) in autocommit. asyncpg prepares each statement once per connection and caches it."""

    dialect: Dialect = "postgresql"
    __slots__ = ("_driver",)

    def __init__(self, driver: Any) -> None:
        self._driver = driver

    async def execute(self, query: Query, params: Params = NO_PARAMS) -> int:
        status = await self._driver.execute(query.postgresql, *[params[n] for n in query.pg_names])
        count = status.rsplit(" ", 1)[-1]  # "UPDATE 3", "INSERT 0 1"
        return int(count) if count.isdigit() else -1

    async def execute_many(self, query: Query, rows: Sequence[Params]) -> None:
        names = query.pg_names
        await self._driver.executemany(query.postgresql, [[row[n] for n in names] for row in rows])

    async def execute_script(self, sql: str) -> None:
        await self._driver.execute(sql)  # no arguments: the simple protocol, nothing prepared

    async def fetch_all(self, query: Query, params: Params = NO_PARAMS) -> list[Any]:
        records = await self._driver.fetch(query.postgresql, *[params[n] for n in query.pg_names])
        if not records:
            return records
        make = query.maker("postgresql", records[0].keys)
        return list(map(make, records))

    async def fetch_one(self, query: Query, params: Params = NO_PARAMS) -> Any | None:
        rows = await self.fetch_all(query, params)
        return rows[0] if rows else None

    async def fetch_value(self, query: Query, params: Params = NO_PARAMS) -> Any:
        return await self._driver.fetchval(query.postgresql, *[params[n] for n in query.pg_names])


async def keep_session(_connection: Any) -> None:
    """On release to asyncpg's pool: nothing to undo (`single()` sets no session state: no SET,
    LISTEN, cursors or advisory locks), so skip the reset query, a round trip per statement."""


async def driver_pool(url: str, size: int) -> Any:
    """The process's asyncpg pool for the URL `url` (see `urls.pg_dsn`)."""
    import asyncpg

    address, cache = pg_dsn(url)
    return await asyncpg.create_pool(
        address,
        min_size=1,
        max_size=size,
        max_inactive_connection_lifetime=1800,
        statement_cache_size=cache,
        reset=keep_session,
    )
