-- How a full-text search runs (the searches themselves are built in queries.py): its time limit.

-- name: search_time_limit [postgresql]
-- Every statement of the search's transaction is stopped past `:ms` milliseconds (the setting ends with it).
SELECT set_config('statement_timeout', :ms, true)

-- SQLite ranks a workspace's matches by bm25 over that workspace's own entries, as if it had an index of
-- its own (the shared index's statistics would let one workspace's words move another's order): the
-- entries are copied into a temporary FTS5 table of the search's connection, searched and ranked there.

-- name: progress_rank_table [sqlite]
-- Made once per connection, outside any transaction (`Database.search_read`); a search makes sure of it.
CREATE VIRTUAL TABLE IF NOT EXISTS temp.progress_rank USING fts5(summary, details, tokenize='porter unicode61')

-- name: progress_rank_clear [sqlite]
DELETE FROM temp.progress_rank

-- name: workspace_entries_upto
-- How many entries the workspace has, counted up to `:n` (a bounded walk of its index): a small workspace
-- is searched in its own entries alone, on both backends.
SELECT count(*) FROM (SELECT 1 FROM progress WHERE workspace = :ws LIMIT :n) AS w

-- name: workspace_tasks_upto
-- How many tasks the workspace has, counted up to `:n` (PostgreSQL searches a small one's tasks apart).
SELECT count(*) FROM (SELECT 1 FROM tasks WHERE workspace = :ws LIMIT :n) AS w

-- name: progress_rank_workspace [sqlite]
-- A small workspace: all its entries (its search never reads the shared index).
INSERT INTO temp.progress_rank (rowid, summary, details) SELECT id, summary, details FROM progress WHERE workspace = :ws

-- name: progress_rank_matches [sqlite]
-- A big one: its `:n` matches written last, found in the shared index, read newest first from it (CROSS
-- JOIN: the index drives; in rowid order it needs no sort and stops at the `:n`th of the workspace's);
-- copied in rowid order (FTS5 writes out what it holds whenever a rowid comes before the last one).
INSERT INTO temp.progress_rank (rowid, summary, details)
SELECT id, summary, details FROM (
    SELECT p.id, p.summary, p.details FROM progress_fts CROSS JOIN progress AS p ON p.id = progress_fts.rowid
    WHERE progress_fts MATCH :q AND p.workspace = :ws ORDER BY progress_fts.rowid DESC LIMIT :n
) ORDER BY id
