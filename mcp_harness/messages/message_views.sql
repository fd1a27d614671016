-- The view of the messages that may still reach a reader who has not acknowledged them (see migration
-- 19), as the schema declares it: tables.py creates it with the tables, and tests/test_migrations.py
-- compares it with what the migrations made. A migration that changes it changes it here too.
--
-- The one home of the rule: a message about a task stops reaching readers once that task's status has
-- changed after the message was sent (an event of a kind that changes the status, `tasks/rules.py`'
-- STATUS_EVENTS, came later; the task's events are read through ix_task_event_task). Every unread count
-- and list reads it (messages/messages.sql, and quick_read.py for the hooks); a message without a task is
-- kept to its time window by the queries (`*` about no task: a day).

-- name: live_messages
CREATE VIEW live_messages AS
SELECT m.id, m.message_id, m.workspace, m.sender, m.recipient, m.subject, m.body, m.task_key, m.reply_to,
       m.created_at, m.acked_at, m.acked_by
FROM messages AS m
WHERE m.task_key IS NULL OR NOT EXISTS (
    SELECT 1 FROM task_events AS e
    WHERE e.workspace = m.workspace AND e.task_key = m.task_key AND e.created_at > m.created_at
      AND e.kind IN ('approve', 'cancel', 'claim', 'complete', 'expire', 'fail', 'operator_release', 'reject', 'release',
                     'reopen', 'returned', 'revoke', 'submit'))
