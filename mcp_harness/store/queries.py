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


@cache
def progress_search(shape: tuple[tuple[int, ...], int]) -> Query:
    """The progress entries matching a full-text query, best first (see `search.py`; SQLite's statement
    is one for every shape, PostgreSQL's has the query's terms as parameters)."""
    from .search import PROGRESS_TEXT, tsquery

    cols = columns(ProgressRow, prefix="p.")
    sqlite = (
        f"SELECT {cols} FROM progress_fts JOIN progress AS p ON p.id = progress_fts.rowid "
        "WHERE progress_fts MATCH :q AND p.workspace = :ws ORDER BY bm25(progress_fts), p.seq DESC LIMIT :limit"
    )
    text = PROGRESS_TEXT.replace("summary", "p.summary").replace("details", "p.details")
    postgresql = (
        f"SELECT {cols} FROM progress AS p, (SELECT {tsquery(shape)} AS q) AS s "
        f"WHERE p.workspace = :ws AND {text} @@ s.q ORDER BY ts_rank({text}, s.q) DESC, p.seq DESC LIMIT :limit"
    )
    return Query(sqlite, postgresql=postgresql, row=ProgressRow, name=f"progress_search({shape})")
