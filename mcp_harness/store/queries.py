"""Every statement the store runs on its `Connection`: literal SQL with `:name` parameters.

Written once where SQLite and PostgreSQL agree, once each where they differ (row locks, how a list
is passed). A statement that comes in a few shapes (optional filters, the columns an update sets) is
built by a cached function, so each shape is one fixed statement that the driver prepares once.
Each constant's name is its `Query.name`. Cold paths (export/import, prune, migrations) use
SQLAlchemy over `tables.py` instead; see `backup.py` and `migrations.py`. The task list's statements
are in `task_queries.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from .connection import Query
from .records import (
    CheckpointRow,
    CheckpointWithManifest,
    ProgressRow,
    SegmentRow,
    StoredResult,
    TaskRecord,
    ThreadHead,
    ThreadRow,
    TokenRow,
)


def columns(record: type, *, prefix: str = "") -> str:
    """A record's fields as a select list (`key` is quoted: it is a keyword in SQL)."""
    return ", ".join(prefix + ('"key"' if f == "key" else f) for f in record._fields)


def in_array(column: str, parameter: str, dialect: str) -> str:
    """`column` is one of the list passed as `parameter` (see `connection.array()`)."""
    if dialect == "sqlite":
        return f"{column} IN (SELECT value FROM json_each(:{parameter}))"
    return f"{column} = ANY(:{parameter})"


def _both(build: Callable[[str], str], *, row: type | None = None, name: str = "") -> Query:
    """A query whose SQL `build(dialect)` writes for each dialect."""
    return Query(build("sqlite"), postgresql=build("postgresql"), row=row, name=name)


CHECKPOINT_META = columns(CheckpointRow)
TASK = columns(TaskRecord)
_KEY = '"key"'

# -- health ----------------------------------------------------------------------------------------
#: answers "on" from a read-only PostgreSQL (a standby, or default_transaction_read_only)
PING = Query("SELECT 1", postgresql="SHOW transaction_read_only")
DATABASE_SIZE = Query("SELECT pg_database_size(current_database())")  # PostgreSQL only
VACUUM_PRUNED = Query("VACUUM (ANALYZE) blobs, checkpoints")  # PostgreSQL, after a prune (SQLite: see engine.py)

# -- workspaces ------------------------------------------------------------------------------------
ENSURE_WORKSPACE = Query(
    "INSERT INTO workspaces (name, progress_seq, created_at) VALUES (:ws, 0, :at) ON CONFLICT DO NOTHING"
)
#: the row lock this takes (or SQLite's write lock) is held to commit: seqs commit in the order given
NEXT_PROGRESS_SEQ = Query(
    "UPDATE workspaces SET progress_seq = progress_seq + 1 WHERE name = :ws RETURNING progress_seq"
)

# -- threads and checkpoints -----------------------------------------------------------------------
_LOCK_THREAD = """
SELECT t.latest_version AS version, t.latest_id AS checkpoint_id, c.manifest,
       s.version AS schema_version, s.document AS schema_document
FROM threads AS t
LEFT JOIN checkpoints AS c ON c.id = t.latest_id
LEFT JOIN state_schemas AS s ON s.workspace = t.workspace AND s.thread = t.name
    AND s.version = (SELECT max(version) FROM state_schemas WHERE workspace = t.workspace AND thread = t.name)
WHERE t.workspace = :ws AND t.name = :thread
"""
#: PostgreSQL: the row lock orders saves to one thread across hosts (SQLite's BEGIN IMMEDIATE does already)
LOCK_THREAD = Query(_LOCK_THREAD, postgresql=_LOCK_THREAD + "FOR UPDATE OF t", row=ThreadHead)
#: PostgreSQL: a save holds this (shared) to commit, prune's value clean-up the exclusive one
#: (`PRUNE_VALUES_LOCK`), so a save that references a stored value (its INSERT ... ON CONFLICT DO
#: NOTHING finds it, or it appends after a list's segment) never commits between prune's scan of
#: the manifests and its deletes. SQLite's write transactions (BEGIN IMMEDIATE) are serial already.
#: Keyed per workspace: (a constant for mcp-harness, hashtext(workspace)).
SAVE_VALUES_LOCK = Query("SELECT pg_advisory_xact_lock_shared(1835233384, hashtext(:ws))")
PRUNE_VALUES_LOCK = Query("SELECT pg_advisory_xact_lock(1835233384, hashtext(:ws))")
INSERT_THREAD = Query(
    "INSERT INTO threads (workspace, name, latest_version, latest_id, updated_at) "
    "VALUES (:ws, :thread, 0, NULL, :at) ON CONFLICT DO NOTHING"
)
ADVANCE_THREAD = Query(
    "UPDATE threads SET latest_version = :version, latest_id = :id, updated_at = :at "
    "WHERE workspace = :ws AND name = :thread"
)
INSERT_CHECKPOINT = Query(
    "INSERT INTO checkpoints (id, workspace, thread, version, parent_id, label, metadata_json, manifest, size_bytes, "
    "agent, schema_version, created_at) VALUES (:id, :workspace, :thread, :version, :parent_id, :label, "
    ":metadata_json, :manifest, :size_bytes, :agent, :schema_version, :created_at)"
)
INSERT_BLOB = Query("INSERT INTO blobs (workspace, hash, data) VALUES (:ws, :hash, :data) ON CONFLICT DO NOTHING")
BLOB = Query("SELECT data FROM blobs WHERE workspace = :ws AND hash = :hash")
BLOBS = _both(lambda d: f"SELECT hash, data FROM blobs WHERE workspace = :ws AND {in_array('hash', 'hashes', d)}")

_GET_CHECKPOINT = f"SELECT {CHECKPOINT_META}, manifest FROM checkpoints WHERE workspace = :ws AND "
CHECKPOINT_BY_ID = Query(_GET_CHECKPOINT + "id = :id", row=CheckpointWithManifest)
CHECKPOINT_BY_VERSION = Query(_GET_CHECKPOINT + "thread = :thread AND version = :version", row=CheckpointWithManifest)
CHECKPOINT_BY_LABEL = Query(  # the newest with the label (ix_checkpoint_label)
    _GET_CHECKPOINT + "thread = :thread AND label = :label ORDER BY version DESC LIMIT 1", row=CheckpointWithManifest
)
LATEST_CHECKPOINT = Query(
    _GET_CHECKPOINT + "thread = :thread ORDER BY version DESC LIMIT 1", row=CheckpointWithManifest
)

_LIST_CHECKPOINTS = f"SELECT {CHECKPOINT_META} FROM checkpoints WHERE workspace = :ws AND thread = :thread"
LIST_CHECKPOINTS = Query(_LIST_CHECKPOINTS + " ORDER BY version DESC LIMIT :limit", row=CheckpointRow)
LIST_CHECKPOINTS_BEFORE = Query(
    _LIST_CHECKPOINTS + " AND version < :before ORDER BY version DESC LIMIT :limit", row=CheckpointRow
)
LARGEST_CHECKPOINTS = Query(
    f"SELECT {CHECKPOINT_META} FROM checkpoints WHERE workspace = :ws "
    "ORDER BY size_bytes DESC, created_at DESC LIMIT :limit",
    row=CheckpointRow,
)
COUNT_CHECKPOINTS = Query("SELECT count(*) FROM checkpoints WHERE workspace = :ws")
LIST_THREADS = Query(
    "SELECT t.name, t.latest_version, t.latest_id, t.updated_at, c.size_bytes FROM threads AS t "
    "JOIN checkpoints AS c ON c.id = t.latest_id WHERE t.workspace = :ws AND t.latest_version > 0 ORDER BY t.name",
    row=ThreadRow,
)

# -- array segments --------------------------------------------------------------------------------
ADD_SEGMENT = Query("INSERT INTO segments (workspace, prev, data) VALUES (:ws, :prev, :data) RETURNING id")
SEGMENT = Query("SELECT prev, data FROM segments WHERE workspace = :ws AND id = :id", row=SegmentRow)
#: the data of every segment from the start of a chain to `tail`, oldest first
SEGMENT_CHAIN = Query("""
WITH RECURSIVE chain (id, prev, data, depth) AS (
    SELECT id, prev, data, 0 FROM segments WHERE workspace = :ws AND id = :tail
    UNION ALL
    SELECT s.id, s.prev, s.data, chain.depth + 1 FROM segments AS s JOIN chain ON s.id = chain.prev
    WHERE s.workspace = :ws
)
SELECT data FROM chain ORDER BY depth DESC
""")

# -- state schemas ---------------------------------------------------------------------------------
NEXT_SCHEMA_VERSION = Query(
    "SELECT coalesce(max(version), 0) + 1 FROM state_schemas WHERE workspace = :ws AND thread = :thread"
)
INSERT_SCHEMA = Query(
    "INSERT INTO state_schemas (workspace, thread, version, document, created_at) "
    "VALUES (:ws, :thread, :version, :document, :at)"
)

# -- progress --------------------------------------------------------------------------------------
INSERT_PROGRESS = Query(
    "INSERT INTO progress (entry_id, workspace, seq, thread, agent, status, summary, details, next_steps, task_key, "
    "artifacts, created_at) VALUES (:entry_id, :workspace, :seq, :thread, :agent, :status, :summary, :details, "
    ":next_steps, :task_key, :artifacts, :created_at)"
)
COUNT_PROGRESS = Query("SELECT count(*) FROM progress WHERE workspace = :ws")


@cache
def recent_progress(by_thread: bool, by_task: bool, paged: bool) -> Query:
    """Entries newest first (each filter is its own statement, so each finds its index)."""
    where = "workspace = :ws"
    where += " AND thread = :thread" if by_thread else ""
    where += " AND task_key = :task" if by_task else ""
    where += " AND seq < :before" if paged else ""
    sql = f"SELECT {columns(ProgressRow)} FROM progress WHERE {where} ORDER BY seq DESC LIMIT :limit"
    return Query(sql, row=ProgressRow, name=f"recent_progress({by_thread}, {by_task}, {paged})")


# -- idempotency keys ------------------------------------------------------------------------------
STORED_RESULT = Query(
    "SELECT request_hash, result FROM idempotency_keys "
    'WHERE workspace = :ws AND agent = :agent AND tool = :tool AND "key" = :key',
    row=StoredResult,
)
STORE_RESULT = Query(
    'INSERT INTO idempotency_keys (workspace, agent, tool, "key", request_hash, result, created_at) '
    "VALUES (:ws, :agent, :tool, :key, :request_hash, :result, :at)"
)
PURGE_RESULTS = Query("DELETE FROM idempotency_keys WHERE created_at < :before")

# -- bearer tokens ---------------------------------------------------------------------------------
INSERT_TOKEN = Query(
    "INSERT INTO api_tokens (token_hash, token_id, workspace, agent, role, created_at, revoked_at) "
    "VALUES (:token_hash, :token_id, :workspace, :agent, :role, :created_at, NULL)"
)
LIVE_TOKEN = Query(
    f"SELECT {columns(TokenRow)} FROM api_tokens WHERE token_hash = :hash AND revoked_at IS NULL", row=TokenRow
)
TOKENS = Query(f"SELECT {columns(TokenRow)} FROM api_tokens ORDER BY created_at", row=TokenRow)
WORKSPACE_TOKENS = Query(
    f"SELECT {columns(TokenRow)} FROM api_tokens WHERE workspace = :ws ORDER BY created_at", row=TokenRow
)
REVOKE_TOKEN = Query(
    "UPDATE api_tokens SET revoked_at = :at WHERE revoked_at IS NULL AND (token_hash = :hash OR token_id = :id)"
)
REVOKE_AGENT_TOKENS = Query(
    "UPDATE api_tokens SET revoked_at = :at WHERE revoked_at IS NULL AND workspace = :ws AND agent = :agent"
)
COUNT_LIVE_TOKENS = Query("SELECT count(*) FROM api_tokens WHERE revoked_at IS NULL")

for _name, _query in list(globals().items()):
    if isinstance(_query, Query) and not _query.name:
        _query.name = _name
