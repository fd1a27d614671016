-- Is the database there, and would it take a write; how big is it; give pruned pages back.

-- name: ping
SELECT 1

-- name: ping [postgresql]
-- Answers "on" from a read-only PostgreSQL (a standby, or default_transaction_read_only).
SHOW transaction_read_only

-- name: database_size [postgresql]
SELECT pg_database_size(current_database())

-- name: vacuum_pruned [postgresql]
-- After a prune, outside any transaction (SQLite: VACUUM and a WAL checkpoint, see engine.py).
VACUUM (ANALYZE) blobs, checkpoints
