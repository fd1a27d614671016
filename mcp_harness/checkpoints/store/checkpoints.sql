-- Threads, checkpoints and content-addressed values (blobs).

-- name: lock_thread
-- row: ThreadHead
-- What a save needs in one statement: the latest version, its id and manifest, the newest schema.
SELECT t.latest_version AS version, t.latest_id AS checkpoint_id, c.manifest,
       s.version AS schema_version, s.document AS schema_document
FROM threads AS t
LEFT JOIN checkpoints AS c ON c.id = t.latest_id
LEFT JOIN state_schemas AS s ON s.workspace = t.workspace AND s.thread = t.name
    AND s.version = (SELECT max(version) FROM state_schemas WHERE workspace = t.workspace AND thread = t.name)
WHERE t.workspace = :ws AND t.name = :thread

-- name: lock_thread [postgresql]
-- row: ThreadHead
-- The row lock orders saves to one thread across hosts (SQLite's BEGIN IMMEDIATE does already).
SELECT t.latest_version AS version, t.latest_id AS checkpoint_id, c.manifest,
       s.version AS schema_version, s.document AS schema_document
FROM threads AS t
LEFT JOIN checkpoints AS c ON c.id = t.latest_id
LEFT JOIN state_schemas AS s ON s.workspace = t.workspace AND s.thread = t.name
    AND s.version = (SELECT max(version) FROM state_schemas WHERE workspace = t.workspace AND thread = t.name)
WHERE t.workspace = :ws AND t.name = :thread
FOR UPDATE OF t

-- name: save_values_lock [postgresql]
-- A save holds this (shared) to commit, prune's value clean-up the exclusive one (prune_values_lock),
-- so a save that references a stored value (its INSERT ... ON CONFLICT DO NOTHING finds it, or it
-- appends after a list's segment) never commits between prune's scan of the manifests and its
-- deletes. SQLite's write transactions (BEGIN IMMEDIATE) are serial already.
-- Keyed per workspace: (a constant for mcp-harness, hashtext(workspace)).
SELECT pg_advisory_xact_lock_shared(1835233384, hashtext(:ws))

-- name: prune_values_lock [postgresql]
SELECT pg_advisory_xact_lock(1835233384, hashtext(:ws))

-- name: insert_thread
INSERT INTO threads (workspace, name, latest_version, latest_id, updated_at)
VALUES (:ws, :thread, 0, NULL, :at) ON CONFLICT DO NOTHING

-- name: advance_thread
UPDATE threads SET latest_version = :version, latest_id = :id, updated_at = :at
WHERE workspace = :ws AND name = :thread

-- name: insert_checkpoint
INSERT INTO checkpoints (id, workspace, thread, version, parent_id, label, metadata_json, manifest, size_bytes,
    agent, schema_version, created_at)
VALUES (:id, :workspace, :thread, :version, :parent_id, :label, :metadata_json, :manifest, :size_bytes,
    :agent, :schema_version, :created_at)

-- name: insert_blob
INSERT INTO blobs (workspace, hash, data) VALUES (:ws, :hash, :data) ON CONFLICT DO NOTHING

-- name: blob
SELECT data FROM blobs WHERE workspace = :ws AND hash = :hash

-- name: blobs
-- :hashes is a list (`connection.array()`): JSON text on SQLite, an array on PostgreSQL.
SELECT hash, data FROM blobs WHERE workspace = :ws AND hash IN (SELECT value FROM json_each(:hashes))

-- name: blobs [postgresql]
SELECT hash, data FROM blobs WHERE workspace = :ws AND hash = ANY(:hashes)

-- name: checkpoint_by_id
-- row: CheckpointWithManifest
SELECT {columns}
FROM checkpoints WHERE workspace = :ws AND id = :id

-- name: checkpoint_by_version
-- row: CheckpointWithManifest
SELECT {columns}
FROM checkpoints WHERE workspace = :ws AND thread = :thread AND version = :version

-- name: checkpoint_by_label
-- row: CheckpointWithManifest
-- The newest with the label (ix_checkpoint_label).
SELECT {columns}
FROM checkpoints WHERE workspace = :ws AND thread = :thread AND label = :label ORDER BY version DESC LIMIT 1

-- name: latest_checkpoint
-- row: CheckpointWithManifest
SELECT {columns}
FROM checkpoints WHERE workspace = :ws AND thread = :thread ORDER BY version DESC LIMIT 1

-- name: list_checkpoints
-- row: CheckpointRow
SELECT {columns}
FROM checkpoints WHERE workspace = :ws AND thread = :thread ORDER BY version DESC LIMIT :limit

-- name: list_checkpoints_before
-- row: CheckpointRow
SELECT {columns}
FROM checkpoints WHERE workspace = :ws AND thread = :thread AND version < :before
ORDER BY version DESC LIMIT :limit

-- name: largest_checkpoints
-- row: CheckpointRow
SELECT {columns}
FROM checkpoints WHERE workspace = :ws ORDER BY size_bytes DESC, created_at DESC LIMIT :limit

-- name: count_checkpoints
SELECT count(*) FROM checkpoints WHERE workspace = :ws

-- name: list_threads
-- row: ThreadRow
SELECT t.name, t.latest_version, t.latest_id, t.updated_at, c.size_bytes FROM threads AS t
JOIN checkpoints AS c ON c.id = t.latest_id WHERE t.workspace = :ws AND t.latest_version > 0 ORDER BY t.name

-- name: behind_checkpoint
-- How many progress entries (of the workspace's newest :cap, read by `ix_progress_seq`) and task events
-- (at most :cap, by `ix_task_event_time`) were written after the checkpoint :id was saved: bounded reads.
WITH saved AS (SELECT created_at FROM checkpoints WHERE workspace = :ws AND id = :id)
SELECT
    (SELECT count(*) FROM (SELECT created_at FROM progress WHERE workspace = :ws ORDER BY seq DESC LIMIT :cap) AS p
     WHERE p.created_at > (SELECT created_at FROM saved)) AS progress,
    (SELECT count(*) FROM (SELECT id FROM task_events WHERE workspace = :ws
                           AND created_at > (SELECT created_at FROM saved) LIMIT :cap) AS e) AS task_changes
