"""Storage: the only package that holds SQL.

Services run the hot paths inside one transaction from `Database.write()`, `read()` or `single()`,
which yield a `Connection` that runs named queries (`.sql` files under `sql/`, loaded by `named.py`)
and returns typed rows (`records.py`); migrations are `.sql` files too (`migrations.py`). The cold
paths (export/import, prune) use SQLAlchemy over the declared tables (`tables.py`) inside
`Database.cold_read()` / `cold_write()`: `maintenance/store/backup.py`, imported by whoever runs them (not here: a
session's calls never load SQLAlchemy). Database errors leave the store as `HarnessError`s, or as
`StorageError` (`UniqueViolation` for a lost race on a unique key).
"""

from mcp_harness.store import common, idempotency, records
from mcp_harness.store.connection import Connection, StorageError, UniqueViolation
from mcp_harness.store.engine import Database
from mcp_harness.store.migrations import SCHEMA_VERSION

__all__ = [
    "SCHEMA_VERSION",
    "Connection",
    "Database",
    "StorageError",
    "UniqueViolation",
    "common",
    "idempotency",
    "records",
]
