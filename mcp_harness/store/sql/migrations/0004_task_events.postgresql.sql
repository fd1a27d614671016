-- 4: task events: every transition of a task, with its actor and time
CREATE TABLE task_events (
    id BIGSERIAL NOT NULL,
    workspace VARCHAR NOT NULL,
    task_key VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,
    actor VARCHAR NOT NULL,
    attempt INTEGER NOT NULL,
    detail TEXT,
    created_at FLOAT NOT NULL,
    PRIMARY KEY (id)
)
/
CREATE INDEX ix_task_event_task ON task_events (workspace, task_key, id)
/
