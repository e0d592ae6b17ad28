-- summary_gpus: one row per GPU of the machine or with work in the capture.
--
-- device_id: CUDA device id.
-- name: GPU name.
-- sm_count: streaming multiprocessors.
-- memory_bandwidth_bytes_per_s: peak DRAM bandwidth, bytes per second.
-- busy_ns: time in which at least one operation ran (gpu_busy), ns.
-- busy_pct: busy_ns as % of the capture's GPU activity window (summary_capture.gpu_window_ns).
-- first_op_ns: start of its first operation, ns.
-- last_op_ns: end of its last operation, ns.
-- kernel_ns: sum of its kernels' durations, ns.
-- graph_ns: sum of its CUDA graph executions' durations, ns.
-- memcpy_ns: sum of its copies' durations, ns.
-- memset_ns: sum of its memsets' durations, ns.
CREATE VIEW summary_gpus AS
WITH ops AS (
    SELECT device_id,
           sum(duration) FILTER (WHERE kind = 'kernel') AS kernel_ns,
           sum(duration) FILTER (WHERE kind = 'graph') AS graph_ns,
           sum(duration) FILTER (WHERE kind = 'memcpy') AS memcpy_ns,
           sum(duration) FILTER (WHERE kind = 'memset') AS memset_ns
    FROM gpu_ops GROUP BY device_id
)
SELECT coalesce(a.device_id, g.device_id) AS device_id, g.name, g.sm_count,
       g.memory_bandwidth_bytes_per_s,
       coalesce(a.busy_ns, 0) AS busy_ns,
       CASE WHEN c.gpu_window > 0 THEN 100.0 * coalesce(a.busy_ns, 0) / c.gpu_window END AS busy_pct,
       a.start AS first_op_ns, a."end" AS last_op_ns,
       coalesce(o.kernel_ns, 0) AS kernel_ns, coalesce(o.graph_ns, 0) AS graph_ns,
       coalesce(o.memcpy_ns, 0) AS memcpy_ns, coalesce(o.memset_ns, 0) AS memset_ns
FROM gpu_activity a FULL JOIN gpus g ON g.device_id = a.device_id
LEFT JOIN ops o ON o.device_id = coalesce(a.device_id, g.device_id), capture c
ORDER BY 1;
