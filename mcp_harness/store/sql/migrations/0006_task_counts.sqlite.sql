-- 6: task counts kept by triggers; indexes for the task list's pages and the board's columns
-- Task counts that cost the same at any size: triggers keep the number of tasks per (workspace, status,
-- blocked) in a few rows, which a count sums. PostgreSQL: a key has several rows ("slots"); a change
-- adds to the first slot no other transaction holds (SKIP LOCKED) or, all held, to a new one, so
-- concurrent claims never wait on a counter row nor deadlock on two (a transaction changing many tasks,
-- as adding tasks does, takes its slots in any order; fixed shards such as id % 16 would make two such
-- transactions wait on each other). The slots of a key stay about as many as the transactions that ever
-- changed it at once (16 claiming workers made 20-32). SQLite's writers are serial: one row per key.
CREATE TABLE task_counts (
    id INTEGER NOT NULL,
    workspace VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    blocked BOOLEAN NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (id)
)
/
CREATE INDEX ix_task_counts ON task_counts (workspace, status, blocked)
/
INSERT INTO task_counts (workspace, status, blocked, n)
SELECT workspace, status, blocked, count(*) FROM tasks GROUP BY workspace, status, blocked
/
CREATE INDEX ix_task_board ON tasks (workspace, status, blocked, priority DESC, id)
/
CREATE INDEX ix_task_page ON tasks (workspace, id)
/
CREATE INDEX ix_task_done ON tasks (workspace, completed_at, id) WHERE status = 'done'
/
CREATE INDEX ix_task_failed ON tasks (workspace, updated_at, id) WHERE status = 'failed'
/
CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks BEGIN
    INSERT INTO task_counts (workspace, status, blocked, n) SELECT NEW.workspace, NEW.status, NEW.blocked, 0
        WHERE NOT EXISTS (SELECT 1 FROM task_counts
                          WHERE workspace = NEW.workspace AND status = NEW.status AND blocked = NEW.blocked);
    UPDATE task_counts SET n = n + 1 WHERE workspace = NEW.workspace AND status = NEW.status AND blocked = NEW.blocked;
END
/
CREATE TRIGGER task_counts_update AFTER UPDATE OF status, blocked ON tasks
WHEN OLD.status IS NOT NEW.status OR OLD.blocked IS NOT NEW.blocked BEGIN
    UPDATE task_counts SET n = n - 1 WHERE workspace = OLD.workspace AND status = OLD.status AND blocked = OLD.blocked;
    INSERT INTO task_counts (workspace, status, blocked, n) SELECT NEW.workspace, NEW.status, NEW.blocked, 0
        WHERE NOT EXISTS (SELECT 1 FROM task_counts
                          WHERE workspace = NEW.workspace AND status = NEW.status AND blocked = NEW.blocked);
    UPDATE task_counts SET n = n + 1 WHERE workspace = NEW.workspace AND status = NEW.status AND blocked = NEW.blocked;
END
/
CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks BEGIN
    UPDATE task_counts SET n = n - 1 WHERE workspace = OLD.workspace AND status = OLD.status AND blocked = OLD.blocked;
END
/
