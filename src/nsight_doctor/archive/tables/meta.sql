-- meta: facts about the fleet database itself, one row per key.
--
-- key: what the row says: schema_version (of these tables), created_at, created_by (the
--   nsight-doctor version that created the database), last_ingest_at, last_ingest_by.
-- value: its value, as text.
CREATE TABLE IF NOT EXISTS meta (
    key VARCHAR PRIMARY KEY,
    value VARCHAR
);
