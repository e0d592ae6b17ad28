-- summary_phase_kernels: the kernels of each phase by total time, most first (the summary
-- keeps the top 5 of each phase).
--
-- device_id: CUDA device id.
-- phase: phase number (summary_phases).
-- name: kernel name, or "graph <id>" for a CUDA graph execution.
-- count: executions that started in the phase.
-- total_ns: their total time, ns.
-- share_pct: total_ns as % of the phase's kernel time.
CREATE VIEW summary_phase_kernels AS
WITH k AS (
    SELECT p.device_id, p.phase, o.name, count(*) AS count, sum(o.duration) AS total_ns
    -- (a range join: a GPU has few phases, and they do not overlap)
    FROM gpu_ops o JOIN phases p ON p.device_id = o.device_id AND o.start >= p.start AND o.start < p."end"
    WHERE o.kind IN ('kernel', 'graph')
    GROUP BY ALL
)
SELECT device_id, phase, name, count, total_ns,
       100.0 * total_ns / sum(total_ns) OVER (PARTITION BY device_id, phase) AS share_pct
FROM k ORDER BY device_id, phase, total_ns DESC, name;
