-- The operator console's and the metrics' reads (`oversight/store/reads.py`), run when a person opens a page or
-- a scraper asks: board columns, what tasks wait on, the dependency graph, who was seen when, what holds
-- work back, the pace. The filtered table, timeline and event window are built (`tasks/store/queries.py`).
-- A list parameter (:keys) is `connection.array()`: JSON text on SQLite, an array on PostgreSQL. A
-- cancelled dependency holds nothing back (contract revision 2): only done and cancelled are settled.

-- name: workspace_rows
-- row: WorkspaceRow
SELECT name FROM workspaces

-- name: first_task_workspace
-- The workspaces of tasks, found by skipping through the task key index: the first, then each next.
SELECT min(workspace) FROM tasks

-- name: next_task_workspace
SELECT min(workspace) FROM tasks WHERE workspace > :after


-- The board: each column filtered and ordered as a person reads it ------------------------------------

-- name: board_pending
-- row: TaskRecord
-- In claim order.
SELECT {columns}
FROM tasks WHERE workspace = :ws AND status = 'pending' AND blocked = FALSE
ORDER BY priority DESC, id LIMIT :limit OFFSET :offset

-- name: board_claimed
-- row: TaskRecord
-- The lease that runs out first, first.
SELECT {columns}
FROM tasks WHERE workspace = :ws AND status = 'claimed'
ORDER BY lease_expires_at, id LIMIT :limit OFFSET :offset

-- name: board_in_review
-- row: TaskRecord
-- The longest waiting first.
SELECT {columns}
FROM tasks WHERE workspace = :ws AND status = 'in_review'
ORDER BY updated_at, id LIMIT :limit OFFSET :offset

-- name: board_cancelled
-- row: TaskRecord
SELECT {columns}
FROM tasks WHERE workspace = :ws AND status = 'cancelled'
ORDER BY updated_at DESC, id DESC LIMIT :limit OFFSET :offset

-- name: board_blocked
-- row: TaskRecord
-- Pending behind a failed dependency, in claim order.
SELECT {columns}
FROM tasks WHERE workspace = :ws AND status = 'pending' AND blocked = TRUE
ORDER BY priority DESC, id LIMIT :limit OFFSET :offset

-- name: board_failed
-- row: TaskRecord
SELECT {columns}
FROM tasks WHERE workspace = :ws AND status = 'failed'
ORDER BY updated_at DESC, id DESC LIMIT :limit OFFSET :offset

-- name: board_done
-- row: TaskRecord
SELECT {columns}
FROM tasks WHERE workspace = :ws AND status = 'done'
ORDER BY completed_at DESC, id DESC LIMIT :limit OFFSET :offset

-- name: open_dependencies
-- row: OpenDependencyRow
-- For each of :keys, its first :per_task dependencies that are not settled, and how many it has (`n`).
SELECT {columns} FROM (
    SELECT d.task_key, t."key", t.status, t.blocked, t.owner, t.id,
           row_number() OVER (PARTITION BY d.task_key ORDER BY t.id) AS place,
           count(*) OVER (PARTITION BY d.task_key) AS n
    FROM task_deps AS d JOIN tasks AS t ON t.workspace = d.workspace AND t."key" = d.dep_key
    WHERE d.workspace = :ws AND t.status NOT IN ('done', 'cancelled')
        AND d.task_key IN (SELECT value FROM json_each(:keys))
) AS open_deps
WHERE place <= :per_task ORDER BY task_key, id

-- name: open_dependencies [postgresql]
-- row: OpenDependencyRow
SELECT {columns} FROM (
    SELECT d.task_key, t."key", t.status, t.blocked, t.owner, t.id,
           row_number() OVER (PARTITION BY d.task_key ORDER BY t.id) AS place,
           count(*) OVER (PARTITION BY d.task_key) AS n
    FROM task_deps AS d JOIN tasks AS t ON t.workspace = d.workspace AND t."key" = d.dep_key
    WHERE d.workspace = :ws AND t.status NOT IN ('done', 'cancelled') AND d.task_key = ANY(:keys)
) AS open_deps
WHERE place <= :per_task ORDER BY task_key, id

-- name: cancel_reasons
-- row: CancelReasonRow
-- The cancel events of :keys, oldest first (the latest reason wins).
SELECT task_key, detail FROM task_events
WHERE workspace = :ws AND kind = 'cancel' AND task_key IN (SELECT value FROM json_each(:keys))
ORDER BY task_key, id

-- name: cancel_reasons [postgresql]
-- row: CancelReasonRow
SELECT task_key, detail FROM task_events
WHERE workspace = :ws AND kind = 'cancel' AND task_key = ANY(:keys)
ORDER BY task_key, id


-- One task's page ---------------------------------------------------------------------------------

-- name: dependencies
-- row: LinkedTaskRow
-- A page of the tasks :key depends on, by key. Driven from task_deps (its primary key holds the task's
-- edges in key order; CROSS JOIN keeps SQLite from starting at tasks, which walks the whole workspace),
-- each edge's task then found by its key: a page costs its size, at any workspace size.
SELECT {t.columns}
FROM task_deps AS d CROSS JOIN tasks AS t
WHERE d.workspace = :ws AND d.task_key = :key AND t.workspace = d.workspace AND t."key" = d.dep_key
ORDER BY d.dep_key LIMIT :limit OFFSET :offset

-- name: dependents
-- row: LinkedTaskRow
-- A page of the tasks that depend on :key, by key (ix_task_dep_rev holds them in that order).
SELECT {t.columns}
FROM task_deps AS d CROSS JOIN tasks AS t
WHERE d.workspace = :ws AND d.dep_key = :key AND t.workspace = d.workspace AND t."key" = d.task_key
ORDER BY d.task_key LIMIT :limit OFFSET :offset

-- name: count_dependencies
SELECT count(*) FROM task_deps WHERE workspace = :ws AND task_key = :key

-- name: count_dependents
SELECT count(*) FROM task_deps WHERE workspace = :ws AND dep_key = :key

-- name: task_events_page
-- row: TaskEventRow
SELECT {columns} FROM task_events
WHERE workspace = :ws AND task_key = :key AND id < :before
ORDER BY id DESC LIMIT :limit


-- The dependency graph ----------------------------------------------------------------------------

-- name: graph_nodes
-- row: GraphNodeRow
SELECT {columns} FROM tasks
WHERE workspace = :ws ORDER BY id LIMIT :limit

-- name: graph_edges
-- row: EdgeRow
-- The edges among :keys (the nodes shown).
SELECT task_key, dep_key FROM task_deps
WHERE workspace = :ws AND task_key IN (SELECT value FROM json_each(:keys))
    AND dep_key IN (SELECT value FROM json_each(:keys))
LIMIT :limit

-- name: graph_edges [postgresql]
-- row: EdgeRow
SELECT task_key, dep_key FROM task_deps
WHERE workspace = :ws AND task_key = ANY(:keys) AND dep_key = ANY(:keys)
LIMIT :limit


-- Agents: who was seen when, what they hold ---------------------------------------------------------

-- name: last_seen
-- row: SeenRow
-- When each agent last did something the database keeps: a progress entry among the newest :recent,
-- a checkpoint, the end of its hold on a task (a completion, a failure, a release) among the newest
-- :events task events (ix_task_event_time), or a change to a task it holds now (a heartbeat; :recent of
-- them at most, read from ix_task_board). Bounded at any size: it never groups the workspace's
-- finished tasks, as grouping the owners of every task did.
SELECT agent, max(at) AS at FROM (
    SELECT agent, max(created_at) AS at FROM progress WHERE workspace = :ws
        AND seq > (SELECT progress_seq FROM workspaces WHERE name = :ws) - :recent GROUP BY agent
    UNION ALL
    SELECT agent, max(created_at) AS at FROM checkpoints WHERE workspace = :ws GROUP BY agent
    UNION ALL
    SELECT actor AS agent, max(created_at) AS at FROM (
        SELECT actor, kind, created_at FROM task_events WHERE workspace = :ws
        ORDER BY created_at DESC, id DESC LIMIT :events
    ) AS recent WHERE kind IN ('complete', 'submit', 'fail', 'release') GROUP BY actor
    UNION ALL
    SELECT owner AS agent, max(updated_at) AS at FROM (
        SELECT owner, updated_at FROM tasks WHERE workspace = :ws AND status = 'claimed' LIMIT :recent
    ) AS held WHERE owner IS NOT NULL GROUP BY owner
) AS seen GROUP BY agent

-- name: claimed
-- row: HeldRow
-- Tasks held under a lease (expired ones included), the lease that runs out first first.
SELECT {columns} FROM tasks
WHERE workspace = :ws AND ready = TRUE AND status = 'claimed'
ORDER BY lease_expires_at LIMIT :limit

-- name: record_contact
INSERT INTO agent_contacts (workspace, agent, seen_at, tool, claim_outcome, claim_at)
VALUES (:ws, :agent, :at, :tool, :outcome, :claim_at)
ON CONFLICT (workspace, agent) DO UPDATE SET seen_at = excluded.seen_at, tool = excluded.tool,
    claim_outcome = COALESCE(excluded.claim_outcome, agent_contacts.claim_outcome),
    claim_at = COALESCE(excluded.claim_at, agent_contacts.claim_at)

-- name: contacts
-- row: ContactRow
SELECT {columns} FROM agent_contacts
WHERE workspace = :ws ORDER BY seen_at DESC LIMIT :limit

-- name: silent_holders
-- row: SilentHolderRow
-- Leases still running whose holder has made no call since :quiet (NULL: for more than half the lease),
-- nor changed the task (a heartbeat does), `quiet`; and those taken or renewed through a stdio server, whose process
-- the service checks (`lease_process`). `seen_at` is NULL for a holder never heard from by a server
-- that records contacts.
SELECT {columns} FROM (
    SELECT t."key", t.owner, t.lease_expires_at, c.seen_at, t.lease_process,
        CASE WHEN t.updated_at < COALESCE(CAST(:quiet AS DOUBLE PRECISION), :now - t.lease_seconds * 0.5)
            AND (c.seen_at IS NULL OR c.seen_at < COALESCE(CAST(:quiet AS DOUBLE PRECISION), :now - t.lease_seconds * 0.5))
            THEN 1 ELSE 0 END AS quiet
    FROM tasks AS t LEFT JOIN agent_contacts AS c ON c.workspace = t.workspace AND c.agent = t.owner
    WHERE t.workspace = :ws AND t.ready = TRUE AND t.status = 'claimed' AND t.lease_expires_at > :now
) AS held
WHERE quiet = 1 OR lease_process IS NOT NULL
ORDER BY lease_expires_at LIMIT :limit


-- What needs a person, and what holds work back -----------------------------------------------------

-- name: gates_in_review
SELECT count(*) FROM tasks WHERE workspace = :ws AND status = 'in_review' AND blocked = FALSE AND kind = 'gate'

-- name: expired_leases
-- Leases past their time that nobody has taken over yet.
SELECT count(*) FROM tasks
WHERE workspace = :ws AND ready = TRUE AND status = 'claimed' AND lease_expires_at <= :now

-- name: holding_back
-- row: HoldingBackRow
-- Tasks of one status (not blocked) that others wait on, most waited on first, among the first :scan
-- of that status in board order (bounded at any size).
SELECT {columns}
FROM (SELECT * FROM tasks WHERE workspace = :ws AND status = :status AND blocked = FALSE
      ORDER BY priority DESC, id LIMIT :scan) AS s
WHERE dependents > 0
ORDER BY dependents DESC, id LIMIT :limit

-- name: holding_dependency
-- row: HoldingDependencyRow
-- The dependency of a task that holds it back most directly: a failure first, then a blocked one,
-- then any other that is not settled.
SELECT {t.columns}
FROM task_deps AS d JOIN tasks AS t ON t.workspace = d.workspace AND t."key" = d.dep_key
WHERE d.workspace = :ws AND d.task_key = :key AND t.status NOT IN ('done', 'cancelled')
ORDER BY CASE WHEN t.status = 'failed' THEN 0 WHEN t.blocked = TRUE THEN 1 WHEN t.status = 'pending' THEN 3 ELSE 2 END,
    t.id
LIMIT 1

-- name: waiting_on
-- How many tasks wait on a task, directly or through others (counted up to :cap).
WITH RECURSIVE down(k) AS (
    SELECT task_key FROM task_deps WHERE workspace = :ws AND dep_key = :key
    UNION
    SELECT d.task_key FROM task_deps AS d JOIN down ON d.dep_key = down.k WHERE d.workspace = :ws
)
SELECT count(*) FROM (SELECT k FROM down LIMIT :cap) AS capped


-- The pace: time in each status, throughput, the burn-up -------------------------------------------

-- name: recent_task_events
-- row: EventTimeRow
SELECT task_key, kind, created_at FROM task_events WHERE workspace = :ws ORDER BY id DESC LIMIT :limit

-- name: created_at
-- row: CreatedRow
SELECT "key", created_at FROM tasks WHERE workspace = :ws AND "key" IN (SELECT value FROM json_each(:keys))

-- name: created_at [postgresql]
-- row: CreatedRow
SELECT "key", created_at FROM tasks WHERE workspace = :ws AND "key" = ANY(:keys)

-- name: first_created
SELECT created_at FROM tasks WHERE workspace = :ws ORDER BY id LIMIT 1

-- name: created_by_bucket
-- row: BucketRow
-- Tasks created per time bucket (:step seconds from :t0; PostgreSQL's cast rounds, so it floors first).
SELECT CAST((created_at - :t0) / :step AS INTEGER) AS b, count(*) AS n FROM tasks WHERE workspace = :ws
GROUP BY b ORDER BY b

-- name: created_by_bucket [postgresql]
-- row: BucketRow
SELECT CAST(floor((created_at - :t0) / :step) AS INTEGER) AS b, count(*) AS n FROM tasks WHERE workspace = :ws
GROUP BY b ORDER BY b

-- name: done_by_bucket
-- row: BucketRow
SELECT CAST((completed_at - :t0) / :step AS INTEGER) AS b, count(*) AS n FROM tasks
WHERE workspace = :ws AND status = 'done' AND completed_at IS NOT NULL
GROUP BY b ORDER BY b

-- name: done_by_bucket [postgresql]
-- row: BucketRow
SELECT CAST(floor((completed_at - :t0) / :step) AS INTEGER) AS b, count(*) AS n FROM tasks
WHERE workspace = :ws AND status = 'done' AND completed_at IS NOT NULL
GROUP BY b ORDER BY b


-- The metrics, over every workspace -----------------------------------------------------------------

-- name: counts_by_workspace
-- row: WorkspaceCountRow
SELECT workspace, status, blocked, CAST(sum(n) AS BIGINT) AS n FROM task_counts GROUP BY workspace, status, blocked

-- name: expired_leases_by_workspace
-- row: WorkspaceTallyRow
SELECT workspace, count(*) AS n FROM tasks
WHERE ready = TRUE AND status = 'claimed' AND lease_expires_at <= :now
GROUP BY workspace

-- name: oldest_in_review
-- row: WorkspaceSinceRow
SELECT workspace, min(updated_at) AS since FROM tasks WHERE status = 'in_review' GROUP BY workspace

-- name: oldest_ready
-- row: WorkspaceSinceRow
SELECT workspace, min(CASE WHEN available_at > updated_at THEN available_at ELSE updated_at END) AS since
FROM tasks WHERE ready = TRUE AND status = 'pending' AND blocked = FALSE AND available_at <= :now
GROUP BY workspace
