"""The parts of a database URL the store needs, read without SQLAlchemy (a session's first call opens
the database and must not pay for importing it). URLs come from `config.resolve_db_url()`:
`sqlite+aiosqlite:///PATH` or `postgresql+asyncpg://USER:PASSWORD@HOST:PORT/DB?QUERY`."""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

#: SQLAlchemy's option for asyncpg's prepared-statement cache (0 for PgBouncer in transaction mode):
#: read here, and never passed on to asyncpg as a server setting
CACHE_OPTION = "prepared_statement_cache_size"


class PgParts(NamedTuple):
    host: str | None
    port: int | None
    database: str | None
    username: str | None
    password: str | None


def sqlite_path(url: str) -> str:
    """The file a SQLite URL names (`:memory:` for none), as SQLAlchemy's `make_url(url).database`."""
    rest = url.split("://", 1)[1] if "://" in url else url
    path = unquote(rest[1:].split("?", 1)[0]) if rest.startswith("/") else ""
    return path or ":memory:"


def pg_parts(url: str) -> PgParts:
    parts = urlsplit(url)
    database = unquote(parts.path[1:]) if parts.path.startswith("/") else None
    return PgParts(
        parts.hostname,
        parts.port,
        database or None,
        unquote(parts.username) if parts.username is not None else None,
        unquote(parts.password) if parts.password is not None else None,
    )


def pg_dsn(url: str) -> tuple[str, int]:
    """asyncpg's DSN for the URL (scheme `postgresql`, without SQLAlchemy's own query option), and the
    prepared-statement cache size that option asks for (asyncpg's default, 100, without it). The one
    conversion, for the pool and for the change feed's LISTEN connection."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    cache = [int(v) for k, v in query if k == CACHE_OPTION]
    rest = urlencode([(k, v) for k, v in query if k != CACHE_OPTION])
    dsn = parts._replace(scheme="postgresql", query=rest).geturl()
    return dsn, cache[-1] if cache else 100


def display(url: str) -> str:
    """The database for people: a SQLite file's path, or the URL with its password hidden."""
    if not url.startswith("postgresql"):
        return sqlite_path(url)
    parts = urlsplit(url)
    if parts.password is None:
        return url
    sign_in, host = parts.netloc.rsplit("@", 1)
    return parts._replace(netloc=f"{sign_in.split(':', 1)[0]}:***@{host}").geturl()
