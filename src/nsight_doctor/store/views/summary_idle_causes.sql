-- summary_idle_causes: the idle time of every GPU (gpu_gaps) by part, most time first: what
-- held the GPU's next operation back (see gpu_gaps).
--
-- cause: launch, queued, sync, cpu, api or setup.
-- count: gaps with time in this part.
-- total_ns: the part's total, ns.
CREATE VIEW summary_idle_causes AS
WITH p AS (
    UNPIVOT (SELECT launch_ns AS launch, queued_ns AS queued, sync_ns AS sync, cpu_ns AS cpu, api_ns AS api,
                    setup_ns AS setup FROM gpu_gaps)
    ON launch, queued, sync, cpu, api, setup INTO NAME cause VALUE ns
)
SELECT cause, count(*) FILTER (WHERE ns > 0) AS count, sum(ns) AS total_ns FROM p
GROUP BY cause HAVING sum(ns) > 0 ORDER BY total_ns DESC, cause;
