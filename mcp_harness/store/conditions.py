"""Driver errors that say something about the database itself (damaged, read-only, full), turned into
the contract's errors with a message that says what to do. Waiting does not cure any of them, so none
says "retry shortly"."""

from __future__ import annotations

import os
import sqlite3

from mcp_harness.errors import HarnessError, Unavailable

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
#: free space on the database's file system under which it counts as full: a few pages, less than the
#: next transaction may need for its WAL frames
FULL_BELOW_BYTES = 64 * 1024

#: SQLite's primary result codes (the low byte of an extended code)
_SQLITE = {8: READ_ONLY, 11: DAMAGED, 13: DISK_FULL, 26: DAMAGED}  # READONLY, CORRUPT, FULL, NOTADB
#: PostgreSQL SQLSTATEs: read_only_sql_transaction, disk_full
PG_DISK_FULL = "the database server's disk is full: free space, then retry"
#: what a write that met a full disk says (`Database.ping` repeats it for a while: `FULL_HELD_SECONDS`)
FULL = frozenset({DISK_FULL, PG_DISK_FULL})
_POSTGRES = {"25006": PG_READ_ONLY, "53100": PG_DISK_FULL}


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


def sqlite_space(path: str) -> None:
    """Raise `Unavailable` (disk full) when the file system holding the database has less room than a
    write needs: one `statvfs`, where a trial write would take the write lock. The space root may use
    counts for root (the blocks reserved for it)."""
    try:
        fs = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return  # nothing to say: the write itself will tell
    free = (fs.f_bfree if os.geteuid() == 0 else fs.f_bavail) * fs.f_frsize
    if free < FULL_BELOW_BYTES:
        raise Unavailable(DISK_FULL)
