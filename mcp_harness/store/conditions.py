"""Driver errors that say something about the database itself (damaged, read-only, full), turned into
the contract's errors with a message that says what to do. Waiting does not cure any of them, so none
says "retry shortly"."""

from __future__ import annotations

import os
import sqlite3

from ..errors import HarnessError, Unavailable

DAMAGED = "not an mcp-harness database, or damaged"
READ_ONLY = (
    "the database is read-only (its file, folder or file system does not allow writing): saves fail until "
    "it is writable again"
)
PG_READ_ONLY = (
    "the database is read-only (a standby server, or default_transaction_read_only is on): point the "
    "server at the primary"
)
DISK_FULL = "the disk is full (or the database reached its size limit): free space, then retry"

#: SQLite's primary result codes (the low byte of an extended code)
_SQLITE = {8: READ_ONLY, 11: DAMAGED, 13: DISK_FULL, 26: DAMAGED}  # READONLY, CORRUPT, FULL, NOTADB
#: PostgreSQL SQLSTATEs: read_only_sql_transaction, disk_full
_POSTGRES = {"25006": PG_READ_ONLY, "53100": "the database server's disk is full: free space, then retry"}


def condition(exc: BaseException) -> HarnessError | None:
    """The contract error for a driver error that reports the database's condition, else None.
    `exc` is a driver exception or a SQLAlchemy one wrapping it (`orig`)."""
    orig = getattr(exc, "orig", None) or exc
    if isinstance(orig, sqlite3.Error):
        code = getattr(orig, "sqlite_errorcode", None)
        message = _SQLITE.get(code & 0xFF) if isinstance(code, int) else None
    else:
        message = _POSTGRES.get(getattr(orig, "sqlstate", None) or "")
    return Unavailable(message, damaged=message == DAMAGED) if message else None


def sqlite_writable(path: str) -> None:
    """Raise `Unavailable` (read-only) when this process may not write the database file or the WAL
    files next to it. SQLite opens such a file read-only without a word, and only writes fail."""
    files = [path] + [p for p in (path + "-wal", path + "-shm") if os.path.exists(p)]
    if len(files) == 1:
        files.append(os.path.dirname(path) or ".")  # the WAL files will be created there
    if not all(os.access(p, os.W_OK) for p in files):
        raise Unavailable(READ_ONLY)
