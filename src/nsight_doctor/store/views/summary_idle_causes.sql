-- summary_idle_causes: the idle time of every GPU (gpu_gaps) by part, most time first: what
-- held the GPU's next operation back (see gpu_gaps).
--
-- cause: launch, queued, sync, cpu, api or setup.
-- count: gaps with time in this part.
-- total_ns: the part's total, ns.
CREATE VIEW summary_idle_causes AS
WITH a AS (
    -- (each part summed in one pass, then unpivoted: unpivoting the gaps first made six rows
    -- of each, 0.4 s at 2 M gaps on 2 cores)
    SELECT count(*) FILTER (WHERE launch_ns > 0) AS launch_count, sum(launch_ns) AS launch_total,
           count(*) FILTER (WHERE queued_ns > 0) AS queued_count, sum(queued_ns) AS queued_total,
           count(*) FILTER (WHERE sync_ns > 0) AS sync_count, sum(sync_ns) AS sync_total,
           count(*) FILTER (WHERE cpu_ns > 0) AS cpu_count, sum(cpu_ns) AS cpu_total,
           count(*) FILTER (WHERE api_ns > 0) AS api_count, sum(api_ns) AS api_total,
           count(*) FILTER (WHERE setup_ns > 0) AS setup_count, sum(setup_ns) AS setup_total
    FROM gpu_gaps
), p AS (
    UNPIVOT a ON (launch_count, launch_total) AS launch,
                (queued_count, queued_total) AS queued,
                (sync_count, sync_total) AS sync,
                (cpu_count, cpu_total) AS cpu,
                (api_count, api_total) AS api,
                (setup_count, setup_total) AS setup
    INTO NAME cause VALUE count, total_ns
)
SELECT cause, count, total_ns FROM p WHERE total_ns > 0 ORDER BY total_ns DESC, cause;
