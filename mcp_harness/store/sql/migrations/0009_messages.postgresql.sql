-- 9: messages between agents and people, and the acknowledgements of messages sent to every agent
-- A message to one addressee (an agent, an agent's session, the operators) is acknowledged once, on its
-- own row (acked_at); one to every agent (recipient '*') is acknowledged by each reader for itself, a
-- row of message_acks each. The inbox index holds only what is not acknowledged on the message's row.
CREATE TABLE messages (
    id BIGSERIAL NOT NULL,
    message_id VARCHAR NOT NULL,
    workspace VARCHAR NOT NULL,
    sender VARCHAR NOT NULL,
    recipient VARCHAR NOT NULL,
    subject TEXT,
    body TEXT NOT NULL,
    task_key VARCHAR,
    reply_to VARCHAR,
    created_at FLOAT NOT NULL,
    acked_at FLOAT,
    acked_by VARCHAR,
    PRIMARY KEY (id),
    UNIQUE (message_id)
)
/
CREATE INDEX ix_message_inbox ON messages (workspace, recipient, created_at) WHERE acked_at IS NULL
/
CREATE INDEX ix_message_to ON messages (workspace, recipient, acked_at, id)
/
CREATE INDEX ix_message_task ON messages (workspace, task_key, id)
/
CREATE TABLE message_acks (
    workspace VARCHAR NOT NULL,
    message_id VARCHAR NOT NULL,
    agent VARCHAR NOT NULL,
    acked_at FLOAT NOT NULL,
    PRIMARY KEY (workspace, message_id, agent)
)
/
