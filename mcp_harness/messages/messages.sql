-- Messages between agents and people (see tables.Message). The caller's inbox: what is addressed to its
-- name (:me, e.g. `A:s1`), to its agent without the session (:base, `A`; :me again without a session),
-- to the operators when it is one (:ops is `operators`, else '' which names nobody), and to every agent
-- (`*`, sent within the window that starts at :since, or at :day for a `*` about no task; not by the
-- caller, not acknowledged by it). What is unread is read from `live_messages` (message_views.sql): a
-- message about a task no longer reaches a reader who has not acknowledged it once the task's status
-- changed after it was sent.

-- name: insert_message
INSERT INTO messages (message_id, workspace, sender, recipient, subject, body, task_key, reply_to, created_at)
VALUES (:message_id, :workspace, :sender, :recipient, :subject, :body, :task_key, :reply_to, :created_at)

-- name: message_exists
SELECT 1 FROM messages WHERE workspace = :ws AND message_id = :id

-- name: count_unread
SELECT (SELECT count(*) FROM live_messages
        WHERE workspace = :ws AND recipient IN (:me, :base, :ops) AND acked_at IS NULL)
     + (SELECT count(*) FROM live_messages AS m
        WHERE m.workspace = :ws AND m.recipient = '*' AND m.acked_at IS NULL AND m.created_at >= :since
          AND (m.task_key IS NOT NULL OR m.created_at >= :day) AND m.sender <> :me
          AND NOT EXISTS (SELECT 1 FROM message_acks AS a
                          WHERE a.workspace = m.workspace AND a.message_id = m.message_id AND a.agent = :me))

-- name: unread_messages
-- row: MessageRow
-- Two index range scans (ix_message_inbox), not one OR that would read every message of the workspace.
SELECT message_id, sender, recipient, subject, body, task_key, reply_to, created_at, "read" FROM (
    SELECT id, message_id, sender, recipient, subject, body, task_key, reply_to, created_at, FALSE AS "read"
    FROM live_messages
    WHERE workspace = :ws AND recipient IN (:me, :base, :ops) AND acked_at IS NULL
    UNION ALL
    SELECT m.id, m.message_id, m.sender, m.recipient, m.subject, m.body, m.task_key, m.reply_to, m.created_at,
           FALSE AS "read"
    FROM live_messages AS m
    WHERE m.workspace = :ws AND m.recipient = '*' AND m.acked_at IS NULL AND m.created_at >= :since
      AND (m.task_key IS NOT NULL OR m.created_at >= :day) AND m.sender <> :me
      AND NOT EXISTS (SELECT 1 FROM message_acks AS a
                      WHERE a.workspace = m.workspace AND a.message_id = m.message_id AND a.agent = :me)
) AS inbox
ORDER BY id DESC
LIMIT :limit

-- name: all_messages
-- row: MessageRow
-- The newest `limit` of each part (ix_message_to), then the newest `limit` of those.
SELECT message_id, sender, recipient, subject, body, task_key, reply_to, created_at, "read" FROM (
    SELECT * FROM (
        SELECT id, message_id, sender, recipient, subject, body, task_key, reply_to, created_at,
               acked_at IS NOT NULL AS "read"
        FROM messages WHERE workspace = :ws AND recipient IN (:me, :base, :ops) ORDER BY id DESC LIMIT :limit
    ) AS direct
    UNION ALL
    SELECT * FROM (
        SELECT m.id, m.message_id, m.sender, m.recipient, m.subject, m.body, m.task_key, m.reply_to, m.created_at,
               EXISTS (SELECT 1 FROM message_acks AS a
                       WHERE a.workspace = m.workspace AND a.message_id = m.message_id AND a.agent = :me) AS "read"
        FROM messages AS m WHERE m.workspace = :ws AND m.recipient = '*' AND m.sender <> :me
        ORDER BY m.id DESC LIMIT :limit
    ) AS everyone
) AS inbox
ORDER BY id DESC
LIMIT :limit

-- name: task_messages
-- row: MessageRow
SELECT message_id, sender, recipient, subject, body, task_key, reply_to, created_at,
       acked_at IS NOT NULL AS "read"
FROM messages
WHERE workspace = :ws AND task_key = :task
ORDER BY id DESC
LIMIT :limit

-- name: ack_direct
UPDATE messages SET acked_at = :at, acked_by = :me
WHERE workspace = :ws AND message_id = :id AND acked_at IS NULL AND recipient IN (:me, :base, :ops)

-- name: ack_broadcast
INSERT INTO message_acks (workspace, message_id, agent, acked_at)
SELECT workspace, message_id, CAST(:me AS VARCHAR), CAST(:at AS FLOAT) FROM messages
WHERE workspace = :ws AND message_id = :id AND recipient = '*' AND sender <> :me
ON CONFLICT DO NOTHING

-- name: addressed
SELECT count(*) FROM messages
WHERE workspace = :ws AND message_id = :id AND (recipient IN (:me, :base, :ops, '*'))

-- name: count_unread_operators
-- The operators' unread messages (the console's count): as count_unread counts them for a person.
SELECT count(*) FROM live_messages WHERE workspace = :ws AND recipient = 'operators' AND acked_at IS NULL

-- name: count_open_to
SELECT count(*) FROM messages
WHERE workspace = :ws AND recipient = :to AND acked_at IS NULL AND created_at >= :since

-- name: name_seen
-- Who an addressee is (the send answer's `warning`): whether a name or a session of it (`name:...`) has
-- been seen here: made a call (agent_contacts), held a task or sent a message. The first part that finds
-- one ends it (the messages are read only for a name nobody else knows). Compared with substr, not LIKE
-- or a range: byte for byte on both backends whatever the collation, and `_` in a name is no wildcard.
SELECT 1 FROM agent_contacts WHERE workspace = :ws AND (agent = :name OR substr(agent, 1, :n) = :prefix)
UNION ALL
SELECT 1 FROM tasks WHERE workspace = :ws AND (owner = :name OR substr(owner, 1, :n) = :prefix)
UNION ALL
SELECT 1 FROM messages WHERE workspace = :ws AND (sender = :name OR substr(sender, 1, :n) = :prefix)
LIMIT 1

-- name: sessions_seen
-- The sessions of a name (`name:...`, the prefix) that have made a call here, the latest first.
SELECT agent FROM agent_contacts WHERE workspace = :ws AND substr(agent, 1, :n) = :prefix
ORDER BY seen_at DESC, agent
LIMIT :limit

-- name: lock_addressee [postgresql]
-- Sends to one addressee take turns from their count of its open messages to their commit, so the cap
-- on them holds under concurrent sends (each would count before the others insert). SQLite's write
-- transactions (BEGIN IMMEDIATE) are serial already. Keyed per workspace and addressee.
SELECT pg_advisory_xact_lock(:id)
