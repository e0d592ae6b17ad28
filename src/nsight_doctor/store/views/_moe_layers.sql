-- moe_layers (its file documents the columns), made once when the store is built: the
-- steady state's kernels are grouped by GPU and name (0.08 s at 2 M kernels), and
-- the steady gaps (host_routed) and two rules read it.
CREATE TABLE moe_layers_t AS
WITH s AS (
    SELECT device_id, start, "end", steps FROM steady_state WHERE steps IS NOT NULL
), k AS (
    -- The steady state's kernels, once per GPU and name: the rest reads these few rows.
    SELECT k.device_id, k.name, k.category, count(*) AS launches, sum(k.duration) AS ns
    FROM kernels k JOIN s USING (device_id)
    WHERE k.start >= s.start AND k."end" <= s."end"
    GROUP BY ALL
), kt AS (
    SELECT device_id, sum(ns) AS kernel_ns FROM k GROUP BY device_id
), names AS (
    -- The patterns, once per distinct kernel name rather than once per kernel.
    SELECT name, category,
           regexp_matches(name, 'fused_moe_kernel|marlin|moe_?w?(gemm|mm)|moe_?fc|grouped_?(gemm|mm)|expert_?gemm', 'i') AS expert_gemm,
           regexp_matches(name, 'topk|bitonicsort|radixsortkv|histogram|DeviceSelect|DeviceCompact|write_indices|nonzero', 'i') AS plumbing,
           regexp_matches(name, 'topk|gating|_gate', 'i') AS gate
    FROM (SELECT DISTINCT name, category FROM k)
), fused AS (
    SELECT k.device_id, bool_or(n.expert_gemm) AS fused
    FROM k JOIN names n USING (name, category)
    GROUP BY k.device_id
), by_name AS (
    SELECT k.device_id, k.name, sum(k.launches)::BIGINT AS launches, sum(k.ns) AS ns, bool_or(n.gate) AS gate
    FROM k JOIN names n USING (name, category) JOIN s USING (device_id)
    WHERE NOT n.expert_gemm AND (n.category = 'moe' OR n.plumbing)
    GROUP BY k.device_id, k.name, s.steps
    HAVING sum(k.launches) >= 2 * s.steps
), r AS (
    SELECT device_id, sum(launches) AS routing_kernels, sum(ns) AS routing_ns,
           max(launches) FILTER (WHERE gate) AS gate_launches, arg_max(name, ns) AS top_kernel
    FROM by_name GROUP BY device_id
), b AS (
    SELECT device_id, count(*) AS blocking_calls FROM steady_blocking_calls GROUP BY device_id
)
SELECT r.device_id, s.steps, round(r.gate_launches / s.steps)::BIGINT AS layers_per_step,
       r.routing_kernels, r.routing_ns, kt.kernel_ns, 100.0 * r.routing_ns / kt.kernel_ns AS routing_pct,
       r.top_kernel, f.fused, coalesce(b.blocking_calls, 0) AS blocking_calls,
       coalesce(b.blocking_calls, 0) / s.steps / round(r.gate_launches / s.steps) AS syncs_per_layer,
       coalesce(b.blocking_calls, 0) / s.steps / round(r.gate_launches / s.steps) >= 1 AS host_routed
FROM r JOIN s USING (device_id) JOIN kt USING (device_id) JOIN fused f USING (device_id) LEFT JOIN b USING (device_id)
-- Two gating launches per step at least: one would be sampling's top-k.
WHERE r.gate_launches >= 2 * s.steps;
