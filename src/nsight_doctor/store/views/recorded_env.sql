-- recorded_env: the environment of each process the capture launched (recorded_processes),
-- one row per variable, secrets hidden at ingest.
--
-- process: nsys's index of the launched process.
-- name: the variable.
-- value: its value, without the quotes nsys records around it.
CREATE VIEW recorded_env AS
WITH e AS (
    SELECT TRY_CAST(regexp_extract(name, '^PROCESS_([0-9]+):', 1) AS INTEGER) AS process, value
    FROM base_capture_meta
    WHERE regexp_matches(name, '^PROCESS_[0-9]+:ENVIRONMENT_VARIABLE$') AND contains(value, '=')
)
SELECT process, split_part(value, '=', 1) AS name,
       regexp_replace(substr(value, strpos(value, '=') + 1), '^"(.*)"$', '\1', 's') AS value
FROM e;
