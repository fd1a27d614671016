-- 7: a row for every workspace that holds only tasks
-- Workspaces that hold only tasks had no row (adding tasks did not make one): list, export and import
-- passed them over. Adding tasks makes it now; this gives the ones already there theirs.
INSERT INTO workspaces (name, progress_seq, created_at)
SELECT workspace, 0, min(created_at) FROM tasks
WHERE workspace NOT IN (SELECT name FROM workspaces) GROUP BY workspace
/
