-- How a full-text search runs (the searches themselves are built in queries.py): its time limit.

-- name: search_time_limit [postgresql]
-- Every statement of the search's transaction is stopped past `:ms` milliseconds (the setting ends with it).
SELECT set_config('statement_timeout', :ms, true)
