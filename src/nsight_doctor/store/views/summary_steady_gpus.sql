-- summary_steady_gpus: each GPU's steady state (steady_state), with the work that ran in it:
-- what comparing two profiles step by step needs (nsight-doctor compare). Operations and calls
-- count when they start in one of the GPU's steady phases.
--
-- device_id: CUDA device id.
-- window_ns: the steady phases' total duration, ns.
-- busy_ns: GPU busy time in them, ns.
-- idle_ns: window_ns - busy_ns, ns.
-- busy_pct: busy_ns as % of window_ns.
-- kind: the steady phase kind with the most time: prefill, decode, mixed or steady.
-- steps: steps in the steady phases (NULL when no steps were found).
-- step_ns_median: median step time, ns.
-- step_ns_p90: 90th percentile of the step time, ns.
-- kernels: kernels that ran in it.
-- kernel_ns: their total time, ns.
-- graphs: CUDA graph executions traced as a whole (--cuda-graph-trace=graph) in it.
-- graph_ns: their total time, ns.
-- memcpy_count: memory copies in it.
-- memcpy_bytes: bytes they copied.
-- memcpy_ns: their total time, ns.
-- memset_ns: total time of the memsets in it, ns.
-- comm_wait_ns: time its collective kernels waited for a slower GPU (comm_kernels.wait_ns), ns.
-- comm_exposed_wait_ns: the part of comm_wait_ns during which no other kernel ran on the GPU
--   (comm_kernels.exposed_wait_ns): the steady time the waiting cost, ns.
-- blocking_calls: blocking calls made in it (steady_blocking_calls).
-- blocking_ns: the CPU's time in them, ns.
CREATE VIEW summary_steady_gpus AS
WITH ph AS (
    SELECT device_id, start, "end" FROM phases WHERE steady
), ops AS (
    SELECT o.device_id,
           count(*) FILTER (WHERE o.kind = 'kernel') AS kernels,
           coalesce(sum(o.duration) FILTER (WHERE o.kind = 'kernel'), 0) AS kernel_ns,
           count(*) FILTER (WHERE o.kind = 'graph') AS graphs,
           coalesce(sum(o.duration) FILTER (WHERE o.kind = 'graph'), 0) AS graph_ns,
           coalesce(sum(o.duration) FILTER (WHERE o.kind = 'memset'), 0) AS memset_ns
    FROM gpu_ops o JOIN ph ON ph.device_id = o.device_id AND o.start >= ph.start AND o.start < ph."end"
    GROUP BY o.device_id
), cp AS (
    SELECT m.device_id, count(*) AS memcpy_count, sum(m.bytes) AS memcpy_bytes, sum(m.duration) AS memcpy_ns
    FROM memcpy m JOIN ph ON ph.device_id = m.device_id AND m.start >= ph.start AND m.start < ph."end"
    GROUP BY m.device_id
), cw AS (
    SELECT c.device_id, sum(c.wait_ns) AS comm_wait_ns, sum(c.exposed_wait_ns) AS comm_exposed_wait_ns
    FROM comm_kernels c JOIN ph ON ph.device_id = c.device_id AND c.start >= ph.start AND c.start < ph."end"
    GROUP BY c.device_id
), bl AS (
    SELECT device_id, count(*) AS blocking_calls, sum(duration) AS blocking_ns
    FROM steady_blocking_calls GROUP BY device_id
)
SELECT s.device_id, s.window_ns, s.busy_ns, s.idle_ns, s.busy_pct, s.kind, s.steps, s.step_ns_median,
       s.step_ns_p90, coalesce(o.kernels, 0) AS kernels, coalesce(o.kernel_ns, 0) AS kernel_ns,
       coalesce(o.graphs, 0) AS graphs, coalesce(o.graph_ns, 0) AS graph_ns,
       coalesce(cp.memcpy_count, 0) AS memcpy_count, coalesce(cp.memcpy_bytes, 0) AS memcpy_bytes,
       coalesce(cp.memcpy_ns, 0) AS memcpy_ns, coalesce(o.memset_ns, 0) AS memset_ns,
       coalesce(cw.comm_wait_ns, 0) AS comm_wait_ns, coalesce(cw.comm_exposed_wait_ns, 0) AS comm_exposed_wait_ns,
       coalesce(bl.blocking_calls, 0) AS blocking_calls, coalesce(bl.blocking_ns, 0) AS blocking_ns
FROM steady_state s
LEFT JOIN ops o USING (device_id)
LEFT JOIN cp USING (device_id)
LEFT JOIN cw USING (device_id)
LEFT JOIN bl USING (device_id)
ORDER BY s.device_id;
