"""Numbered schema migrations, applied on start inside one write transaction.

Every migration is the literal SQL it ran when it was released, per dialect where they differ, and is
never edited afterwards: a database is exactly what its migrations made it, whatever `tables.py` says
today. `tables.py` declares the same schema for the code; `tests/test_migrations.py` builds a database
from these migrations and compares it with those declarations, so a table changed without a new
migration fails the tests. To change the schema, change `tables.py` and append a migration here.

SQLite: the transaction opens with BEGIN IMMEDIATE, so a second server starting at the same moment
waits for the first. PostgreSQL: a transaction-scoped advisory lock does the same. A database whose
schema is newer than this code is refused: an old server must not write a layout it does not know.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text

from ..errors import Unavailable

log = logging.getLogger(__name__)

#: any fixed 64-bit number; it names the lock every mcp-harness server takes while migrating
ADVISORY_LOCK_ID = 0x6D63_7068_6172_6E73

#: The two types the dialects spell differently in migrations 1 and 2, as SQLAlchemy rendered them:
#: a 64-bit auto-incrementing id (SQLite only auto-increments a column declared exactly INTEGER
#: PRIMARY KEY, and its INTEGER is 64-bit) and bytes. Part of released migrations: never edit.
_V1_TYPES = {
    "sqlite": {"id": "INTEGER", "bytes": "BLOB"},
    "postgresql": {"id": "BIGSERIAL", "bytes": "BYTEA"},
}

_V1_INITIAL = """
CREATE TABLE api_tokens (
    token_hash VARCHAR NOT NULL,
    token_id VARCHAR NOT NULL,
    workspace VARCHAR NOT NULL,
    agent VARCHAR NOT NULL,
    role VARCHAR NOT NULL,
    created_at FLOAT NOT NULL,
    revoked_at FLOAT,
    PRIMARY KEY (token_hash),
    UNIQUE (token_id)
);
CREATE TABLE blobs (
    workspace VARCHAR NOT NULL,
    hash VARCHAR NOT NULL,
    data {bytes} NOT NULL,
    PRIMARY KEY (workspace, hash)
);
CREATE TABLE checkpoints (
    id VARCHAR NOT NULL,
    workspace VARCHAR NOT NULL,
    thread VARCHAR NOT NULL,
    version INTEGER NOT NULL,
    parent_id VARCHAR,
    label VARCHAR,
    metadata_json TEXT,
    manifest TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    agent VARCHAR NOT NULL,
    schema_version INTEGER,
    created_at FLOAT NOT NULL,
    PRIMARY KEY (id),
    CONSTRAINT uq_checkpoint_version UNIQUE (workspace, thread, version)
);
CREATE INDEX ix_checkpoint_label ON checkpoints (workspace, thread, label, version);
CREATE TABLE harness_meta (
    "key" VARCHAR NOT NULL,
    value VARCHAR NOT NULL,
    PRIMARY KEY ("key")
);
CREATE TABLE idempotency_keys (
    workspace VARCHAR NOT NULL,
    agent VARCHAR NOT NULL,
    tool VARCHAR NOT NULL,
    "key" VARCHAR NOT NULL,
    request_hash VARCHAR NOT NULL,
    result TEXT NOT NULL,
    created_at FLOAT NOT NULL,
    PRIMARY KEY (workspace, agent, tool, "key")
);
CREATE INDEX ix_idem_created ON idempotency_keys (created_at);
CREATE TABLE progress (
    id {id} NOT NULL,
    entry_id VARCHAR NOT NULL,
    workspace VARCHAR NOT NULL,
    seq BIGINT NOT NULL,
    thread VARCHAR NOT NULL,
    agent VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    summary TEXT NOT NULL,
    details TEXT,
    next_steps TEXT,
    task_key VARCHAR,
    artifacts TEXT,
    created_at FLOAT NOT NULL,
    PRIMARY KEY (id),
    UNIQUE (entry_id)
);
CREATE INDEX ix_progress_seq ON progress (workspace, seq);
CREATE INDEX ix_progress_task ON progress (workspace, task_key, seq);
CREATE INDEX ix_progress_thread ON progress (workspace, thread, seq);
CREATE TABLE state_schemas (
    workspace VARCHAR NOT NULL,
    thread VARCHAR NOT NULL,
    version INTEGER NOT NULL,
    document TEXT NOT NULL,
    created_at FLOAT NOT NULL,
    PRIMARY KEY (workspace, thread, version)
);
CREATE TABLE task_deps (
    workspace VARCHAR NOT NULL,
    task_key VARCHAR NOT NULL,
    dep_key VARCHAR NOT NULL,
    PRIMARY KEY (workspace, task_key, dep_key)
);
CREATE INDEX ix_task_dep_rev ON task_deps (workspace, dep_key);
CREATE TABLE task_tags (
    workspace VARCHAR NOT NULL,
    tag VARCHAR NOT NULL,
    task_id BIGINT NOT NULL,
    PRIMARY KEY (workspace, tag, task_id)
);
CREATE TABLE tasks (
    id {id} NOT NULL,
    workspace VARCHAR NOT NULL,
    "key" VARCHAR NOT NULL,
    title TEXT NOT NULL,
    description TEXT,
    steps TEXT NOT NULL,
    priority INTEGER NOT NULL,
    depends_on TEXT NOT NULL,
    tags TEXT NOT NULL,
    max_attempts INTEGER NOT NULL,
    dependents INTEGER NOT NULL,
    content_hash VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    ready BOOLEAN NOT NULL,
    blocked BOOLEAN NOT NULL,
    owner VARCHAR,
    lease_token VARCHAR,
    lease_expires_at FLOAT,
    lease_seconds INTEGER,
    attempts INTEGER NOT NULL,
    available_at FLOAT NOT NULL,
    last_error TEXT,
    result TEXT,
    verification TEXT,
    created_at FLOAT NOT NULL,
    updated_at FLOAT NOT NULL,
    completed_at FLOAT,
    PRIMARY KEY (id),
    CONSTRAINT uq_task_key UNIQUE (workspace, "key")
);
CREATE INDEX ix_task_claim ON tasks (workspace, ready, priority DESC, id);
CREATE INDEX ix_task_owner ON tasks (workspace, owner, status);
CREATE TABLE threads (
    workspace VARCHAR NOT NULL,
    name VARCHAR NOT NULL,
    latest_version INTEGER NOT NULL,
    latest_id VARCHAR,
    updated_at FLOAT NOT NULL,
    PRIMARY KEY (workspace, name)
);
CREATE TABLE workspaces (
    name VARCHAR NOT NULL,
    progress_seq BIGINT NOT NULL,
    created_at FLOAT NOT NULL,
    PRIMARY KEY (name)
);
"""

_V2_SEGMENTS = """
CREATE TABLE segments (
    id {id} NOT NULL,
    workspace VARCHAR NOT NULL,
    prev BIGINT,
    data {bytes} NOT NULL,
    PRIMARY KEY (id)
);
DROP INDEX ix_checkpoint_label;
CREATE INDEX ix_checkpoint_label ON checkpoints (workspace, thread, label, version) WHERE label IS NOT NULL;
"""

# SQLite's INTEGER is 64-bit already: nothing to do there.
_V3_BIGINT_VERSIONS_PG = """
ALTER TABLE threads ALTER COLUMN latest_version TYPE BIGINT;
ALTER TABLE checkpoints ALTER COLUMN version TYPE BIGINT;
"""


@dataclass(frozen=True)
class Migration:
    version: int
    what: str
    sql: dict[str, str]  #: dialect name -> statements, each ending with `separator` (not inside one)
    separator: str = ";"  #: migration 6 on: a line holding only `/` (trigger bodies hold `;`)

    def statements(self, dialect: str) -> list[str]:
        return [s.strip() for s in self.sql[dialect].split(self.separator) if s.strip()]


_V4_TASK_EVENTS = """
CREATE TABLE task_events (
    id {id} NOT NULL,
    workspace VARCHAR NOT NULL,
    task_key VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,
    actor VARCHAR NOT NULL,
    attempt INTEGER NOT NULL,
    detail TEXT,
    created_at FLOAT NOT NULL,
    PRIMARY KEY (id)
);
CREATE INDEX ix_task_event_task ON task_events (workspace, task_key, id);
"""

_V5_REVIEW = """
ALTER TABLE tasks ADD COLUMN review BOOLEAN DEFAULT FALSE NOT NULL;
ALTER TABLE tasks ADD COLUMN kind VARCHAR DEFAULT 'work' NOT NULL;
ALTER TABLE tasks ADD COLUMN review_comment TEXT;
"""


# Task counts that cost the same at any size: triggers keep the number of tasks per (workspace, status,
# blocked) in a few rows, which a count sums. PostgreSQL: a key has several rows ("slots"); a change
# adds to the first slot no other transaction holds (SKIP LOCKED) or, all held, to a new one, so
# concurrent claims never wait on a counter row nor deadlock on two (a transaction changing many tasks,
# as adding tasks does, takes its slots in any order; fixed shards such as id % 16 would make two such
# transactions wait on each other). The slots of a key stay about as many as the transactions that ever
# changed it at once (16 claiming workers made 20-32). SQLite's writers are serial: one row per key.
_V6_TASK_COUNTS = """
CREATE TABLE task_counts (
    id {id} NOT NULL,
    workspace VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    blocked BOOLEAN NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (id)
)
/
CREATE INDEX ix_task_counts ON task_counts (workspace, status, blocked)
/
INSERT INTO task_counts (workspace, status, blocked, n)
SELECT workspace, status, blocked, count(*) FROM tasks GROUP BY workspace, status, blocked
/
CREATE INDEX ix_task_board ON tasks (workspace, status, blocked, priority DESC, id)
/
CREATE INDEX ix_task_page ON tasks (workspace, id)
/
CREATE INDEX ix_task_done ON tasks (workspace, completed_at, id) WHERE status = 'done'
/
CREATE INDEX ix_task_failed ON tasks (workspace, updated_at, id) WHERE status = 'failed'
/
"""

_V6_TASK_COUNTS_SQLITE = """
CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks BEGIN
    INSERT INTO task_counts (workspace, status, blocked, n) SELECT NEW.workspace, NEW.status, NEW.blocked, 0
        WHERE NOT EXISTS (SELECT 1 FROM task_counts
                          WHERE workspace = NEW.workspace AND status = NEW.status AND blocked = NEW.blocked);
    UPDATE task_counts SET n = n + 1 WHERE workspace = NEW.workspace AND status = NEW.status AND blocked = NEW.blocked;
END
/
CREATE TRIGGER task_counts_update AFTER UPDATE OF status, blocked ON tasks
WHEN OLD.status IS NOT NEW.status OR OLD.blocked IS NOT NEW.blocked BEGIN
    UPDATE task_counts SET n = n - 1 WHERE workspace = OLD.workspace AND status = OLD.status AND blocked = OLD.blocked;
    INSERT INTO task_counts (workspace, status, blocked, n) SELECT NEW.workspace, NEW.status, NEW.blocked, 0
        WHERE NOT EXISTS (SELECT 1 FROM task_counts
                          WHERE workspace = NEW.workspace AND status = NEW.status AND blocked = NEW.blocked);
    UPDATE task_counts SET n = n + 1 WHERE workspace = NEW.workspace AND status = NEW.status AND blocked = NEW.blocked;
END
/
CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks BEGIN
    UPDATE task_counts SET n = n - 1 WHERE workspace = OLD.workspace AND status = OLD.status AND blocked = OLD.blocked;
END
/
"""

_V6_TASK_COUNTS_PG = """
CREATE FUNCTION mcp_harness_count_tasks(ws VARCHAR, st VARCHAR, bl BOOLEAN, d INTEGER) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    slot BIGINT;
BEGIN
    SELECT id INTO slot FROM task_counts WHERE workspace = ws AND status = st AND blocked = bl
        LIMIT 1 FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
        UPDATE task_counts SET n = n + d WHERE id = slot;
    ELSE
        INSERT INTO task_counts (workspace, status, blocked, n) VALUES (ws, st, bl, d);
    END IF;
END
$$
/
CREATE FUNCTION mcp_harness_task_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM mcp_harness_count_tasks(OLD.workspace, OLD.status, OLD.blocked, -1);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM mcp_harness_count_tasks(NEW.workspace, NEW.status, NEW.blocked, 1);
    END IF;
    RETURN NULL;
END
$$
/
CREATE TRIGGER task_counts_insert_delete AFTER INSERT OR DELETE ON tasks
FOR EACH ROW EXECUTE FUNCTION mcp_harness_task_counts()
/
CREATE TRIGGER task_counts_update AFTER UPDATE OF status, blocked ON tasks FOR EACH ROW
WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.blocked IS DISTINCT FROM NEW.blocked)
EXECUTE FUNCTION mcp_harness_task_counts()
/
"""


def _both(sql: str) -> dict[str, str]:
    return {dialect: sql.format(**types) for dialect, types in _V1_TYPES.items()}


# Workspaces that hold only tasks had no row (adding tasks did not make one): list, export and import
# passed them over. Adding tasks makes it now; this gives the ones already there theirs.
_V7_TASK_WORKSPACES = """
INSERT INTO workspaces (name, progress_seq, created_at)
SELECT workspace, 0, min(created_at) FROM tasks
WHERE workspace NOT IN (SELECT name FROM workspaces) GROUP BY workspace;
"""


_V8_CONSOLE_SESSIONS = """CREATE TABLE console_sessions (session_hash VARCHAR NOT NULL, token_hash VARCHAR NOT NULL,
    created_at FLOAT NOT NULL, expires_at FLOAT NOT NULL, PRIMARY KEY (session_hash));
CREATE INDEX ix_console_session_token ON console_sessions (token_hash);
"""


#: Append only; never edit a released migration.
MIGRATIONS: list[Migration] = [
    Migration(1, "initial schema", _both(_V1_INITIAL)),
    Migration(2, "array segments; partial label index", _both(_V2_SEGMENTS)),
    Migration(3, "64-bit checkpoint versions", {"sqlite": "", "postgresql": _V3_BIGINT_VERSIONS_PG}),
    Migration(4, "task events: every transition of a task, with its actor and time", _both(_V4_TASK_EVENTS)),
    Migration(5, "review gates: tasks.review, tasks.kind (work or gate), tasks.review_comment", _both(_V5_REVIEW)),
    Migration(6, "task counts kept by triggers; indexes for the task list's pages and the board's columns",
              {"sqlite": _V6_TASK_COUNTS.format(**_V1_TYPES["sqlite"]) + _V6_TASK_COUNTS_SQLITE,
               "postgresql": _V6_TASK_COUNTS.format(**_V1_TYPES["postgresql"]) + _V6_TASK_COUNTS_PG},
              separator="\n/\n"),
    Migration(7, "a row for every workspace that holds only tasks", _both(_V7_TASK_WORKSPACES)),
    Migration(8, "console sessions: a hash of the session id, bound to its token", _both(_V8_CONSOLE_SESSIONS)),
]  # fmt: skip
SCHEMA_VERSION = MIGRATIONS[-1].version


async def _execute(conn: Any, sql: str, params: dict[str, Any] | None = None) -> Any:
    """Run one statement of literal SQL (`:name` parameters) in the caller's transaction."""
    return await conn.execute(text(sql), params or {})


async def current_version(conn: Any, dialect: str) -> int:
    """The schema version recorded in the database, 0 for an empty database."""
    exists = ("SELECT to_regclass('harness_meta') IS NOT NULL" if dialect == "postgresql"
              else "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'harness_meta'")  # fmt: skip
    if not (await _execute(conn, exists)).scalar():
        return 0
    row = (await _execute(conn, "SELECT value FROM harness_meta WHERE \"key\" = 'schema_version'")).first()
    return int(row[0]) if row else 0


async def _set_meta(conn: Any, key: str, value: str) -> None:
    await _execute(conn, 'DELETE FROM harness_meta WHERE "key" = :key', {"key": key})
    await _execute(conn, 'INSERT INTO harness_meta ("key", value) VALUES (:key, :value)', {"key": key, "value": value})


async def migrate(conn: Any, dialect: str) -> int:
    """Bring the schema up to `SCHEMA_VERSION` inside the caller's write transaction (a connection
    whose `execute` runs SQLAlchemy `text()`); returns the version found before."""
    if dialect == "postgresql":
        await _execute(conn, "SELECT pg_advisory_xact_lock(:id)", {"id": ADVISORY_LOCK_ID})
    found = await current_version(conn, dialect)
    if found > SCHEMA_VERSION:
        raise Unavailable(
            f"this database was written by a newer mcp-harness (schema version {found}; this version "
            f"understands up to {SCHEMA_VERSION}): upgrade mcp-harness to use it"
        )
    if found == SCHEMA_VERSION:
        return found
    for migration in MIGRATIONS:
        if migration.version > found:
            for statement in migration.statements(dialect):
                await _execute(conn, statement)
    await _set_meta(conn, "schema_version", str(SCHEMA_VERSION))
    await _set_meta(conn, "migrated_at", repr(time.time()))
    log.info("database schema migrated from version %d to %d", found, SCHEMA_VERSION)
    return found
