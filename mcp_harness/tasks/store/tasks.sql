-- The shared task list (`tasks/store/tasks.py`): tasks, their dependency edges and tags, their events, leases
-- that end, and the roots of an empty claim's wait. The claim itself and the statements whose shape a
-- call chooses (its filters, the columns a change sets) are built in `tasks/store/queries.py`.
-- A list parameter (:keys, :tokens) is `connection.array()`: JSON text on SQLite, an array on PostgreSQL.

-- name: task_by_key
-- row: TaskRecord
SELECT {columns}
FROM tasks WHERE workspace = :ws AND "key" = :key

-- name: tasks_by_key
-- row: TaskRecord
SELECT {columns}
FROM tasks WHERE workspace = :ws AND "key" IN (SELECT value FROM json_each(:keys))

-- name: tasks_by_key [postgresql]
-- row: TaskRecord
SELECT {columns}
FROM tasks WHERE workspace = :ws AND "key" = ANY(:keys)

-- name: dependency_closure
-- row: ReachedDependency
-- What a task depends on, directly or through others, each once at its nearest depth (at most :depth
-- steps away), nearest first, then in creation order; :limit of them. One statement: a task's context
-- reads it after every claim. `task_deps`' primary key serves each step.
WITH RECURSIVE reach(k, depth) AS (
    SELECT dep_key, 1 FROM task_deps WHERE workspace = :ws AND task_key = :key
    UNION
    SELECT d.dep_key, r.depth + 1 FROM reach AS r
    JOIN task_deps AS d ON d.workspace = :ws AND d.task_key = r.k
    WHERE r.depth < :depth
), nearest AS (SELECT k, min(depth) AS depth FROM reach GROUP BY k)
SELECT t.id, t."key", t.status, t.blocked, t.result, t.verification, t.review, t.kind, t.review_comment, n.depth
FROM nearest AS n JOIN tasks AS t ON t.workspace = :ws AND t."key" = n.k
ORDER BY n.depth, t.id LIMIT :limit

-- name: insert_task
-- A new task (its attempts start at 0); returns its id, which its tags name.
INSERT INTO tasks (workspace, "key", title, description, steps, priority, depends_on, tags, max_attempts,
    dependents, content_hash, status, ready, blocked, attempts, available_at, created_at, updated_at, review, kind,
    paths, added_by)
VALUES (:workspace, :key, :title, :description, :steps, :priority, :depends_on, :tags, :max_attempts,
    :dependents, :content_hash, :status, :ready, :blocked, 0, :available_at, :created_at, :updated_at, :review,
    :kind, :paths, :added_by)
RETURNING id

-- name: insert_dependency
INSERT INTO task_deps (workspace, task_key, dep_key) VALUES (:ws, :task_key, :dep_key)

-- name: insert_tag
INSERT INTO task_tags (workspace, tag, task_id) VALUES (:ws, :tag, :task_id)

-- name: add_dependents
UPDATE tasks SET dependents = dependents + :n WHERE workspace = :ws AND "key" = :key

-- name: analyze_tasks [postgresql]
-- PostgreSQL plans the claim by these statistics (see `tasks.refresh_statistics`).
ANALYZE tasks, task_deps, task_tags

-- name: held_by
-- row: TaskRecord
-- `+id`: sort the few held rows rather than walk the workspace's tasks in id order (SQLite, without
-- statistics, chose ix_task_page: 3.4 ms against 0.09 at 10,000 tasks; tools/bench_scale.py).
SELECT {columns}
FROM tasks WHERE workspace = :ws AND owner = :agent AND status IN ('claimed', 'in_review')
ORDER BY +id

-- name: task_counts
-- row: TaskCountRow
-- The triggers' counters (migration 6): a few rows per workspace whatever its size.
SELECT status, blocked, CAST(sum(n) AS BIGINT) AS n FROM task_counts WHERE workspace = :ws
GROUP BY status, blocked

-- name: task_counts_ran_out
-- row: TaskCountRow
-- The counts, plus a row of status `ran_out` when a lease ran out on its last attempt: the probe that
-- list_tasks and restore_state make on every call rides on the counts' round trip (one seek of
-- `ix_task_last_lease`, migration 14), and only a hit costs a write (`TaskService.settle_ran_out`). The
-- condition is spelled as the index's predicate, term for term, so both planners take it.
SELECT status, blocked, CAST(sum(n) AS BIGINT) AS n FROM task_counts WHERE workspace = :ws
GROUP BY status, blocked
UNION ALL SELECT 'ran_out', FALSE, 1 WHERE EXISTS (
  SELECT 1 FROM tasks
  WHERE workspace = :ws AND status = 'claimed' AND attempts >= max_attempts AND lease_expires_at <= :now)

-- name: known_tags
-- row: TagRow
-- The tags tasks of a workspace have, for a claim whose tags match none (`task_tags`' primary key).
SELECT DISTINCT tag FROM task_tags WHERE workspace = :ws ORDER BY tag LIMIT :limit


-- Leases that end ---------------------------------------------------------------------------------

-- name: fail_expired_exhausted
-- row: TaskRecord
-- Leases that ran out on their last attempt: the task fails (the condition spelled as `ix_task_last_lease`'s).
UPDATE tasks SET status = 'failed', ready = FALSE, lease_token = NULL, last_error = :error, updated_at = :now
WHERE workspace = :ws AND status = 'claimed' AND attempts >= max_attempts AND lease_expires_at <= :now
RETURNING {columns}

-- name: end_leases
-- row: TaskRecord
-- A session (or connection) ended: its live leases run out now; the attempt stays counted, the owner
-- stays until a claim takes the task over.
UPDATE tasks SET lease_expires_at = :now, updated_at = :now
WHERE workspace = :ws AND owner = :agent AND status = 'claimed' AND lease_expires_at > :now
RETURNING {columns}

-- name: end_leases_by_token
-- row: TaskRecord
-- As end_leases, only the leases of :tokens.
UPDATE tasks SET lease_expires_at = :now, updated_at = :now
WHERE workspace = :ws AND owner = :agent AND status = 'claimed' AND lease_expires_at > :now
    AND lease_token IN (SELECT value FROM json_each(:tokens))
RETURNING {columns}

-- name: end_leases_by_token [postgresql]
-- row: TaskRecord
UPDATE tasks SET lease_expires_at = :now, updated_at = :now
WHERE workspace = :ws AND owner = :agent AND status = 'claimed' AND lease_expires_at > :now
    AND lease_token = ANY(:tokens)
RETURNING {columns}

-- name: end_lease_since
-- row: TaskRecord
-- One lease of a connection, unless another connection renewed (or took) it after :since.
UPDATE tasks SET lease_expires_at = :now, updated_at = :now
WHERE workspace = :ws AND owner = :agent AND status = 'claimed' AND lease_expires_at > :now
    AND lease_token = :token AND updated_at <= :since
RETURNING {columns}


-- name: has_expired_lease
-- A lease of the workspace that ran out and that no claim took over yet (1, or no row).
SELECT 1 FROM tasks WHERE workspace = :ws AND status = 'claimed' AND lease_expires_at <= :now LIMIT 1

-- name: leases_with_process
-- row: LeaseProcessRow
-- Live leases taken or last renewed through a stdio server, with the process it recorded.
SELECT {columns} FROM tasks
WHERE workspace = :ws AND status = 'claimed' AND lease_expires_at > :now AND lease_process IS NOT NULL

-- name: end_lease_of_process
-- row: TaskRecord
-- One lease whose process is gone runs out now, unless it was renewed (or taken) through another since.
UPDATE tasks SET lease_expires_at = :now, updated_at = :now
WHERE workspace = :ws AND status = 'claimed' AND lease_expires_at > :now AND lease_token = :token
    AND lease_process = :process
RETURNING {columns}

-- name: holder_facts
-- row: HolderFactsRow
-- Of the tasks :keys, the process recorded with each one's lease and when its owner last made a call.
SELECT t."key", t.lease_process, c.seen_at
FROM tasks AS t LEFT JOIN agent_contacts AS c ON c.workspace = t.workspace AND c.agent = t.owner
WHERE t.workspace = :ws AND t."key" IN (SELECT value FROM json_each(:keys))

-- name: holder_facts [postgresql]
-- row: HolderFactsRow
SELECT t."key", t.lease_process, c.seen_at
FROM tasks AS t LEFT JOIN agent_contacts AS c ON c.workspace = t.workspace AND c.agent = t.owner
WHERE t.workspace = :ws AND t."key" = ANY(:keys)


-- Dependencies ------------------------------------------------------------------------------------

-- name: dependents_of
-- row: DependentRow
SELECT task_key FROM task_deps WHERE workspace = :ws AND dep_key IN (SELECT value FROM json_each(:keys))

-- name: dependents_of [postgresql]
-- row: DependentRow
SELECT task_key FROM task_deps WHERE workspace = :ws AND dep_key = ANY(:keys)

-- name: dependencies_of
-- row: DependencyRow
SELECT d.task_key, t.status, t.blocked, t.stale FROM task_deps AS d
JOIN tasks AS t ON t.workspace = d.workspace AND t."key" = d.dep_key
WHERE d.workspace = :ws AND d.task_key IN (SELECT value FROM json_each(:keys))

-- name: dependencies_of [postgresql]
-- row: DependencyRow
SELECT d.task_key, t.status, t.blocked, t.stale FROM task_deps AS d
JOIN tasks AS t ON t.workspace = d.workspace AND t."key" = d.dep_key
WHERE d.workspace = :ws AND d.task_key = ANY(:keys)

-- name: stale_of
-- The stale ones among :keys (done tasks whose dependency was reopened and is not done again).
SELECT "key" FROM tasks WHERE workspace = :ws AND stale = TRUE AND "key" IN (SELECT value FROM json_each(:keys))

-- name: stale_of [postgresql]
SELECT "key" FROM tasks WHERE workspace = :ws AND stale = TRUE AND "key" = ANY(:keys)

-- name: lock_tasks [postgresql]
-- The dependents whose flags a change recomputes, locked first (in id order), so that two transactions
-- finishing two dependencies of one task take turns and the second sees the first's commit.
SELECT id FROM tasks WHERE workspace = :ws AND "key" = ANY(:keys) ORDER BY id FOR UPDATE


-- Task events -------------------------------------------------------------------------------------

-- name: insert_task_event
INSERT INTO task_events (workspace, task_key, kind, actor, attempt, detail, created_at)
VALUES (:ws, :key, :ev_kind, :ev_actor, :ev_attempt, :ev_detail, :ev_at)

-- name: task_events
-- row: TaskEventRow
SELECT {columns} FROM task_events
WHERE workspace = :ws AND task_key = :key ORDER BY id

-- name: recent_task_events
-- row: TaskEventRow
-- A task's newest events (bounded: the index `ix_task_event_task` read backwards).
SELECT {columns} FROM task_events
WHERE workspace = :ws AND task_key = :key ORDER BY id DESC LIMIT :limit

-- name: last_task_event
-- row: TaskEventRow
-- A task's newest event of one kind (bounded as above: kinds are few per task).
SELECT {columns} FROM task_events
WHERE workspace = :ws AND task_key = :key AND kind = :kind ORDER BY id DESC LIMIT 1


-- The roots of an empty claim's wait, without filters ---------------------------------------------
-- The tasks at the root of every wait are open tasks with every dependency settled (`ready`), tasks
-- in review (their dependencies are settled) and failed ones: the first few of each kind, in the order
-- the reasons show them (`ix_task_pending`, `ix_task_board`). `waits_for` is NULL: a root waits on nothing.

-- name: roots_in_backoff
-- row: RootRow
-- Open tasks with every dependency done, in their backoff: the pending ones of `ix_task_pending` (not
-- the claimed ones of `ix_task_claim`, which a wait on held tasks has many of), sorted.
SELECT "key", status, owner, ready, available_at, lease_expires_at, review_comment, NULL AS waits_for, id
FROM tasks WHERE workspace = :ws AND status = 'pending' AND ready = TRUE AND available_at > :now
ORDER BY available_at, id LIMIT :limit

-- name: roots_claimable
-- row: RootRow
-- Open tasks with every dependency done, claimable now, from `ix_task_pending` as above. SQLite is kept
-- off the creation-order index by a unary `+`, which would walk the backlog.
SELECT "key", status, owner, ready, available_at, lease_expires_at, review_comment, NULL AS waits_for, id
FROM tasks WHERE workspace = :ws AND status = 'pending' AND ready = TRUE AND available_at <= :now
ORDER BY +id LIMIT :limit

-- name: roots_claimable [postgresql]
-- row: RootRow
SELECT "key", status, owner, ready, available_at, lease_expires_at, review_comment, NULL AS waits_for, id
FROM tasks WHERE workspace = :ws AND status = 'pending' AND ready = TRUE AND available_at <= :now
ORDER BY id LIMIT :limit

-- name: roots_claimed
-- row: RootRow
SELECT "key", status, owner, ready, available_at, lease_expires_at, review_comment, NULL AS waits_for, id
FROM tasks WHERE workspace = :ws AND status = 'claimed' ORDER BY lease_expires_at, id LIMIT :limit

-- name: roots_in_review
-- row: RootRow
SELECT "key", status, owner, ready, available_at, lease_expires_at, review_comment, NULL AS waits_for, id
FROM tasks WHERE workspace = :ws AND status = 'in_review' ORDER BY id LIMIT :limit

-- name: roots_failed
-- row: RootRow
SELECT "key", status, owner, ready, available_at, lease_expires_at, review_comment, NULL AS waits_for, id
FROM tasks WHERE workspace = :ws AND status = 'failed' ORDER BY id LIMIT :limit

-- name: added_by
-- Who added a task (NULL for tasks added before this was recorded).
SELECT added_by FROM tasks WHERE workspace = :ws AND "key" = :key
