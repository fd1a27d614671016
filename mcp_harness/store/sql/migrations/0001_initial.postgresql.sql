-- 1: initial schema
-- The two types the dialects spell differently (as SQLAlchemy rendered them for migrations 1 and 2):
-- a 64-bit auto-incrementing id (SQLite only auto-increments a column declared exactly INTEGER
-- PRIMARY KEY, and its INTEGER is 64-bit; PostgreSQL: BIGSERIAL) and bytes (BLOB; BYTEA).
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
)
/
CREATE TABLE blobs (
    workspace VARCHAR NOT NULL,
    hash VARCHAR NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (workspace, hash)
)
/
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
)
/
CREATE INDEX ix_checkpoint_label ON checkpoints (workspace, thread, label, version)
/
CREATE TABLE harness_meta (
    "key" VARCHAR NOT NULL,
    value VARCHAR NOT NULL,
    PRIMARY KEY ("key")
)
/
CREATE TABLE idempotency_keys (
    workspace VARCHAR NOT NULL,
    agent VARCHAR NOT NULL,
    tool VARCHAR NOT NULL,
    "key" VARCHAR NOT NULL,
    request_hash VARCHAR NOT NULL,
    result TEXT NOT NULL,
    created_at FLOAT NOT NULL,
    PRIMARY KEY (workspace, agent, tool, "key")
)
/
CREATE INDEX ix_idem_created ON idempotency_keys (created_at)
/
CREATE TABLE progress (
    id BIGSERIAL NOT NULL,
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
)
/
CREATE INDEX ix_progress_seq ON progress (workspace, seq)
/
CREATE INDEX ix_progress_task ON progress (workspace, task_key, seq)
/
CREATE INDEX ix_progress_thread ON progress (workspace, thread, seq)
/
CREATE TABLE state_schemas (
    workspace VARCHAR NOT NULL,
    thread VARCHAR NOT NULL,
    version INTEGER NOT NULL,
    document TEXT NOT NULL,
    created_at FLOAT NOT NULL,
    PRIMARY KEY (workspace, thread, version)
)
/
CREATE TABLE task_deps (
    workspace VARCHAR NOT NULL,
    task_key VARCHAR NOT NULL,
    dep_key VARCHAR NOT NULL,
    PRIMARY KEY (workspace, task_key, dep_key)
)
/
CREATE INDEX ix_task_dep_rev ON task_deps (workspace, dep_key)
/
CREATE TABLE task_tags (
    workspace VARCHAR NOT NULL,
    tag VARCHAR NOT NULL,
    task_id BIGINT NOT NULL,
    PRIMARY KEY (workspace, tag, task_id)
)
/
CREATE TABLE tasks (
    id BIGSERIAL NOT NULL,
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
)
/
CREATE INDEX ix_task_claim ON tasks (workspace, ready, priority DESC, id)
/
CREATE INDEX ix_task_owner ON tasks (workspace, owner, status)
/
CREATE TABLE threads (
    workspace VARCHAR NOT NULL,
    name VARCHAR NOT NULL,
    latest_version INTEGER NOT NULL,
    latest_id VARCHAR,
    updated_at FLOAT NOT NULL,
    PRIMARY KEY (workspace, name)
)
/
CREATE TABLE workspaces (
    name VARCHAR NOT NULL,
    progress_seq BIGINT NOT NULL,
    created_at FLOAT NOT NULL,
    PRIMARY KEY (name)
)
/
