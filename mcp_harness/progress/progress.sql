-- The progress log (the recent entries' statement comes in shapes: queries.recent_progress()).

-- name: insert_progress
INSERT INTO progress (entry_id, workspace, seq, thread, agent, status, summary, details, next_steps, task_key,
    artifacts, created_at)
VALUES (:entry_id, :workspace, :seq, :thread, :agent, :status, :summary, :details, :next_steps, :task_key,
    :artifacts, :created_at)

-- name: count_progress
SELECT count(*) FROM progress WHERE workspace = :ws
