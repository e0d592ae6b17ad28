-- summary_ncu: what the Nsight Compute reports hold (one row; no rows without a report).
--
-- kernels_profiled: profiled kernels.
-- launch_configs: distinct launch configurations (ncu_groups rows).
-- memory_bound: profiled kernels classed memory-bound (ncu_kernels.bottleneck).
-- compute_bound: those classed compute-bound.
-- latency_bound: those classed latency-bound.
-- with_stall_reasons: kernels with warp-stall reasons (they need --set full).
-- with_cache_metrics: kernels with cache hit rates (--set detailed or full).
-- with_roofline_metrics: kernels with the roofline's FLOP counters.
-- profiled_ns: the profiled kernels' durations summed (ncu_kernels.duration_ns), ns.
-- coverage_pct: share of the timeline's kernel time that the reports cover (matched by name and launch configuration), NULL without a timeline.
CREATE VIEW summary_ncu AS
SELECT count(*) AS kernels_profiled, count(DISTINCT launch) AS launch_configs,
       count(*) FILTER (WHERE bottleneck = 'memory-bound') AS memory_bound,
       count(*) FILTER (WHERE bottleneck = 'compute-bound') AS compute_bound,
       count(*) FILTER (WHERE bottleneck = 'latency-bound') AS latency_bound,
       count(*) FILTER (WHERE top_stall IS NOT NULL) AS with_stall_reasons,
       count(*) FILTER (WHERE l2_hit_pct IS NOT NULL) AS with_cache_metrics,
       count(*) FILTER (WHERE flops IS NOT NULL) AS with_roofline_metrics,
       sum(duration_ns) AS profiled_ns,
       (SELECT 100.0 * sum(nsys_total_ns) FILTER (WHERE nsys_match = 'config')
               / nullif((SELECT sum(duration) FROM kernels), 0) FROM ncu_groups) AS coverage_pct
FROM ncu_kernels HAVING count(*) > 0;
