"""The statements Python builds: the few that come in shapes chosen at run time, and the helpers that
write the task list's statements (`task_queries.py`). Every other statement is a named query in a
`.sql` file under `store/sql/`, loaded by `named.load()` (see `named.py` for the format).

A statement that comes in a few shapes (optional filters) is built by a cached function, so each shape
is one fixed statement that the driver prepares once.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from .connection import Query, Record
from .records import ProgressRow, TaskRecord


def columns(record: type[Record], *, prefix: str = "") -> str:
    """A record's fields as a select list (`key` is quoted: it is a keyword in SQL)."""
    return ", ".join(prefix + ('"key"' if f == "key" else f) for f in record._fields)


def in_array(column: str, parameter: str, dialect: str) -> str:
    """`column` is one of the list passed as `parameter` (see `connection.array()`)."""
    if dialect == "sqlite":
        return f"{column} IN (SELECT value FROM json_each(:{parameter}))"
    return f"{column} = ANY(:{parameter})"


def _both(build: Callable[[str], str], *, row: type[Record] | None = None, name: str = "") -> Query:
    """A query whose SQL `build(dialect)` writes for each dialect."""
    return Query(build("sqlite"), postgresql=build("postgresql"), row=row, name=name)


TASK = columns(TaskRecord)
_KEY = '"key"'


@cache
def recent_progress(by_thread: bool, by_task: bool, paged: bool) -> Query:
    """Progress entries newest first (each filter is its own statement, so each finds its index)."""
    where = "workspace = :ws"
    where += " AND thread = :thread" if by_thread else ""
    where += " AND task_key = :task" if by_task else ""
    where += " AND seq < :before" if paged else ""
    sql = f"SELECT {columns(ProgressRow)} FROM progress WHERE {where} ORDER BY seq DESC LIMIT :limit"
    return Query(sql, row=ProgressRow, name=f"recent_progress({by_thread}, {by_task}, {paged})")
