-- Full-text search over the progress log and the tasks (see migration 10), as the schema declares it:
-- tables.py creates these with the tables, and tests/test_migrations.py compares them with what the
-- migrations made. A migration that changes one changes it here too.
-- SQLite: FTS5 tables over the rows' own text (external content: the text is not stored twice), kept in
-- step by triggers in the writer's transaction. PostgreSQL: GIN indexes over the rows' tsvector, which
-- the index itself keeps in step. The searches are in progress.sql and tasks_search.sql.

-- name: progress_fts [sqlite]
CREATE VIRTUAL TABLE progress_fts USING fts5(summary, details, content='progress', content_rowid='id',
    tokenize='porter unicode61')

-- name: progress_fts_insert [sqlite]
CREATE TRIGGER progress_fts_insert AFTER INSERT ON progress BEGIN
    INSERT INTO progress_fts (rowid, summary, details) VALUES (NEW.id, NEW.summary, NEW.details);
END

-- name: progress_fts_delete [sqlite]
CREATE TRIGGER progress_fts_delete AFTER DELETE ON progress BEGIN
    INSERT INTO progress_fts (progress_fts, rowid, summary, details) VALUES ('delete', OLD.id, OLD.summary, OLD.details);
END

-- name: tasks_fts [sqlite]
CREATE VIRTUAL TABLE tasks_fts USING fts5(title, description, result, verification, content='tasks',
    content_rowid='id', tokenize='porter unicode61')

-- name: tasks_fts_insert [sqlite]
CREATE TRIGGER tasks_fts_insert AFTER INSERT ON tasks BEGIN
    INSERT INTO tasks_fts (rowid, title, description, result, verification)
    VALUES (NEW.id, NEW.title, NEW.description, NEW.result, NEW.verification);
END

-- name: tasks_fts_delete [sqlite]
CREATE TRIGGER tasks_fts_delete AFTER DELETE ON tasks BEGIN
    INSERT INTO tasks_fts (tasks_fts, rowid, title, description, result, verification)
    VALUES ('delete', OLD.id, OLD.title, OLD.description, OLD.result, OLD.verification);
END

-- name: tasks_fts_update [sqlite]
CREATE TRIGGER tasks_fts_update AFTER UPDATE OF title, description, result, verification ON tasks BEGIN
    INSERT INTO tasks_fts (tasks_fts, rowid, title, description, result, verification)
    VALUES ('delete', OLD.id, OLD.title, OLD.description, OLD.result, OLD.verification);
    INSERT INTO tasks_fts (rowid, title, description, result, verification)
    VALUES (NEW.id, NEW.title, NEW.description, NEW.result, NEW.verification);
END

-- name: ix_progress_search [postgresql]
CREATE INDEX ix_progress_search ON progress
USING gin (to_tsvector('english'::regconfig, summary || ' ' || coalesce(details, '')))

-- name: ix_task_search [postgresql]
CREATE INDEX ix_task_search ON tasks USING gin (to_tsvector('english'::regconfig,
    title || ' ' || coalesce(description, '') || ' ' || coalesce(result, '') || ' ' || coalesce(verification, '')))
