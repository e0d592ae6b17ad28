-- summary_steady_idle: each GPU's idle time in its steady state (steady_gaps) by part, most
-- time first (see gpu_gaps for what each part means).
--
-- device_id: CUDA device id.
-- cause: launch, queued, sync, cpu, api or setup.
-- count: gaps with time in this part.
-- total_ns: the part's total, ns.
CREATE VIEW summary_steady_idle AS
WITH p AS (
    UNPIVOT (SELECT device_id, launch_ns AS launch, queued_ns AS queued, sync_ns AS sync, cpu_ns AS cpu,
                    api_ns AS api, setup_ns AS setup FROM steady_gaps)
    ON launch, queued, sync, cpu, api, setup INTO NAME cause VALUE ns
)
SELECT device_id, cause, count(*) FILTER (WHERE ns > 0) AS count, sum(ns) AS total_ns FROM p
GROUP BY device_id, cause HAVING sum(ns) > 0 ORDER BY device_id, total_ns DESC, cause;
