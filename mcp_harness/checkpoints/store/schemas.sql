-- Per-thread JSON Schemas.

-- name: next_schema_version
SELECT coalesce(max(version), 0) + 1 FROM state_schemas WHERE workspace = :ws AND thread = :thread

-- name: insert_schema
INSERT INTO state_schemas (workspace, thread, version, document, created_at)
VALUES (:ws, :thread, :version, :document, :at)
