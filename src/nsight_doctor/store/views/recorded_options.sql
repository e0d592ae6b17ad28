-- recorded_options: the long options (--name or --name=value) on the recorded command lines of
-- the processes that the capture launched (recorded_processes), with their values: what the
-- user asked the server for, such as vLLM's `--enforce-eager` or `--max-num-seqs 256`. Secret
-- values are hidden at ingest, as in recorded_processes.
--
-- process: nsys's index of the launched process (PROCESS_n), from 0.
-- option: the option, e.g. "--max-num-seqs".
-- value: its value: after "=", else the next argument when that is not an option itself; NULL
--   for a flag.
CREATE VIEW recorded_options AS
WITH a AS (
    SELECT TRY_CAST(regexp_extract(name, '^PROCESS_([0-9]+):', 1) AS INTEGER) AS process,
           TRY_CAST(regexp_extract(name, ':ARGUMENT_([0-9]+)$', 1) AS INTEGER) AS pos, value
    FROM base_capture_meta
    WHERE regexp_matches(name, '^PROCESS_[0-9]+:ARGUMENT_[0-9]+$')
), n AS (
    SELECT *, lead(value) OVER (PARTITION BY process ORDER BY pos) AS next FROM a
)
SELECT process,
       regexp_extract(value, '^(--[A-Za-z0-9][A-Za-z0-9_.-]*)', 1) AS option,
       CASE WHEN contains(value, '=') THEN regexp_extract(value, '^[^=]*=(.*)$', 1)
            WHEN next IS NOT NULL AND NOT starts_with(next, '-') THEN next END AS value
FROM n
WHERE regexp_matches(value, '^--[A-Za-z0-9]')
ORDER BY process, pos;
