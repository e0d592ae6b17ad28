-- failures: the files that could not be analysed, one row per path, with the error as the
-- command line would print it. A rerun does not retry a failure whose content and
-- nsight-doctor are unchanged (ingest --retry-failed does); a file that later succeeds is
-- removed from here.
--
-- path: the path that failed (the report, for a report and its export).
-- profile_id: sha256 of its content (NULL when it could not be read).
-- kind: what it was detected as, when known.
-- error: the error, one line (e.g. the report is newer than the nsys found).
-- error_type: the kind of error: InputError, ReportVersionError, ToolMissingError,
--   WorkerDied, Timeout, or the internal error's exception type.
-- failed_at: when it failed (UTC).
-- doctor_version: the nsight-doctor version that tried.
-- analysis_digest: digest of the code and rules that tried (as profiles.analysis_digest).
CREATE TABLE IF NOT EXISTS failures (
    path VARCHAR PRIMARY KEY,
    profile_id VARCHAR,
    kind VARCHAR,
    error VARCHAR,
    error_type VARCHAR,
    failed_at TIMESTAMP,
    doctor_version VARCHAR,
    analysis_digest VARCHAR
);
