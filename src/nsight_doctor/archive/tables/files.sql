-- files: every file or folder that ingest found and took as (part of) a profile, with the
-- size and modification time it had then: a rerun skips an unchanged path without reading it
-- again.
--
-- path: the path (ARCHIVE!MEMBER for a member of a tar or zip archive).
-- profile_id: the profile it belongs to (profiles.profile_id).
-- role: profile (the file is the profile), report (a report whose export beside it was
--   read), export (that export), member (a file of a --group folder profile).
-- size_bytes: its size (all files, for a folder).
-- mtime_ns: its modification time, ns since the epoch (the newest file, for a folder).
-- content_sha256: sha256 of its own content (of its files, by name, for a folder).
-- seen_at: when an ingest last found it (UTC).
CREATE TABLE IF NOT EXISTS files (
    path VARCHAR PRIMARY KEY,
    profile_id VARCHAR,
    role VARCHAR,
    size_bytes BIGINT,
    mtime_ns BIGINT,
    content_sha256 VARCHAR,
    seen_at TIMESTAMP
);
