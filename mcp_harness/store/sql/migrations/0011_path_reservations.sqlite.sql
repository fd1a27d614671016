-- 11: path reservations: tasks.paths (the patterns a claim reserves) and the reservations a lease holds
-- A reservation is live while its task is claimed under the same lease token and the lease has not run
-- out, so it ends with the lease (complete, release, expiry, a session's end) without a write. `anchor`
-- (a pattern's leading segments without a wildcard) finds the reservations that may overlap a pattern.
ALTER TABLE tasks ADD COLUMN paths TEXT
/
CREATE TABLE task_reservations (
    task_id BIGINT NOT NULL,
    lease_token VARCHAR NOT NULL,
    pattern VARCHAR NOT NULL,
    workspace VARCHAR NOT NULL,
    anchor VARCHAR NOT NULL,
    shared BOOLEAN NOT NULL,
    PRIMARY KEY (task_id, lease_token, pattern)
)
/
CREATE INDEX ix_task_reservation_anchor ON task_reservations (workspace, anchor)
/
