-- summary_launch: kernel and graph launch calls, and how long their work waited to start (one row).
--
-- api_count: launch calls (cudaLaunchKernel, cuLaunchKernel, cudaGraphLaunch, ...).
-- api_ns: CPU time in them, ns.
-- api_mean_ns: mean CPU time per call, ns.
-- latency_median_ns: median time from a launch call's entry to its work's start on the GPU, ns.
-- latency_p90_ns: 90th percentile of that latency, ns.
CREATE VIEW summary_launch AS
WITH a AS (
    SELECT count(*) AS api_count, coalesce(sum(duration), 0) AS api_ns, avg(duration) AS api_mean_ns
    FROM api_calls WHERE category IN ('launch', 'graph_launch')
), l AS (
    SELECT median(o.start - a.start) AS latency_median_ns,
           quantile_cont(o.start - a.start, 0.9) AS latency_p90_ns
    FROM gpu_ops o JOIN api_calls a ON a.correlation_id = o.correlation_id AND a.pid = o.pid
    WHERE o.kind IN ('kernel', 'graph') AND a.category IN ('launch', 'graph_launch')
)
SELECT * FROM a, l;
