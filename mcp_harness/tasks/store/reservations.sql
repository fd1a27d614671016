-- Path reservations (migration 11): the patterns a lease holds. A reservation is live while its task
-- is claimed under the same lease token and the lease has not run out (`tasks/store/reservations.py`).

-- name: live
-- row: ReservationRow
-- Every live reservation of the workspace (from the claimed tasks: few, whatever the backlog).
SELECT t."key", t.owner, r.pattern, r.shared, t.lease_expires_at
FROM tasks AS t JOIN task_reservations AS r ON r.task_id = t.id AND r.lease_token = t.lease_token
WHERE t.workspace = :ws AND t.status = 'claimed' AND t.lease_expires_at > :now
ORDER BY t.lease_expires_at, t.id, r.pattern

-- name: near
-- row: ReservationRow
-- The live reservations that may overlap a pattern whose anchor is :head (`paths.Index`'s rule 2, by
-- `ix_task_reservation_anchor`): an anchor that is one of the folders above it or the same (`:heads`),
-- or one under it (`:below` <= anchor < `:beyond`, compared byte by byte: a locale's collation may
-- not sort '/' before '0'). Two index reads joined by UNION ALL (the anchors above or the same, then
-- those under it: never both): SQLite plans an OR of the two as a walk of every reservation of the
-- workspace (2x the claim's cost at 1,000 live reservations).
SELECT t."key", t.owner, r.pattern, r.shared, t.lease_expires_at
FROM (SELECT task_id, lease_token, pattern, shared FROM task_reservations
      WHERE workspace = :ws AND anchor IN (SELECT value FROM json_each(:heads))
      UNION ALL
      SELECT task_id, lease_token, pattern, shared FROM task_reservations
      WHERE workspace = :ws AND anchor >= :below AND anchor < :beyond) AS r
JOIN tasks AS t ON t.id = r.task_id AND t.lease_token = r.lease_token
WHERE t.status = 'claimed' AND t.lease_expires_at > :now
ORDER BY t.lease_expires_at, t.id, r.pattern

-- name: near [postgresql]
-- row: ReservationRow
SELECT t."key", t.owner, r.pattern, r.shared, t.lease_expires_at
FROM task_reservations AS r JOIN tasks AS t ON t.id = r.task_id AND t.lease_token = r.lease_token
WHERE r.workspace = :ws AND (r.anchor = ANY(:heads)
    OR (r.anchor COLLATE "C" >= :below AND r.anchor COLLATE "C" < :beyond))
    AND t.status = 'claimed' AND t.lease_expires_at > :now
ORDER BY t.lease_expires_at, t.id, r.pattern

-- name: held
-- What one lease holds, live or not.
SELECT pattern, shared FROM task_reservations WHERE task_id = :task_id AND lease_token = :token ORDER BY pattern

-- name: held_by_tokens
-- What these leases hold (for `my_tasks`).
SELECT lease_token, pattern, shared FROM task_reservations
WHERE workspace = :ws AND lease_token IN (SELECT value FROM json_each(:tokens)) ORDER BY pattern

-- name: held_by_tokens [postgresql]
SELECT lease_token, pattern, shared FROM task_reservations
WHERE workspace = :ws AND lease_token = ANY(:tokens) ORDER BY pattern

-- name: insert
INSERT INTO task_reservations (task_id, lease_token, pattern, workspace, anchor, shared)
VALUES (:task_id, :token, :pattern, :ws, :anchor, :shared)

-- name: drop_one
DELETE FROM task_reservations WHERE task_id = :task_id AND lease_token = :token AND pattern = :pattern

-- name: drop_stale
-- A new claim of the task: the reservations of its earlier leases are gone for good.
DELETE FROM task_reservations WHERE task_id = :task_id AND lease_token <> :token

-- name: lock [postgresql]
-- Reservations of a workspace change one transaction at a time (claims of tasks with paths, reserve,
-- a lease revived); the lock is held to the commit.
SELECT pg_advisory_xact_lock(:id)
