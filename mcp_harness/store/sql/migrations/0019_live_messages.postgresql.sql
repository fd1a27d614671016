-- 19: live_messages, the messages that may still reach a reader who has not acknowledged them
-- A message about a task stops reaching such readers once the task's status changed after it was sent.
CREATE VIEW live_messages AS
SELECT m.id, m.message_id, m.workspace, m.sender, m.recipient, m.subject, m.body, m.task_key, m.reply_to,
       m.created_at, m.acked_at, m.acked_by
FROM messages AS m
WHERE m.task_key IS NULL OR NOT EXISTS (
    SELECT 1 FROM task_events AS e
    WHERE e.workspace = m.workspace AND e.task_key = m.task_key AND e.created_at > m.created_at
      AND e.kind IN ('approve', 'cancel', 'claim', 'complete', 'expire', 'fail', 'operator_release', 'reject', 'release',
                     'reopen', 'returned', 'revoke', 'submit'))
/
