-- summary_steady_state: the steady state over all GPUs (one row; no rows when no GPU has one):
-- what the findings are measured on.
--
-- start_ns: start of the first GPU's steady state, ns.
-- end_ns: end of the last one's, ns.
-- window_ns: the steady phases' total duration, summed over GPUs, ns.
-- busy_pct: GPU busy time as % of window_ns.
-- kind: the most common kind of steady work: prefill, decode, mixed or steady.
-- step_device_id: the GPU that sets the step time: the one with the most steps; among equals
--   (ranks of one job in lockstep), the one whose collectives waited least for another GPU (the
--   GPU the others wait for), then the lowest device id; with no steps found, the same order
--   picks among all. compare reads its per-step figures from this GPU too.
-- steps: that GPU's steps (NULL when no steps were found).
-- step_ns_median: that GPU's median step time, ns.
-- step_ns_p90: its 90th percentile step time, ns.
-- share_pct: window_ns as % of the GPUs' activity windows.
-- gpus: GPUs with a steady state.
CREATE VIEW summary_steady_state AS
SELECT start_ns, end_ns, window_ns, busy_pct, kind, pick.device_id AS step_device_id, pick.steps AS steps,
       pick.step_ns_median AS step_ns_median, pick.step_ns_p90 AS step_ns_p90, share_pct, gpus
FROM (
    SELECT min(s.start) AS start_ns, max(s."end") AS end_ns, sum(s.window_ns) AS window_ns,
           100.0 * sum(s.busy_ns) / nullif(sum(s.window_ns), 0) AS busy_pct,
           mode(s.kind ORDER BY s.kind) AS kind,
           -- (the step GPU's row, chosen once by the order above)
           arg_max({'device_id': s.device_id, 'steps': s.steps, 'step_ns_median': s.step_ns_median,
                    'step_ns_p90': s.step_ns_p90},
                   (coalesce(s.steps, 0), -g.comm_wait_ns, -s.device_id)) AS pick,
           100.0 * sum(s.window_ns) / nullif((SELECT sum(window_ns) FROM gpu_activity), 0) AS share_pct,
           count(*) AS gpus
    FROM steady_state s JOIN summary_steady_gpus g USING (device_id) HAVING count(*) > 0
);
