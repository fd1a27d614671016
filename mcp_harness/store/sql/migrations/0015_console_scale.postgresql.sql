-- 15: the console at scale: task events by time, and a task's dependents in key order
-- The timeline shows the task events of its page's time span, and the agent filter the newest events'
-- actors: ix_task_event_time reads them in time order (id breaks ties) instead of sorting every event
-- of the workspace. A task page lists its dependents a page at a time in key order: ix_task_dep_rev
-- gains task_key so that page is read from the index, not sorted (the old index is its prefix).
CREATE INDEX ix_task_event_time ON task_events (workspace, created_at, id)
/
DROP INDEX ix_task_dep_rev
/
CREATE INDEX ix_task_dep_rev ON task_deps (workspace, dep_key, task_key)
/
