-- Remembered results of mutating calls, keyed by workspace + agent + tool + key.

-- name: stored_result
-- row: StoredResult
SELECT request_hash, result FROM idempotency_keys
WHERE workspace = :ws AND agent = :agent AND tool = :tool AND "key" = :key

-- name: store_result
INSERT INTO idempotency_keys (workspace, agent, tool, "key", request_hash, result, created_at)
VALUES (:ws, :agent, :tool, :key, :request_hash, :result, :at)

-- name: purge_results
DELETE FROM idempotency_keys WHERE created_at < :before
