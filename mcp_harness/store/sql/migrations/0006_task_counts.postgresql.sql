-- 6: task counts kept by triggers; indexes for the task list's pages and the board's columns
-- Task counts that cost the same at any size: triggers keep the number of tasks per (workspace, status,
-- blocked) in a few rows, which a count sums. PostgreSQL: a key has several rows ("slots"); a change
-- adds to the first slot no other transaction holds (SKIP LOCKED) or, all held, to a new one, so
-- concurrent claims never wait on a counter row nor deadlock on two (a transaction changing many tasks,
-- as adding tasks does, takes its slots in any order; fixed shards such as id % 16 would make two such
-- transactions wait on each other). The slots of a key stay about as many as the transactions that ever
-- changed it at once (16 claiming workers made 20-32). SQLite's writers are serial: one row per key.
CREATE TABLE task_counts (
    id BIGSERIAL NOT NULL,
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
CREATE FUNCTION mcp_harness_count_tasks(ws VARCHAR, st VARCHAR, bl BOOLEAN, d INTEGER) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    slot BIGINT;
BEGIN
    SELECT id INTO slot FROM task_counts WHERE workspace = ws AND status = st AND blocked = bl
        LIMIT 1 FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
        UPDATE task_counts SET n = n + d WHERE id = slot;
    ELSE
        INSERT INTO task_counts (workspace, status, blocked, n) VALUES (ws, st, bl, d);
    END IF;
END
$$
/
CREATE FUNCTION mcp_harness_task_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM mcp_harness_count_tasks(OLD.workspace, OLD.status, OLD.blocked, -1);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM mcp_harness_count_tasks(NEW.workspace, NEW.status, NEW.blocked, 1);
    END IF;
    RETURN NULL;
END
$$
/
CREATE TRIGGER task_counts_insert_delete AFTER INSERT OR DELETE ON tasks
FOR EACH ROW EXECUTE FUNCTION mcp_harness_task_counts()
/
CREATE TRIGGER task_counts_update AFTER UPDATE OF status, blocked ON tasks FOR EACH ROW
WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.blocked IS DISTINCT FROM NEW.blocked)
EXECUTE FUNCTION mcp_harness_task_counts()
/
