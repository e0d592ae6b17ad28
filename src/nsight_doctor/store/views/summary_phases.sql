-- summary_phases: each GPU's phases (phases), with their GPU work, in time order.
--
-- device_id: CUDA device id.
-- phase: phase number on this GPU, from 1.
-- name: startup, warmup, prefill, decode, mixed, steady or idle.
-- start_ns: phase start, ns.
-- end_ns: phase end, ns.
-- duration_ns: end_ns - start_ns.
-- source: nvtx or inferred (see phases).
-- busy_pct: GPU busy time as % of the phase.
-- kernel_ns: sum of the durations of the kernels (and CUDA graph executions) that started in it, ns.
-- steps: steps in the phase, NULL for phases without steps.
-- step_ns_median: median step time, ns (for decode, the time per output token).
-- step_ns_p90: 90th percentile of the step time, ns.
-- steady: whether the phase is steady work (what findings are measured on).
CREATE VIEW summary_phases AS
SELECT p.device_id, p.phase, p.name, p.start AS start_ns, p."end" AS end_ns, p.duration AS duration_ns,
       p.source, p.busy_pct,
       coalesce((SELECT sum(o.duration) FROM gpu_ops o WHERE o.device_id = p.device_id
                 AND o.kind IN ('kernel', 'graph') AND o.start >= p.start AND o.start < p."end"), 0) AS kernel_ns,
       p.steps, p.step_ns_median, p.step_ns_p90, p.steady
FROM phases p ORDER BY p.device_id, p.phase;
