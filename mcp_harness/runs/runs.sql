-- The session runner: runner processes and the agent sessions they start (one task each).

-- name: insert_runner
INSERT INTO runners (id, workspace, host, pid, started_at, seen_at, ended_at, waiting)
VALUES (:id, :ws, :host, :pid, :at, :at, NULL, NULL)

-- name: runner_seen
-- A live runner renews its row; `waiting` says what it waits on (NULL while it has work).
UPDATE runners SET seen_at = :at, waiting = :waiting WHERE id = :id AND ended_at IS NULL

-- name: end_runner
UPDATE runners SET ended_at = :at, seen_at = :at, waiting = NULL WHERE id = :id AND ended_at IS NULL

-- name: live_runners
-- row: RunnerRow
SELECT {columns} FROM runners
WHERE workspace = :ws AND ended_at IS NULL AND seen_at >= :since ORDER BY started_at

-- name: insert_session
INSERT INTO agent_sessions (id, workspace, runner, slot, agent, task_key, kind, started_at, seen_at, transcript)
VALUES (:id, :ws, :runner, :slot, :agent, :task_key, :kind, :at, :at, :transcript)

-- name: session_seen
-- What a running session did last (its turns, cost and last tool call so far).
UPDATE agent_sessions SET seen_at = :at, turns = :turns, cost_usd = :cost, last_tool = :last_tool
WHERE id = :id AND ended_at IS NULL

-- name: end_session
UPDATE agent_sessions SET ended_at = :at, seen_at = :at, outcome = :outcome, exit_code = :exit_code,
    turns = :turns, cost_usd = :cost, last_tool = :last_tool, last_words = :last_words
WHERE id = :id AND ended_at IS NULL

-- name: request_stop
UPDATE agent_sessions SET stop_requested_at = :at, stop_requested_by = :by
WHERE workspace = :ws AND id = :id AND ended_at IS NULL AND stop_requested_at IS NULL

-- name: stops_requested
-- The sessions of one runner that a person asked to stop.
SELECT id FROM agent_sessions WHERE runner = :runner AND ended_at IS NULL AND stop_requested_at IS NOT NULL

-- name: session
-- row: AgentSessionRow
SELECT {columns} FROM agent_sessions WHERE workspace = :ws AND id = :id

-- name: sessions
-- row: AgentSessionRow
-- The newest first.
SELECT {columns} FROM agent_sessions WHERE workspace = :ws ORDER BY started_at DESC, id LIMIT :limit

-- name: live_sessions
-- row: AgentSessionRow
SELECT {columns} FROM agent_sessions WHERE workspace = :ws AND ended_at IS NULL ORDER BY started_at, id

-- name: open_session_runners
-- row: RunnerRow
-- The runners of the workspace's sessions still open (whether each still runs is judged from these).
SELECT {columns} FROM runners
WHERE id IN (SELECT runner FROM agent_sessions WHERE workspace = :ws AND ended_at IS NULL)

-- name: session_outcomes
-- How the workspace's sessions ended, and what they cost (the metrics).
SELECT outcome, count(*), sum(cost_usd) FROM agent_sessions WHERE workspace = :ws AND ended_at IS NOT NULL
GROUP BY outcome ORDER BY outcome

-- name: every_session_outcome
-- How every workspace's sessions ended, and what they cost (the metrics' view of every workspace).
SELECT workspace, outcome, count(*), sum(cost_usd) FROM agent_sessions WHERE ended_at IS NOT NULL
GROUP BY workspace, outcome ORDER BY workspace, outcome
