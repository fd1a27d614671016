-- Array segments: chains of element runs (see checkpoints/chains.py).

-- name: add_segment
INSERT INTO segments (workspace, prev, data) VALUES (:ws, :prev, :data) RETURNING id

-- name: segment
-- row: SegmentRow
SELECT prev, data FROM segments WHERE workspace = :ws AND id = :id

-- name: segment_chain
-- The data of every segment from the start of a chain to :tail, oldest first.
WITH RECURSIVE chain (id, prev, data, depth) AS (
    SELECT id, prev, data, 0 FROM segments WHERE workspace = :ws AND id = :tail
    UNION ALL
    SELECT s.id, s.prev, s.data, chain.depth + 1 FROM segments AS s JOIN chain ON s.id = chain.prev
    WHERE s.workspace = :ws
)
SELECT data FROM chain ORDER BY depth DESC
