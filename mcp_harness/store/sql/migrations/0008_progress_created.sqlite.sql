-- 8: progress by time (scratch: proves the recipe)
CREATE INDEX ix_progress_created ON progress (workspace, created_at)
/
