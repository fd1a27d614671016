-- 16: a claim's two reads: pending tasks in claim order, and claimed tasks with attempts left by expiry
-- A claim read `ix_task_claim` (ready tasks by priority), where the live claimed tasks are ready too and
-- usually first (they were claimed for their priority): with 1,000 agents at work it read 1,000 held
-- tasks before the first it could take. It now reads the best pending tasks (`ix_task_pending`) and the
-- claimed ones whose lease ran out with attempts left (`ix_task_retry_lease`; with `ix_task_last_lease`
-- it holds every claimed task once), and takes the best of both (`tasks/store/queries.py`, `_pick`).
CREATE INDEX ix_task_pending ON tasks (workspace, status, ready, priority DESC, id) WHERE status = 'pending'
/
CREATE INDEX ix_task_retry_lease ON tasks (workspace, lease_expires_at) WHERE status = 'claimed' AND attempts < max_attempts
/
