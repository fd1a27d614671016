-- The triggers and functions that keep task_counts (see migration 6), as the schema declares them:
-- tables.py creates them with the tables, and tests/test_migrations.py compares them with what the
-- migrations made. A migration that changes one changes it here too.
-- They are created in the order their names first appear (a function before the triggers that use it).

-- name: mcp_harness_count_tasks [postgresql]
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

-- name: mcp_harness_task_counts [postgresql]
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

-- name: task_counts_insert_delete [postgresql]
CREATE TRIGGER task_counts_insert_delete AFTER INSERT OR DELETE ON tasks
FOR EACH ROW EXECUTE FUNCTION mcp_harness_task_counts()

-- name: task_counts_update [postgresql]
CREATE TRIGGER task_counts_update AFTER UPDATE OF status, blocked ON tasks FOR EACH ROW
WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.blocked IS DISTINCT FROM NEW.blocked)
EXECUTE FUNCTION mcp_harness_task_counts()

-- name: task_counts_insert [sqlite]
-- The addition first, and the row made only when it changed none (`changes()`: the body's last statement).
CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks BEGIN
    UPDATE task_counts SET n = n + 1 WHERE workspace = NEW.workspace AND status = NEW.status AND blocked = NEW.blocked;
    INSERT INTO task_counts (workspace, status, blocked, n) SELECT NEW.workspace, NEW.status, NEW.blocked, 1
        WHERE changes() = 0;
END

-- name: task_counts_update [sqlite]
CREATE TRIGGER task_counts_update AFTER UPDATE OF status, blocked ON tasks
WHEN OLD.status IS NOT NEW.status OR OLD.blocked IS NOT NEW.blocked BEGIN
    UPDATE task_counts SET n = n - 1 WHERE workspace = OLD.workspace AND status = OLD.status AND blocked = OLD.blocked;
    UPDATE task_counts SET n = n + 1 WHERE workspace = NEW.workspace AND status = NEW.status AND blocked = NEW.blocked;
    INSERT INTO task_counts (workspace, status, blocked, n) SELECT NEW.workspace, NEW.status, NEW.blocked, 1
        WHERE changes() = 0;
END

-- name: task_counts_delete [sqlite]
CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks BEGIN
    UPDATE task_counts SET n = n - 1 WHERE workspace = OLD.workspace AND status = OLD.status AND blocked = OLD.blocked;
END
