-- 8: console sessions: a hash of the session id, bound to the token it was made from
-- The console's sign-in cookie holds an opaque session id, never the bearer token; signing out or
-- revoking the token deletes the rows, which ends the session on every server sharing the database.
CREATE TABLE console_sessions (
    session_hash VARCHAR NOT NULL,
    token_hash VARCHAR NOT NULL,
    created_at FLOAT NOT NULL,
    expires_at FLOAT NOT NULL,
    PRIMARY KEY (session_hash)
)
/
CREATE INDEX ix_console_session_token ON console_sessions (token_hash)
/
