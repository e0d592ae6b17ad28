-- ncu_roofline: each profiled kernel against each roof of its GPU that it used: the memory roofs
-- (DRAM, L2) and the compute roofs (FP32, FP64, and the tensor cores by input type). A roof's
-- time is the time the kernel's bytes or operations would take at that roof's peak; the largest
-- is the kernel's binding roof (ncu_kernels.roof), the classic roofline in time form:
-- attainable = min(peak, intensity x bandwidth) is time = max(operations / peak, bytes / bandwidth).
-- Memory peaks come from the report's own peak counters; compute peaks from gpu_peaks.yaml (per
-- architecture, per SM and cycle) times the GPU's SMs and the SM clock measured while the kernel
-- ran, or, for FP32 on a GPU that file does not know, Nsight Compute's own FMA peak. Rows need
-- the report's roofline counters (--set full, or the SpeedOfLight_RooflineChart sections).
--
-- action_id: the kernel (ncu_kernels.action_id).
-- roof: dram, l2, fp32, fp64, tensor_fp16, tensor_bf16, tensor_tf32, tensor_fp8, tensor_int8, tensor_fp64.
-- label: the roof in words ("DRAM", "tensor BF16").
-- kind: memory or compute.
-- amount: what the kernel did against it: bytes for a memory roof, operations (an FMA counts two) for a compute roof.
-- peak_per_s: the roof: bytes or operations per second at the kernel's measured clock; NULL for a
--   compute roof of a GPU whose architecture gpu_peaks.yaml does not know.
-- peak_source: ncu (the report's peak counters) or the architecture in gpu_peaks.yaml.
-- time_at_peak_ns: amount / peak_per_s, ns.
-- pct_of_peak: time_at_peak_ns as % of the kernel's duration: how close it came to that roof.
CREATE VIEW ncu_roofline AS
WITH k AS (
    SELECT a.action_id, a.duration_ns, a.sm_count, a.device_name,
           CASE WHEN a.cc_major IS NOT NULL THEN a.cc_major || '.' || a.cc_minor END AS cc,
           m.*  EXCLUDE (action_id), n.* EXCLUDE (action_id)
    FROM base_ncu_actions a JOIN base_ncu_kernel_metrics m USING (action_id) JOIN ncu_measures n USING (action_id)
), arch AS (
    -- A GPU's architecture: by compute capability, else by name.
    SELECT k.action_id, any_value(p.arch ORDER BY p.compute_capability = k.cc DESC) AS arch
    FROM k JOIN (SELECT DISTINCT arch, compute_capability, names FROM gpu_peaks_t) p
      ON p.compute_capability = k.cc OR (k.cc IS NULL AND regexp_matches(k.device_name, p.names))
    GROUP BY k.action_id
), amounts AS (
    SELECT action_id, duration_ns, sm_count, sm_hz,
           unnest([
               {'roof': 'dram', 'kind': 'memory', 'amount': dram_bytes, 'ncu_peak': peak_dram_bytes_per_s},
               {'roof': 'l2', 'kind': 'memory', 'amount': l2_bytes, 'ncu_peak': peak_l2_bytes_per_s},
               {'roof': 'fp32', 'kind': 'compute', 'amount': flops - fp64_flops, 'ncu_peak': peak_fp32_flops_per_s},
               {'roof': 'fp64', 'kind': 'compute', 'amount': fp64_flops, 'ncu_peak': NULL},
               {'roof': 'tensor_fp16', 'kind': 'compute', 'amount': tensor_fp16_ops, 'ncu_peak': NULL},
               {'roof': 'tensor_bf16', 'kind': 'compute', 'amount': tensor_bf16_ops, 'ncu_peak': NULL},
               {'roof': 'tensor_tf32', 'kind': 'compute', 'amount': tensor_tf32_ops, 'ncu_peak': NULL},
               {'roof': 'tensor_fp8', 'kind': 'compute', 'amount': tensor_fp8_ops, 'ncu_peak': NULL},
               {'roof': 'tensor_int8', 'kind': 'compute', 'amount': tensor_int8_ops, 'ncu_peak': NULL},
               {'roof': 'tensor_fp64', 'kind': 'compute', 'amount': tensor_fp64_ops, 'ncu_peak': NULL}
           ]) AS r
    FROM k
), peaks AS (
    SELECT a.action_id, a.duration_ns, a.r.roof AS roof, a.r.kind AS kind, a.r.amount AS amount,
           CASE WHEN a.r.kind = 'memory' THEN a.r.ncu_peak
                ELSE coalesce(p.per_sm_per_cycle * a.sm_count * a.sm_hz, a.r.ncu_peak) END AS peak_per_s,
           CASE WHEN a.r.kind = 'memory' OR p.per_sm_per_cycle IS NULL THEN 'ncu'
                ELSE 'gpu_peaks.yaml (' || p.arch || ')' END AS peak_source
    FROM amounts a
    LEFT JOIN arch USING (action_id)
    LEFT JOIN gpu_peaks_t p ON p.arch = arch.arch AND p.roof = a.r.roof
)
SELECT action_id, roof,
       CASE roof WHEN 'dram' THEN 'DRAM' WHEN 'l2' THEN 'L2' WHEN 'fp32' THEN 'FP32' WHEN 'fp64' THEN 'FP64'
                 ELSE 'tensor ' || upper(replace(roof, 'tensor_', '')) END AS label,
       kind, amount, peak_per_s, peak_source,
       1e9 * amount / peak_per_s AS time_at_peak_ns,
       100.0 * 1e9 * amount / peak_per_s / duration_ns AS pct_of_peak
FROM peaks
WHERE amount > 0 AND duration_ns > 0;
