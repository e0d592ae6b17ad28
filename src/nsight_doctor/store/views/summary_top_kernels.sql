-- summary_top_kernels: kernels and CUDA graph executions grouped by name, most GPU time first.
--
-- name: kernel name, or "graph <id>" for a CUDA graph execution.
-- kind: kernel or graph.
-- count: executions.
-- total_ns: sum of their durations, ns.
-- share_pct: total_ns as % of all kernel and graph time.
-- mean_ns: mean duration, ns.
-- median_ns: median duration, ns.
CREATE VIEW summary_top_kernels AS
WITH t AS (SELECT coalesce(sum(duration), 0) AS total FROM gpu_ops WHERE kind IN ('kernel', 'graph'))
SELECT name, kind, count(*) AS count, sum(duration) AS total_ns,
       100.0 * sum(duration) / nullif(any_value(t.total), 0) AS share_pct,
       avg(duration) AS mean_ns, median(duration) AS median_ns
FROM gpu_ops, t WHERE kind IN ('kernel', 'graph')
GROUP BY name, kind ORDER BY total_ns DESC, name;
