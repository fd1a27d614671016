-- 10: full-text search over the progress log and the tasks, built for the rows already there
-- SQLite: FTS5 tables over the rows' own text, kept in step by triggers; PostgreSQL: GIN indexes over
-- each row's tsvector (english). The same statements as store/sql/search.sql declares.
CREATE INDEX ix_progress_search ON progress
USING gin (to_tsvector('english'::regconfig, summary || ' ' || coalesce(details, '')))
/
CREATE INDEX ix_task_search ON tasks USING gin (to_tsvector('english'::regconfig,
    title || ' ' || coalesce(description, '') || ' ' || coalesce(result, '') || ' ' || coalesce(verification, '')))
/
