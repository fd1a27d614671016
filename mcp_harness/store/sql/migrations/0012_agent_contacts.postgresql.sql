-- 12: agent contacts: when each agent last made a call, and what its last claim answered
-- The console shows who is alive (any call: a claim poll, a heartbeat, a read) and flags a lease whose
-- holder has gone silent before the lease ends. A server writes an agent's row at most every few
-- seconds (and when its claim's answer changes), so the hot path pays nothing per call.
CREATE TABLE agent_contacts (
    workspace VARCHAR NOT NULL,
    agent VARCHAR NOT NULL,
    seen_at FLOAT NOT NULL,
    tool VARCHAR NOT NULL,
    claim_outcome VARCHAR,
    claim_at FLOAT,
    PRIMARY KEY (workspace, agent)
)
/
