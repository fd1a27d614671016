-- 14: the index of leases on their last attempt: claimed tasks with no attempt left, by expiry
-- A lease that ran out on its last attempt is settled (the task fails) when a claim, a list or a restore
-- looks (contract revision 3). List and restore probe for one on every call: this index holds only the
-- claimed tasks on their last attempt (a few, whatever the workspace's size), so the probe is one seek.
CREATE INDEX ix_task_last_lease ON tasks (workspace, lease_expires_at) WHERE status = 'claimed' AND attempts >= max_attempts
/
