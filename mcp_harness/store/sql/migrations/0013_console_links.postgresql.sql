-- 13: indexes by agent and time, for the console's joins of checkpoints to the work
-- A checkpoint version links to the progress entry its agent wrote nearest the save, and to the task
-- that entry names or the task the agent held then (its task events); a task page lists the versions
-- saved for it. Each of these is a seek by (workspace, agent, time): `oversight/links.py`.
CREATE INDEX ix_progress_agent ON progress (workspace, agent, created_at)
/
CREATE INDEX ix_task_event_actor ON task_events (workspace, actor, created_at)
/
CREATE INDEX ix_checkpoint_agent ON checkpoints (workspace, agent, created_at)
/
