"""Storage: the only package that holds SQL. Services call these modules inside one transaction
opened with `Database.write()` or `Database.read()`."""

from . import checkpoints, common, idempotency, progress, schemas, tasks, tokens
from .engine import Database
from .migrations import SCHEMA_VERSION

__all__ = [
    "Database",
    "SCHEMA_VERSION",
    "checkpoints",
    "common",
    "idempotency",
    "progress",
    "schemas",
    "tasks",
    "tokens",
]
