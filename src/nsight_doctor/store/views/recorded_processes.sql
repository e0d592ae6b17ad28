-- recorded_processes: the processes that the capture launched, as nsys recorded them
-- (META_DATA_CAPTURE: PROCESS_n:COMMAND, ARGUMENT_i, WORKING_DIR, ENVIRONMENT_VARIABLE), one
-- row per process. Secrets are hidden at ingest (values of secret-named variables and
-- options, known token formats and URL passwords become REDACTED). Empty when nothing was
-- recorded: attached processes, 2022.x exports, nvprof and Nsight Compute inputs.
--
-- process: nsys's index of the launched process (PROCESS_n), from 0.
-- command: the program and its arguments, joined by spaces; an argument with a space, a quote
--   or a shell character is single-quoted.
-- working_dir: the folder it ran in, or NULL.
-- environment: how many environment variables were recorded.
CREATE VIEW recorded_processes AS
WITH m AS (
    SELECT TRY_CAST(regexp_extract(name, '^PROCESS_([0-9]+):', 1) AS INTEGER) AS process,
           regexp_extract(name, '^PROCESS_[0-9]+:(.*)$', 1) AS key, value
    FROM base_capture_meta
    WHERE regexp_matches(name, '^PROCESS_[0-9]+:')
), args AS (
    SELECT process,
           CASE WHEN key = 'COMMAND' THEN -1 ELSE TRY_CAST(regexp_extract(key, '^ARGUMENT_([0-9]+)$', 1) AS INTEGER) END
               AS pos,
           CASE WHEN coalesce(value, '') = '' OR regexp_matches(value, '[\s''"$`\\|&;<>()*?!#]')
                THEN '''' || replace(coalesce(value, ''), '''', '''"''"''') || ''''
                ELSE value END AS arg
    FROM m WHERE key = 'COMMAND' OR regexp_matches(key, '^ARGUMENT_[0-9]+$')
)
SELECT p.process,
       (SELECT string_agg(arg, ' ' ORDER BY pos) FROM args a WHERE a.process = p.process) AS command,
       (SELECT any_value(value) FROM m WHERE m.process = p.process AND key = 'WORKING_DIR') AS working_dir,
       (SELECT count(*) FROM m WHERE m.process = p.process AND key = 'ENVIRONMENT_VARIABLE') AS environment
FROM (SELECT DISTINCT process FROM m WHERE key = 'COMMAND' AND process IS NOT NULL) p
ORDER BY p.process;
