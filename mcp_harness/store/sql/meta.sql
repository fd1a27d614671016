-- Facts about the database itself (harness_meta), read and written by the migration runner.

-- name: migration_lock [postgresql]
-- Held while migrating: a second server starting at once waits, then finds the schema done
-- (SQLite: the runner's BEGIN IMMEDIATE does the same).
SELECT pg_advisory_xact_lock(:id)

-- name: meta_exists
SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'harness_meta'

-- name: meta_exists [postgresql]
SELECT to_regclass('harness_meta') IS NOT NULL

-- name: get_meta
SELECT value FROM harness_meta WHERE "key" = :key

-- name: delete_meta
DELETE FROM harness_meta WHERE "key" = :key

-- name: insert_meta
INSERT INTO harness_meta ("key", value) VALUES (:key, :value)
