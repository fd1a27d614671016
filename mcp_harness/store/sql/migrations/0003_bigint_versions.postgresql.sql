-- 3: 64-bit checkpoint versions
ALTER TABLE threads ALTER COLUMN latest_version TYPE BIGINT
/
ALTER TABLE checkpoints ALTER COLUMN version TYPE BIGINT
/
