-- The console's joins of checkpoints to the work (`oversight/links.py` holds the rule): a version
-- and the progress entry its agent wrote nearest the save, the task that agent held then, and the
-- versions saved near some entries or while a task was held. Every lookup is a seek on an index by
-- (workspace, agent or actor, time): migration 13.

-- name: saved_with
-- For each checkpoint of :ids, its place and who saved it when, and the entries it may go with:
-- `before_seq`, the newest entry its agent wrote at or before the save (within :window seconds), and
-- `after_seq`, the oldest written after it (within :window). Two seeks on `ix_progress_agent` each.
-- (SQLite: CROSS JOIN keeps the order written and `+` keeps the workspace's index out: each id is
-- looked up by the primary key, whatever statistics ANALYZE left.)
SELECT c.id, c.thread, c.version, c.agent, c.created_at,
    (SELECT p.seq FROM progress AS p
     WHERE p.workspace = c.workspace AND p.agent = c.agent
         AND p.created_at <= c.created_at AND p.created_at >= c.created_at - :window
     ORDER BY p.created_at DESC LIMIT 1) AS before_seq,
    (SELECT p.seq FROM progress AS p
     WHERE p.workspace = c.workspace AND p.agent = c.agent
         AND p.created_at > c.created_at AND p.created_at <= c.created_at + :window
     ORDER BY p.created_at LIMIT 1) AS after_seq
FROM json_each(:ids) AS i CROSS JOIN checkpoints AS c ON c.id = i.value
WHERE +c.workspace = :ws

-- name: saved_with [postgresql]
SELECT c.id, c.thread, c.version, c.agent, c.created_at,
    (SELECT p.seq FROM progress AS p
     WHERE p.workspace = c.workspace AND p.agent = c.agent
         AND p.created_at <= c.created_at AND p.created_at >= c.created_at - :window
     ORDER BY p.created_at DESC LIMIT 1) AS before_seq,
    (SELECT p.seq FROM progress AS p
     WHERE p.workspace = c.workspace AND p.agent = c.agent
         AND p.created_at > c.created_at AND p.created_at <= c.created_at + :window
     ORDER BY p.created_at LIMIT 1) AS after_seq
FROM checkpoints AS c
WHERE c.workspace = :ws AND c.id = ANY(:ids)

-- name: held_when_saved
-- For each checkpoint of :ids, the task its agent held when it saved: the newest it claimed (or took
-- over) among its :scan newest task events up to the save (`ix_task_event_actor`), that no event of
-- :ends ended before the save (`ix_task_event_task`).
SELECT c.id, (SELECT ev.task_key FROM (
         SELECT id, task_key, kind FROM task_events
         WHERE workspace = c.workspace AND actor = c.agent AND created_at <= c.created_at
         ORDER BY created_at DESC LIMIT :scan) AS ev
     WHERE ev.kind IN ('claim', 'take_over') AND NOT EXISTS (
         SELECT 1 FROM task_events AS e
         WHERE e.workspace = c.workspace AND e.task_key = ev.task_key AND e.id > ev.id
             AND e.created_at <= c.created_at AND e.kind IN (SELECT value FROM json_each(:ends)))
     ORDER BY ev.id DESC LIMIT 1) AS held_key
FROM json_each(:ids) AS i CROSS JOIN checkpoints AS c ON c.id = i.value
WHERE +c.workspace = :ws

-- name: held_when_saved [postgresql]
SELECT c.id, (SELECT ev.task_key FROM (
         SELECT id, task_key, kind FROM task_events
         WHERE workspace = c.workspace AND actor = c.agent AND created_at <= c.created_at
         ORDER BY created_at DESC LIMIT :scan) AS ev
     WHERE ev.kind IN ('claim', 'take_over') AND NOT EXISTS (
         SELECT 1 FROM task_events AS e
         WHERE e.workspace = c.workspace AND e.task_key = ev.task_key AND e.id > ev.id
             AND e.created_at <= c.created_at AND e.kind = ANY(:ends))
     ORDER BY ev.id DESC LIMIT 1) AS held_key
FROM checkpoints AS c
WHERE c.workspace = :ws AND c.id = ANY(:ids)

-- name: entries
-- row: ProgressRow
-- Progress entries by their seq (`ix_progress_seq`).
SELECT {columns}
FROM progress WHERE workspace = :ws AND seq IN (SELECT value FROM json_each(:seqs))

-- name: entries [postgresql]
-- row: ProgressRow
SELECT {columns}
FROM progress WHERE workspace = :ws AND seq = ANY(:seqs)

-- name: saved_near_entries
-- Checkpoints that may go with one of the entries :seqs (at most :limit, the newest entries' first):
-- saved by the entry's agent within :window seconds of it, and no further than that agent's entries
-- just before and just after it (a version goes with its agent's nearest entry, so one saved beyond
-- those goes with them). Seeks on `ix_progress_agent` and `ix_checkpoint_agent` per entry (SQLite: in
-- the order written, from the entries).
SELECT c.id FROM json_each(:seqs) AS s
CROSS JOIN progress AS p ON p.workspace = :ws AND p.seq = s.value
CROSS JOIN checkpoints AS c ON c.workspace = p.workspace AND c.agent = p.agent
    AND c.created_at >= max(p.created_at - :window, COALESCE((SELECT q.created_at FROM progress AS q
        WHERE q.workspace = p.workspace AND q.agent = p.agent AND q.created_at < p.created_at
        ORDER BY q.created_at DESC LIMIT 1), p.created_at - :window))
    AND c.created_at <= min(p.created_at + :window, COALESCE((SELECT q.created_at FROM progress AS q
        WHERE q.workspace = p.workspace AND q.agent = p.agent AND q.created_at > p.created_at
        ORDER BY q.created_at LIMIT 1), p.created_at + :window))
ORDER BY p.seq DESC, c.created_at DESC LIMIT :limit

-- name: saved_near_entries [postgresql]
-- From the entries given (unnest): an ORDER BY on progress would let the planner walk the workspace's
-- entries newest first to meet the LIMIT, past every entry the page does not show.
SELECT c.id FROM unnest(CAST(:seqs AS BIGINT[])) AS s(seq)
JOIN progress AS p ON p.workspace = :ws AND p.seq = s.seq
JOIN checkpoints AS c ON c.workspace = p.workspace AND c.agent = p.agent
    AND c.created_at >= GREATEST(p.created_at - :window, (SELECT q.created_at FROM progress AS q
        WHERE q.workspace = p.workspace AND q.agent = p.agent AND q.created_at < p.created_at
        ORDER BY q.created_at DESC LIMIT 1))
    AND c.created_at <= LEAST(p.created_at + :window, (SELECT q.created_at FROM progress AS q
        WHERE q.workspace = p.workspace AND q.agent = p.agent AND q.created_at > p.created_at
        ORDER BY q.created_at LIMIT 1))
ORDER BY s.seq DESC, c.created_at DESC LIMIT :limit

-- name: saved_between
-- Checkpoints :agent saved from :since to :until, the newest first (at most :limit).
SELECT id FROM checkpoints
WHERE workspace = :ws AND agent = :agent AND created_at >= :since AND created_at <= :until
ORDER BY created_at DESC LIMIT :limit

-- name: place
-- Where a checkpoint is: its thread and version (a fork's first version names its origin by id).
SELECT thread, version FROM checkpoints WHERE workspace = :ws AND id = :id
