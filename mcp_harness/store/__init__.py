"""Storage: the only package that holds SQL.

Services run the hot paths inside one transaction from `Database.write()`, `read()` or `single()`,
which yield a `Connection` that runs the literal SQL of `queries.py` and returns typed rows
(`records.py`). The cold paths (export/import, prune, migrations) use SQLAlchemy over the declared
tables (`tables.py`) inside `Database.cold_read()` / `cold_write()`. Database errors leave the store as
`HarnessError`s, or as `StorageError` (`UniqueViolation` for a lost race on a unique key).
"""

from . import (
    backup,
    checkpoints,
    common,
    idempotency,
    progress,
    records,
    schemas,
    segments,
    task_queries,
    tasks,
    tokens,
)
from .connection import Connection, StorageError, UniqueViolation
from .engine import Database
from .migrations import SCHEMA_VERSION

__all__ = [
    "SCHEMA_VERSION",
    "Connection",
    "Database",
    "StorageError",
    "UniqueViolation",
    "backup",
    "checkpoints",
    "common",
    "idempotency",
    "progress",
    "records",
    "schemas",
    "segments",
    "task_queries",
    "tasks",
    "tokens",
]
