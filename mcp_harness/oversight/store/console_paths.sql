-- What the console shows of path reservations: the paths the leases of some tasks hold now.

-- name: held_by_tasks
-- row: ReservationRow
-- The live reservations of the tasks :ids (their row ids), by task then pattern. From the tasks, by
-- the primary keys: the rows of leases that ended (kept until the task is claimed again) are never read.
SELECT t."key", t.owner, r.pattern, r.shared, t.lease_expires_at
FROM json_each(:ids) AS i
CROSS JOIN tasks AS t ON t.id = i.value
CROSS JOIN task_reservations AS r ON r.task_id = t.id AND r.lease_token = t.lease_token
WHERE t.workspace = :ws AND t.status = 'claimed' AND t.lease_expires_at > :now
ORDER BY t."key", r.pattern

-- name: held_by_tasks [postgresql]
-- row: ReservationRow
SELECT t."key", t.owner, r.pattern, r.shared, t.lease_expires_at
FROM tasks AS t
JOIN task_reservations AS r ON r.task_id = t.id AND r.lease_token = t.lease_token
WHERE t.id = ANY(:ids) AND t.workspace = :ws AND t.status = 'claimed' AND t.lease_expires_at > :now
ORDER BY t."key", r.pattern
