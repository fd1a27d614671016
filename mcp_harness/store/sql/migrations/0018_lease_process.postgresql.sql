-- 18: which stdio server process took or last renewed a lease (machine and pid with its start time)
-- A lease whose process is gone on this machine ends at the next look, as a connection's end ends it;
-- NULL for a lease taken or renewed over HTTP (or with --keep-leases), which ends by time.
ALTER TABLE tasks ADD COLUMN lease_process VARCHAR
/
