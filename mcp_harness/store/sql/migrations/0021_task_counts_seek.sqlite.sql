-- 21: SQLite's counters' triggers add to a task's new key first and make its row only when none was there
-- The triggers of migration 6 looked the new key's row up three times a change (is it there; make it;
-- add to it): every claim and every complete paid for them. Now the addition comes first and the row is
-- made only when the addition changed no row (`changes()` in a trigger's body counts the rows of the
-- body's last statement), which is once per key. PostgreSQL's slots are unchanged.
DROP TRIGGER task_counts_insert
/
DROP TRIGGER task_counts_update
/
CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks BEGIN
    UPDATE task_counts SET n = n + 1 WHERE workspace = NEW.workspace AND status = NEW.status AND blocked = NEW.blocked;
    INSERT INTO task_counts (workspace, status, blocked, n) SELECT NEW.workspace, NEW.status, NEW.blocked, 1
        WHERE changes() = 0;
END
/
CREATE TRIGGER task_counts_update AFTER UPDATE OF status, blocked ON tasks
WHEN OLD.status IS NOT NEW.status OR OLD.blocked IS NOT NEW.blocked BEGIN
    UPDATE task_counts SET n = n - 1 WHERE workspace = OLD.workspace AND status = OLD.status AND blocked = OLD.blocked;
    UPDATE task_counts SET n = n + 1 WHERE workspace = NEW.workspace AND status = NEW.status AND blocked = NEW.blocked;
    INSERT INTO task_counts (workspace, status, blocked, n) SELECT NEW.workspace, NEW.status, NEW.blocked, 1
        WHERE changes() = 0;
END
/
