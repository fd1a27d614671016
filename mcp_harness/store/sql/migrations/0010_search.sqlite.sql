-- 10: full-text search over the progress log and the tasks, built for the rows already there
-- SQLite: FTS5 tables over the rows' own text, kept in step by triggers; PostgreSQL: GIN indexes over
-- each row's tsvector (english). The same statements as store/sql/search.sql declares.
CREATE VIRTUAL TABLE progress_fts USING fts5(summary, details, content='progress', content_rowid='id',
    tokenize='porter unicode61')
/
CREATE TRIGGER progress_fts_insert AFTER INSERT ON progress BEGIN
    INSERT INTO progress_fts (rowid, summary, details) VALUES (NEW.id, NEW.summary, NEW.details);
END
/
CREATE TRIGGER progress_fts_delete AFTER DELETE ON progress BEGIN
    INSERT INTO progress_fts (progress_fts, rowid, summary, details) VALUES ('delete', OLD.id, OLD.summary, OLD.details);
END
/
CREATE VIRTUAL TABLE tasks_fts USING fts5(title, description, result, verification, content='tasks',
    content_rowid='id', tokenize='porter unicode61')
/
CREATE TRIGGER tasks_fts_insert AFTER INSERT ON tasks BEGIN
    INSERT INTO tasks_fts (rowid, title, description, result, verification)
    VALUES (NEW.id, NEW.title, NEW.description, NEW.result, NEW.verification);
END
/
CREATE TRIGGER tasks_fts_delete AFTER DELETE ON tasks BEGIN
    INSERT INTO tasks_fts (tasks_fts, rowid, title, description, result, verification)
    VALUES ('delete', OLD.id, OLD.title, OLD.description, OLD.result, OLD.verification);
END
/
CREATE TRIGGER tasks_fts_update AFTER UPDATE OF title, description, result, verification ON tasks BEGIN
    INSERT INTO tasks_fts (tasks_fts, rowid, title, description, result, verification)
    VALUES ('delete', OLD.id, OLD.title, OLD.description, OLD.result, OLD.verification);
    INSERT INTO tasks_fts (rowid, title, description, result, verification)
    VALUES (NEW.id, NEW.title, NEW.description, NEW.result, NEW.verification);
END
/
INSERT INTO progress_fts (progress_fts) VALUES ('rebuild')
/
INSERT INTO tasks_fts (tasks_fts) VALUES ('rebuild')
/
