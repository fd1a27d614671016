"""The progress log."""

from __future__ import annotations

from functools import cache
from typing import Any

from mcp_harness.store import named
from mcp_harness.store.common import next_progress_seq
from mcp_harness.store.connection import Connection, Query, columns
from mcp_harness.store.records import ProgressRow
from mcp_harness.store.search import PROGRESS_TEXT, Shape, Terms, search_refused, tsquery

Q = named.load("progress")
S = named.load("search_run")


@cache
def recent_progress(by_thread: bool, by_task: bool, paged: bool) -> Query:
    """Progress entries newest first (each filter is its own statement, so each finds its index)."""
    where = "workspace = :ws"
    where += " AND thread = :thread" if by_thread else ""
    where += " AND task_key = :task" if by_task else ""
    where += " AND seq < :before" if paged else ""
    sql = f"SELECT {columns(ProgressRow)} FROM progress WHERE {where} ORDER BY seq DESC LIMIT :limit"
    return Query(sql, row=ProgressRow, name=f"recent_progress({by_thread}, {by_task}, {paged})")


#: SQLite: the entries of the temporary table `search_run.sql` fills that match, best first (by bm25
#: over that table's rows alone)
PROGRESS_RANKED = Query(
    f"SELECT {columns(ProgressRow, prefix='p.')} FROM temp.progress_rank AS r JOIN progress AS p ON p.id = r.rowid "
    "WHERE progress_rank MATCH :q ORDER BY bm25(progress_rank), p.seq DESC LIMIT :limit",
    row=ProgressRow,
    name="progress_ranked",
)


#: PostgreSQL: a small workspace's entries read apart (MATERIALIZED: the planner cannot take the text
#: condition to the shared GIN index, which a generic plan of a prepared statement did for a 3-entry
#: workspace, walking every workspace's matches)
SCOPED_PROGRESS = "(WITH scope AS MATERIALIZED (SELECT * FROM progress WHERE workspace = :ws) SELECT * FROM scope)"


@cache
def progress_search(shape: Shape, scoped: bool = False) -> Query:
    """PostgreSQL: the progress entries matching a full-text query, best first (see `search.py`; the
    query's terms are parameters); `scoped`: a small workspace, read apart (`SCOPED_PROGRESS`). SQLite
    ranks in a table of the workspace's own (`PROGRESS_RANKED`)."""
    cols = columns(ProgressRow, prefix="p.")
    text = PROGRESS_TEXT.replace("summary", "p.summary").replace("details", "p.details")
    source = SCOPED_PROGRESS if scoped else "progress"
    postgresql = (
        f"SELECT {cols} FROM {source} AS p, (SELECT {tsquery(shape)} AS q) AS s "
        f"WHERE p.workspace = :ws AND {text} @@ s.q ORDER BY ts_rank({text}, s.q) DESC, p.seq DESC LIMIT :limit"
    )
    return Query("", postgresql=postgresql, row=ProgressRow, name=f"progress_search({shape}, {scoped})")


#: a workspace of at most this many entries is searched in its own entries alone (PostgreSQL: `PG_SCOPED`,
#: where it costs a to_tsvector of each entry)
SCOPED_ENTRIES = 1000
PG_SCOPED = 200
#: in a bigger one, how many of its newest matches are ranked
RANKED_MATCHES = 1000


async def append(conn: Connection, row: dict[str, Any]) -> int:
    """Append an entry (`row`: every column of `Q.insert_progress` but `seq`); returns its `seq`,
    allocated under the workspace row lock so that seq order is commit order on every backend."""
    seq = await next_progress_seq(conn, row["workspace"])
    await conn.execute(Q.insert_progress, {**row, "seq": seq})
    return seq


async def recent(
    conn: Connection,
    workspace: str,
    *,
    thread: str | None = None,
    task_key: str | None = None,
    limit: int = 5,
    before_seq: int | None = None,
) -> list[ProgressRow]:
    """Entries newest first."""
    if limit == 0:
        return []
    query = recent_progress(thread is not None, task_key is not None, before_seq is not None)
    params = {"ws": workspace, "thread": thread, "task": task_key, "before": before_seq, "limit": limit}
    return await conn.fetch_all(query, params)


async def count(conn: Connection, workspace: str) -> int:
    return int(await conn.fetch_value(Q.count_progress, {"ws": workspace}))


async def search(conn: Connection, workspace: str, terms: Terms, *, limit: int) -> list[ProgressRow]:
    """The entries that best match `terms`, best first, newest first among equals; the order depends on
    the workspace's own entries alone. SQLite: bm25 over the workspace's entries (up to `SCOPED_ENTRIES`;
    past that, over its newest `RANKED_MATCHES` matches); PostgreSQL: ts_rank (of each entry alone)."""
    if limit == 0:
        return []
    params = {"ws": workspace, "limit": limit, "n": RANKED_MATCHES, **terms.params(conn.dialect)}
    try:
        if conn.dialect != "sqlite":
            return await conn.fetch_all(progress_search(terms.shape, await scoped(conn, workspace)), params)
        await conn.execute(S.progress_rank_table)
        await conn.execute(S.progress_rank_clear)
        small = await scoped(conn, workspace)
        await conn.execute(S.progress_rank_workspace if small else S.progress_rank_matches, params)
        return await conn.fetch_all(PROGRESS_RANKED, params)
    except Exception as exc:
        raise search_refused(exc) from None


async def scoped(conn: Connection, workspace: str) -> bool:
    """Whether the workspace is small enough to be searched in its own entries alone (`SCOPED_ENTRIES`)."""
    most = SCOPED_ENTRIES if conn.dialect == "sqlite" else PG_SCOPED
    count = await conn.fetch_value(S.workspace_entries_upto, {"ws": workspace, "n": most + 1})
    return int(count) <= most
