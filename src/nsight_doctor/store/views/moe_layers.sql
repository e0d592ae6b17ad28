-- moe_layers: per GPU, the mixture-of-experts layers of its steady state and what routing
-- tokens to their experts costs. No row for a GPU without MoE layers or without steps.
-- A kernel name counts as routing when it runs at least twice per step (once per layer; a
-- vocabulary-wide top-k or sort for sampling runs once per step) and is one of: a fused routing
-- kernel (category moe, less the expert GEMMs), a top-k, the sort and histogram that group
-- tokens by expert, or the stream compaction behind torch.nonzero / torch.where. The layers are
-- counted by the gating kernel (a top-k or gating kernel) launched most often per step.
-- Expert GEMMs (fused_moe_kernel, Marlin MoE, MoE FC GEMMs, grouped GEMMs) are never routing.
--
-- device_id: CUDA device id.
-- steps: steps in the steady state.
-- layers_per_step: MoE layers per step (launches of the gating kernel per step, rounded).
-- routing_kernels: routing kernel launches in the steady state.
-- routing_ns: their GPU time, ns.
-- kernel_ns: all kernel time in the steady state, ns.
-- routing_pct: routing_ns as % of kernel_ns.
-- top_kernel: the routing kernel with the most time.
-- fused: whether the steady state runs its experts in fused or grouped MoE GEMM kernels.
-- blocking_calls: blocking calls in the steady state (steady_blocking_calls).
-- syncs_per_layer: blocking_calls per step per MoE layer.
-- host_routed: at least one blocking call per MoE layer: the experts are picked on the host (a
--   per-expert loop reading nonzero/where sizes back). moe-routing then claims the steady state's
--   gaps after synchronize calls and pageable copies (steady_gaps.claimed_by), which host-sync
--   leaves to it.
CREATE VIEW moe_layers AS
WITH s AS (
    SELECT device_id, start, "end", steps FROM steady_state WHERE steps IS NOT NULL
), k AS (
    SELECT k.device_id, k.name, k.category, k.duration, s.steps
    FROM kernels k JOIN s USING (device_id)
    WHERE k.start >= s.start AND k."end" <= s."end"
), kt AS (
    SELECT device_id, sum(duration) AS kernel_ns FROM k GROUP BY device_id
), names AS (
    -- The patterns, once per distinct kernel name rather than once per kernel.
    SELECT name, category,
           regexp_matches(name, 'fused_moe_kernel|marlin|moe_?w?(gemm|mm)|moe_?fc|grouped_?(gemm|mm)|expert_?gemm', 'i') AS expert_gemm,
           regexp_matches(name, 'topk|bitonicsort|radixsortkv|histogram|DeviceSelect|DeviceCompact|write_indices|nonzero', 'i') AS plumbing,
           regexp_matches(name, 'topk|gating|_gate', 'i') AS gate
    FROM (SELECT DISTINCT name, category FROM k)
), fused AS (
    SELECT k.device_id, bool_or(n.expert_gemm) AS fused
    FROM (SELECT DISTINCT device_id, name, category FROM k) k JOIN names n USING (name, category)
    GROUP BY k.device_id
), by_name AS (
    SELECT k.device_id, k.name, count(*) AS launches, sum(k.duration) AS ns, bool_or(n.gate) AS gate
    FROM k JOIN names n USING (name, category)
    WHERE NOT n.expert_gemm AND (n.category = 'moe' OR n.plumbing)
    GROUP BY k.device_id, k.name, k.steps
    HAVING count(*) >= 2 * k.steps
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
