-- Workspace rows: made by a workspace's first write; they hold its counters.

-- name: ensure_workspace
INSERT INTO workspaces (name, progress_seq, created_at) VALUES (:ws, 0, :at) ON CONFLICT DO NOTHING

-- name: next_progress_seq
-- The row lock this takes (or SQLite's write lock) is held to commit: seqs commit in the order given.
UPDATE workspaces SET progress_seq = progress_seq + 1 WHERE name = :ws RETURNING progress_seq
