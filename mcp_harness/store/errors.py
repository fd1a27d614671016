"""The store's edge: driver and SQLAlchemy errors become the contract's errors here, so nothing above
the store ever sees sqlite3, asyncpg or SQLAlchemy types.

- the database cannot be reached, is busy or its connection broke: `Unavailable` (retry shortly);
- a unique constraint refused a write (a concurrent writer won): `UniqueViolation`;
- any other database error: `StorageError` (the server logs it and answers `internal` with an id).

`connect_refused()` names the two refusals a first connection meets that waiting will not cure (the
database does not exist; the user or password was refused): `Database.open()` reports them as
`Unavailable` (the server's database, not the caller's arguments) with the server's address and what
to do, never the password.
"""

from __future__ import annotations

import logging
import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp_harness.errors import HarnessError, Internal, Unavailable
from mcp_harness.store.conditions import condition
from mcp_harness.store.connection import StorageError, UniqueViolation
from mcp_harness.store.sqlite import is_busy
from mcp_harness.store.urls import pg_parts

log = logging.getLogger(__name__)


@asynccontextmanager
async def wrap_errors() -> AsyncIterator[None]:
    """Callers never see driver or SQLAlchemy types: map them to the contract's errors."""
    try:
        yield
    except (HarnessError, StorageError):
        raise
    except Exception as exc:
        mapped = storage_error(exc)
        if mapped is None:
            raise
        raise mapped from exc


def storage_error(exc: Exception) -> Exception | None:
    """The error to raise for `exc`, or None when it is not a database error (raise it as it is)."""
    sa = sys.modules.get("sqlalchemy.exc")  # not imported (no cold path ran): `exc` is not one of its
    dbapi = sa is not None and isinstance(exc, sa.DBAPIError)
    driver = _driver_error(exc) if dbapi else exc
    known = condition(driver)  # damaged, read-only or full: said so (waiting will not help)
    if known is not None:
        return known
    operational = sa is not None and isinstance(exc, sa.OperationalError)
    if operational or isinstance(driver, sqlite3.OperationalError) or _pg_unreachable(driver):
        if is_busy(exc):
            return Unavailable("the database is busy (locked by another writer); retry shortly")
        log.error("database operational error: %s: %s", type(driver).__name__, driver)  # no SQL, no parameters
        return Unavailable("the database is not reachable right now; retry shortly")
    if _unique_violation(driver):
        return UniqueViolation("a concurrent write got there first (a unique constraint)")
    if sa is not None and isinstance(exc, sa.DBAPIError) and exc.connection_invalidated:
        return Unavailable("the database connection was lost; retry shortly")
    if isinstance(exc, OSError):
        return Unavailable(f"the database is not reachable: {exc.strerror or exc}")
    if dbapi or isinstance(driver, sqlite3.Error) or _pg_error(driver):
        return StorageError(f"a database error happened ({type(driver).__name__})")
    if sa is not None and isinstance(exc, sa.SQLAlchemyError):
        return Internal("a storage error happened")
    return None


def _driver_error(exc: Exception) -> BaseException:
    """The driver's own exception: SQLAlchemy keeps it as `orig` (its asyncpg adapter wraps asyncpg's
    error once more, as the adapter error's cause)."""
    orig = getattr(exc, "orig", None)
    if orig is None:
        return exc
    return orig.__cause__ or orig


def _unique_violation(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.IntegrityError):
        return str(exc).startswith("UNIQUE constraint failed")
    asyncpg = sys.modules.get("asyncpg")  # not imported: the error cannot be one of its
    return asyncpg is not None and isinstance(exc, asyncpg.UniqueViolationError)


def _pg_unreachable(exc: BaseException) -> bool:
    asyncpg = sys.modules.get("asyncpg")
    return asyncpg is not None and isinstance(exc, (asyncpg.InterfaceError, asyncpg.PostgresConnectionError))


def _pg_error(exc: BaseException) -> bool:
    asyncpg = sys.modules.get("asyncpg")
    return asyncpg is not None and isinstance(exc, asyncpg.PostgresError)


#: PostgreSQL SQLSTATEs of a refused sign-in: invalid_authorization_specification, invalid_password
_SIGN_IN_REFUSED = ("28000", "28P01")


def connect_refused(exc: BaseException | None, url: str) -> HarnessError | None:
    """The error for a PostgreSQL server that refused the first connection (no such database, user or
    password refused), with what to do; None for anything else. The password is never in it."""
    driver = _driver_error(exc) if isinstance(exc, Exception) else exc
    state = getattr(driver, "sqlstate", None)
    if state != "3D000" and state not in _SIGN_IN_REFUSED:
        return None
    parts = pg_parts(url)
    where = f"{parts.host or 'localhost'}:{parts.port or 5432}"
    if state == "3D000":  # invalid_catalog_name
        name = parts.database or ""
        return Unavailable(f"database {name!r} does not exist on {where}: create it (createdb {name}) or fix --db")
    user = parts.username or "(the login name)"
    reason = str(driver.args[0]) if driver is not None and driver.args else ""  # e.g. role "x" does not exist
    if parts.password:
        reason = reason.replace(parts.password, "***")
    return Unavailable(
        f"PostgreSQL on {where} refused to sign in user {user!r} ({reason or 'sign-in refused'}): check the user "
        "and its password (PGPASSWORD or ~/.pgpass, never in --db where others can see it) or fix --db"
    )
