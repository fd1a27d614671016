-- 2: array segments; partial label index
CREATE TABLE segments (
    id BIGSERIAL NOT NULL,
    workspace VARCHAR NOT NULL,
    prev BIGINT,
    data BYTEA NOT NULL,
    PRIMARY KEY (id)
)
/
DROP INDEX ix_checkpoint_label
/
CREATE INDEX ix_checkpoint_label ON checkpoints (workspace, thread, label, version) WHERE label IS NOT NULL
/
