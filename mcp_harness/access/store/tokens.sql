-- HTTP bearer tokens: only their SHA-256 is stored.

-- name: insert_token
INSERT INTO api_tokens (token_hash, token_id, workspace, agent, role, created_at, revoked_at)
VALUES (:token_hash, :token_id, :workspace, :agent, :role, :created_at, NULL)

-- name: live_token
-- row: TokenRow
SELECT {columns} FROM api_tokens
WHERE token_hash = :hash AND revoked_at IS NULL

-- name: tokens
-- row: TokenRow
SELECT {columns} FROM api_tokens ORDER BY created_at

-- name: workspace_tokens
-- row: TokenRow
SELECT {columns} FROM api_tokens
WHERE workspace = :ws ORDER BY created_at

-- name: revoke_token
UPDATE api_tokens SET revoked_at = :at WHERE revoked_at IS NULL AND (token_hash = :hash OR token_id = :id)

-- name: revoke_agent_tokens
UPDATE api_tokens SET revoked_at = :at WHERE revoked_at IS NULL AND workspace = :ws AND agent = :agent

-- name: count_live_tokens
SELECT count(*) FROM api_tokens WHERE revoked_at IS NULL
