"""Every statement the store runs on its `Connection`: literal SQL with `:name` parameters.

Written once where SQLite and PostgreSQL agree, once each where they differ (row locks, how a list
is passed). A statement that comes in a few shapes (optional filters, the columns an update sets) is
built by a cached function, so each shape is one fixed statement that the driver prepares once.
Each constant's name is its `Query.name`. Cold paths (export/import, prune, migrations) use
SQLAlchemy over `tables.py` instead; see `backup.py` and `migrations.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from .connection import Query
from .records import (
    CheckpointRow,
    CheckpointWithManifest,
    DependencyRow,
    EmptyClaimFacts,
    ProgressRow,
    SegmentRow,
    StoredResult,
    TaskCountRow,
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

# -- tasks -----------------------------------------------------------------------------------------
TASK_BY_KEY = Query(f'SELECT {TASK} FROM tasks WHERE workspace = :ws AND "key" = :key', row=TaskRecord)
TASKS_BY_KEY = _both(
    lambda d: f"SELECT {TASK} FROM tasks WHERE workspace = :ws AND {in_array(_KEY, 'keys', d)}", row=TaskRecord
)
INSERT_TASK = Query(
    'INSERT INTO tasks (workspace, "key", title, description, steps, priority, depends_on, tags, max_attempts, '
    "dependents, content_hash, status, ready, blocked, attempts, available_at, created_at, updated_at) VALUES "
    "(:workspace, :key, :title, :description, :steps, :priority, :depends_on, :tags, :max_attempts, :dependents, "
    ":content_hash, :status, :ready, :blocked, 0, :available_at, :created_at, :updated_at) RETURNING id"
)
INSERT_DEPENDENCY = Query("INSERT INTO task_deps (workspace, task_key, dep_key) VALUES (:ws, :task_key, :dep_key)")
INSERT_TAG = Query("INSERT INTO task_tags (workspace, tag, task_id) VALUES (:ws, :tag, :task_id)")
ADD_DEPENDENTS = Query('UPDATE tasks SET dependents = dependents + :n WHERE workspace = :ws AND "key" = :key')
#: PostgreSQL plans the claim by these statistics (see `tasks.refresh_statistics`)
ANALYZE_TASKS = Query("ANALYZE tasks, task_deps, task_tags")
FAIL_EXPIRED_EXHAUSTED = Query(
    "UPDATE tasks SET status = 'failed', ready = FALSE, lease_token = NULL, "
    "last_error = 'the lease expired on the last allowed attempt', updated_at = :now "
    "WHERE workspace = :ws AND status = 'claimed' AND lease_expires_at <= :now AND attempts >= max_attempts "
    'RETURNING "key"'
)
HELD_BY = Query(
    f"SELECT {TASK} FROM tasks WHERE workspace = :ws AND owner = :agent AND status = 'claimed' ORDER BY id",
    row=TaskRecord,
)
TASK_COUNTS = Query(
    "SELECT status, blocked, count(*) AS n FROM tasks WHERE workspace = :ws GROUP BY status, blocked", row=TaskCountRow
)
DEPENDENTS_OF = _both(
    lambda d: f"SELECT task_key FROM task_deps WHERE workspace = :ws AND {in_array('dep_key', 'keys', d)}"
)
DEPENDENCIES_OF = _both(
    lambda d: (
        "SELECT d.task_key, t.status, t.blocked FROM task_deps AS d "
        'JOIN tasks AS t ON t.workspace = d.workspace AND t."key" = d.dep_key '
        f"WHERE d.workspace = :ws AND {in_array('d.task_key', 'keys', d)}"
    ),
    row=DependencyRow,
)
SET_FLAGS = Query('UPDATE tasks SET ready = :ready, blocked = :blocked WHERE workspace = :ws AND "key" = :key')
#: a claimed task whose dependency is no longer done goes back to pending, its attempt given back
REVOKE_FOR_REOPENED_DEPENDENCY = Query(
    "UPDATE tasks SET ready = :ready, blocked = :blocked, status = 'pending', owner = NULL, lease_token = NULL, "
    'lease_expires_at = NULL, attempts = :attempts, last_error = :error WHERE workspace = :ws AND "key" = :key'
)


def _tagged(dialect: str) -> str:
    """The task carries one of the tags in `:tags`."""
    return f" AND id IN (SELECT task_id FROM task_tags WHERE workspace = :ws AND {in_array('tag', 'tags', dialect)})"


def _claimable(by_tags: bool, by_key: bool, dialect: str) -> str:
    """The best claimable task: open and runnable (`ix_task_claim`), pending past its backoff or
    claimed with a lease that ran out and attempts left, highest priority first, then oldest."""
    where = "workspace = :ws AND ready = TRUE"
    if by_tags:
        where += (
            f" AND id IN (SELECT task_id FROM task_tags WHERE workspace = :ws AND {in_array('tag', 'tags', dialect)})"
        )
    if by_key:
        where += ' AND "key" = :key'
    where += (
        " AND ((status = 'pending' AND available_at <= :now)"
        " OR (status = 'claimed' AND lease_expires_at <= :now AND attempts < max_attempts))"
    )
    return f"SELECT id FROM tasks WHERE {where} ORDER BY priority DESC, id LIMIT 1"


@cache
def claimable(by_tags: bool, by_key: bool) -> Query:
    """Whether a claim would get a task now (what waiting claims poll)."""
    return _both(lambda d: _claimable(by_tags, by_key, d), name=f"claimable({by_tags}, {by_key})")


@cache
def claim(by_tags: bool, by_key: bool) -> Query:
    """Take the best claimable task: ONE statement. PostgreSQL skips rows another claim holds;
    SQLite's BEGIN IMMEDIATE already keeps other writers out."""

    def sql(dialect: str) -> str:
        lock = " FOR UPDATE SKIP LOCKED" if dialect == "postgresql" else ""
        return (
            "UPDATE tasks SET status = 'claimed', owner = :agent, lease_token = :token, lease_expires_at = :expires, "
            "lease_seconds = :lease, attempts = attempts + 1, updated_at = :now "
            f"WHERE id = ({_claimable(by_tags, by_key, dialect)}{lock}) RETURNING {TASK}"
        )

    return _both(sql, row=TaskRecord, name=f"claim({by_tags}, {by_key})")


def _assignments(values: tuple[str, ...]) -> str:
    unknown = set(values) - set(TaskRecord._fields)
    if unknown:
        raise ValueError(f"not columns of tasks: {sorted(unknown)}")
    return ", ".join(f"{c} = :v_{c}" for c in values)


@cache
def update_leased(values: tuple[str, ...], leaf_only: bool) -> Query:
    """Set `values` (parameters `v_<column>`) on a claimed task only if the lease token matches (the
    fence); with `leaf_only`, only if no task depends on it."""
    where = "workspace = :ws AND \"key\" = :key AND status = 'claimed' AND lease_token = :token"
    where += " AND dependents = 0" if leaf_only else ""
    sql = f"UPDATE tasks SET {_assignments(values)} WHERE {where} RETURNING {TASK}"
    return Query(sql, row=TaskRecord, name=f"update_leased({', '.join(values)}; leaf_only={leaf_only})")


@cache
def update_in_status(values: tuple[str, ...]) -> Query:
    """Set `values` (parameters `v_<column>`) on a task whose status is one of `:statuses`."""
    return _both(
        lambda d: (
            f'UPDATE tasks SET {_assignments(values)} WHERE workspace = :ws AND "key" = :key '
            f"AND {in_array('status', 'statuses', d)} RETURNING {TASK}"
        ),
        row=TaskRecord,
        name=f"update_in_status({', '.join(values)})",
    )


@cache
def why_nothing(by_tags: bool, by_key: bool) -> Query:
    """Facts behind an empty claim, over the tasks the claim's filters match."""

    def sql(dialect: str) -> str:
        where = "workspace = :ws"
        if by_tags:
            where += _tagged(dialect)
        if by_key:
            where += ' AND "key" = :key'
        return (
            "SELECT count(*) AS total, "
            "count(*) FILTER (WHERE status = 'pending' AND ready = FALSE) AS waiting_on_deps, "
            "count(*) FILTER (WHERE status = 'claimed') AS claimed, "
            "count(*) FILTER (WHERE status IN ('done', 'failed')) AS finished, "
            "min(available_at) FILTER (WHERE status = 'pending' AND ready = TRUE AND available_at > :now) "
            f"AS next_available_at FROM tasks WHERE {where}"
        )

    return Query(
        sql("sqlite"), postgresql=sql("postgresql"), row=EmptyClaimFacts, name=f"why_nothing({by_tags}, {by_key})"
    )


@cache
def task_page(by_status: bool, by_tag: bool) -> Query:
    """Tasks in creation order after `:after`; `:statuses` may name `blocked` (pending with a failed
    dependency, which `pending` then leaves out)."""

    def sql(dialect: str) -> str:
        where = "workspace = :ws AND id > :after"
        if by_tag:
            where += " AND id IN (SELECT task_id FROM task_tags WHERE workspace = :ws AND tag = :tag)"
        if by_status:
            shown = "(CASE WHEN status = 'pending' AND blocked THEN 'blocked' ELSE status END)"
            where += " AND " + in_array(shown, "statuses", dialect)
        return f"SELECT {TASK} FROM tasks WHERE {where} ORDER BY id LIMIT :limit"

    return _both(sql, row=TaskRecord, name=f"task_page({by_status}, {by_tag})")


for _name, _query in list(globals().items()):
    if isinstance(_query, Query) and not _query.name:
        _query.name = _name
