-- diagnoses: each profile's whole diagnosis, as JSON, so that `nsight-doctor analyze FILE --db
-- fleet.duckdb` prints a profile of the fleet without analysing it again (the same content, by
-- the same code and rules).
--
-- profile_id: the profile (profiles.profile_id).
-- analysis_digest: as profiles.analysis_digest; an analyze with other code, rules or options
--   does not reuse it.
-- diagnosis: the diagnosis: inputs, summary, findings (with the templates that render them),
--   skipped rules and notes.
CREATE TABLE IF NOT EXISTS diagnoses (
    profile_id VARCHAR,
    analysis_digest VARCHAR,
    diagnosis JSON
);
