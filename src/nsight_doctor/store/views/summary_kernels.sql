-- summary_kernels: kernel statistics over the whole capture (one row).
--
-- kernel_count: kernels (graph-replayed kernels count only with --cuda-graph-trace=node).
-- kernels_in_graphs: kernels that ran inside CUDA graphs.
-- kernel_ns: sum of kernel durations, ns.
-- kernel_median_ns: median kernel duration, ns.
-- kernel_mean_ns: mean kernel duration, ns.
-- tiny_kernel_pct: % of kernels shorter than tiny_kernel_threshold_ns.
-- graph_launch_count: CUDA graph executions traced as a whole (--cuda-graph-trace=graph).
-- graph_ns: sum of their durations, ns.
-- tiny_kernel_threshold_ns: the tiny-kernel bound, 10 us.
-- launch_rate_per_s: kernels per second of the GPU activity window.
CREATE VIEW summary_kernels AS
WITH k AS (
    SELECT count(*) AS kernel_count,
           count(*) FILTER (WHERE in_graph) AS kernels_in_graphs,
           coalesce(sum(duration), 0) AS kernel_ns,
           median(duration) AS kernel_median_ns,
           avg(duration) AS kernel_mean_ns,
           100.0 * count(*) FILTER (WHERE duration < 10000) / nullif(count(*), 0) AS tiny_kernel_pct
    FROM kernels
), g AS (
    SELECT count(*) AS graph_launch_count, coalesce(sum(duration), 0) AS graph_ns FROM graph_launches
)
SELECT k.*, g.*, 10000 AS tiny_kernel_threshold_ns,
       k.kernel_count / (c.gpu_window / 1e9) AS launch_rate_per_s
FROM k, g, capture c;
