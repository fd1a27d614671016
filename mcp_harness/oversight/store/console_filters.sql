-- The console's filter choices.

-- name: recent_actors
-- Who made the newest :limit task events (agents, the people who acted, the harness's expiries), read
-- from ix_task_event_time in time order.
SELECT DISTINCT actor FROM (
    SELECT actor FROM task_events WHERE workspace = :ws ORDER BY created_at DESC, id DESC LIMIT :limit
) AS recent ORDER BY actor

-- name: thread_names
-- The first :limit threads by name (the primary key holds them in that order).
SELECT name FROM threads WHERE workspace = :ws AND latest_version > 0 ORDER BY name LIMIT :limit
