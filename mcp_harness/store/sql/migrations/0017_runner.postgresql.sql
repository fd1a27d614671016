-- 17: the session runner: who added each task, the runners and the agent sessions they started
-- `mcp-harness run` starts one headless agent session per task and keeps a record of each (its task,
-- identity, outcome, turns, cost, last words and transcript file) and of itself (its host and pid, when
-- it was last seen, what it waits on), so people see what ran, a console can ask a session to stop, and
-- several runners on one database see each other. The runner's prompt names who added the task.
ALTER TABLE tasks ADD COLUMN added_by VARCHAR
/
CREATE TABLE runners (
    id VARCHAR NOT NULL,
    workspace VARCHAR NOT NULL,
    host VARCHAR NOT NULL,
    pid INTEGER NOT NULL,
    started_at FLOAT NOT NULL,
    seen_at FLOAT NOT NULL,
    ended_at FLOAT,
    waiting VARCHAR,
    PRIMARY KEY (id)
)
/
CREATE INDEX ix_runner_workspace ON runners (workspace, started_at)
/
CREATE TABLE agent_sessions (
    id VARCHAR NOT NULL,
    workspace VARCHAR NOT NULL,
    runner VARCHAR NOT NULL,
    slot INTEGER NOT NULL,
    agent VARCHAR NOT NULL,
    task_key VARCHAR,
    kind VARCHAR NOT NULL,
    started_at FLOAT NOT NULL,
    seen_at FLOAT NOT NULL,
    ended_at FLOAT,
    outcome VARCHAR,
    exit_code INTEGER,
    turns INTEGER,
    cost_usd FLOAT,
    last_tool VARCHAR,
    last_words TEXT,
    transcript VARCHAR,
    stop_requested_at FLOAT,
    stop_requested_by VARCHAR,
    PRIMARY KEY (id)
)
/
CREATE INDEX ix_agent_session_started ON agent_sessions (workspace, started_at)
/
CREATE INDEX ix_agent_session_task ON agent_sessions (workspace, task_key)
/
