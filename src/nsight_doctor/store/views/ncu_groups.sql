-- ncu_groups: the profiled kernels grouped by name and launch configuration, averaged over the
-- profiled instances, and matched to the Nsight Systems timeline when one is in the store, so
-- that kernel findings rank by the kernel's real share of GPU time. A group matches the
-- timeline when the timeline ran a kernel of the same name and launch configuration on the
-- same GPU model; a group that does not match is not weighted by timeline time it does not
-- have (its weight_ns and share_pct are NULL, and kernel findings leave it out). A table, made
-- once when the store is built (every kernel rule and the summary read it).
--
-- launch: name<<<(grid),(block)>>>.
-- name: short kernel name.
-- family: kernel family (see ncu_kernels).
-- owner: who owns its code (kernel_owner): cuBLAS, cuDNN, FlashAttention, FlashInfer, CUTLASS,
--   NCCL, Triton (torch.compile) or PyTorch; NULL for the user's own kernel.
-- first_action_id: the first profiled instance (ncu_kernels.action_id).
-- profiled: profiled instances.
-- device_name: the GPU.
-- sm_count: its SMs.
-- grid_size: blocks in the grid.
-- block_size: threads per block.
-- registers_per_thread: registers per thread.
-- duration_ns: mean duration under the profiler, ns.
-- sm_pct: mean SM throughput, %.
-- mem_pct: mean memory throughput, %.
-- dram_pct: mean DRAM throughput, %.
-- achieved_occupancy_pct: mean achieved occupancy, %.
-- theoretical_occupancy_pct: mean theoretical occupancy, %.
-- occupancy_limiter: the most common occupancy limiter.
-- waves_per_sm: mean waves per SM.
-- issue_active: mean instructions issued per cycle per scheduler.
-- eligible_warps: mean eligible warps per cycle per scheduler.
-- tensor_pct: mean tensor pipe utilisation, %.
-- arithmetic_intensity: mean operations per DRAM byte, tensor and non-tensor (ncu_kernels).
-- compute_roof: the most common compute roof ("FP32", "tensor BF16"; see ncu_kernels).
-- ridge_flop_per_byte: mean ridge point of that roof against DRAM, operations per byte.
-- spill_requests: register-spill requests, summed over the profiled instances.
-- local_sectors: local-memory sectors, summed.
-- global_ld_bytes_per_sector: mean bytes used per sector of global loads.
-- global_st_bytes_per_sector: mean bytes used per sector of global stores.
-- smem_bank_conflicts: shared-memory bank conflicts, summed.
-- smem_wavefronts: shared-memory wavefronts, summed.
-- top_stall: the most common top stall reason.
-- top_stall_ratio: its mean warps per issued instruction.
-- bottleneck: the most common bottleneck class (see ncu_kernels).
-- roof: the most common binding roof ("DRAM", "tensor BF16"; see ncu_kernels).
-- roof_basis: roofline or speed of light, the most common (see ncu_kernels).
-- regime: the most common roofline regime, memory or compute (see ncu_kernels).
-- roof_pct: mean share of its roof reached, % (see ncu_kernels).
-- has_source_counters: whether the SourceCounters section (ncu's source-level checks) was collected.
-- nsys_match: with a timeline: config (the same name and launch configuration ran on the same
--   GPU model), name (the name ran, in other launch configurations only: another batch size or
--   shape), gpu (the report comes from another GPU model than the timeline's), or none;
--   NULL without a timeline.
-- nsys_count: instances of the same name and launch configuration in the timeline.
-- nsys_total_ns: their total time, ns.
-- time_basis: nsys when the weight is the timeline's time, ncu (profiled durations) without a
--   timeline, NULL for a group that does not match the timeline.
-- weight_ns: the kernel's time that findings scale their speedups by: nsys_total_ns, duration_ns
--   x profiled without a timeline, else NULL.
-- share_pct: weight_ns as % of all kernel and CUDA graph time in the timeline (or of all profiled time without one).
CREATE TABLE ncu_groups AS
WITH g AS (
    SELECT launch, any_value(name) AS name, any_value(family) AS family,
           min(action_id) AS first_action_id, count(*) AS profiled,
           any_value(device_name) AS device_name, any_value(sm_count) AS sm_count,
           any_value(grid_x) AS grid_x, any_value(grid_y) AS grid_y, any_value(grid_z) AS grid_z,
           any_value(block_x) AS block_x, any_value(block_y) AS block_y, any_value(block_z) AS block_z,
           any_value(grid_size) AS grid_size, any_value(block_size) AS block_size,
           any_value(registers_per_thread) AS registers_per_thread,
           avg(duration_ns) AS duration_ns, avg(sm_pct) AS sm_pct, avg(mem_pct) AS mem_pct,
           avg(dram_pct) AS dram_pct, avg(achieved_occupancy_pct) AS achieved_occupancy_pct,
           avg(theoretical_occupancy_pct) AS theoretical_occupancy_pct,
           mode(occupancy_limiter ORDER BY occupancy_limiter) AS occupancy_limiter, avg(waves_per_sm) AS waves_per_sm,
           avg(issue_active) AS issue_active, avg(eligible_warps) AS eligible_warps,
           avg(tensor_pct) AS tensor_pct, avg(arithmetic_intensity) AS arithmetic_intensity,
           mode(compute_roof ORDER BY compute_roof) AS compute_roof, avg(ridge_flop_per_byte) AS ridge_flop_per_byte,
           mode(roof ORDER BY roof) AS roof, mode(roof_basis ORDER BY roof_basis) AS roof_basis,
           sum(spill_requests) AS spill_requests, sum(local_sectors) AS local_sectors,
           avg(global_ld_bytes_per_sector) AS global_ld_bytes_per_sector,
           avg(global_st_bytes_per_sector) AS global_st_bytes_per_sector,
           sum(smem_bank_conflicts) AS smem_bank_conflicts, sum(smem_wavefronts) AS smem_wavefronts,
           mode(top_stall ORDER BY top_stall) AS top_stall, avg(top_stall_ratio) AS top_stall_ratio,
           mode(bottleneck ORDER BY bottleneck) AS bottleneck, mode(regime ORDER BY regime) AS regime, avg(roof_pct) AS roof_pct,
           bool_or(coalesce(contains(sections, 'SourceCounters'), false)) AS has_source_counters
    FROM ncu_kernels GROUP BY launch
), by_config AS (
    SELECT name, grid_x, grid_y, grid_z, block_x, block_y, block_z,
           count(*) AS n, sum(duration) AS total
    FROM kernels WHERE name IN (SELECT name FROM g) GROUP BY ALL
), by_name AS (
    -- (only the profiled names: a timeline without reports groups nothing)
    SELECT name, count(*) AS n, sum(duration) AS total FROM kernels WHERE name IN (SELECT name FROM g) GROUP BY name
), timeline AS (
    SELECT (SELECT count(*) > 0 FROM kernels) AS has_kernels,
           (SELECT list(DISTINCT name) FILTER (WHERE name IS NOT NULL) FROM gpus) AS gpu_names
), m AS (
    SELECT g.*, c.n AS c_n, c.total AS c_total, nm.n AS n_n, t.has_kernels,
           -- A GPU model check where both sides name their GPU.
           coalesce(len(t.gpu_names) = 0 OR g.device_name IS NULL OR list_contains(t.gpu_names, g.device_name), true) AS same_gpu
    FROM g CROSS JOIN timeline t
    LEFT JOIN by_config c ON c.name = g.name AND c.grid_x = g.grid_x AND c.grid_y = g.grid_y
         AND c.grid_z = g.grid_z AND c.block_x = g.block_x AND c.block_y = g.block_y AND c.block_z = g.block_z
    LEFT JOIN by_name nm ON nm.name = g.name
), w AS (
    SELECT m.*,
           CASE WHEN NOT has_kernels THEN NULL
                WHEN NOT same_gpu THEN 'gpu'
                WHEN c_n IS NOT NULL THEN 'config'
                WHEN n_n IS NOT NULL THEN 'name'
                ELSE 'none' END AS nsys_match,
           CASE WHEN same_gpu THEN c_n END AS nsys_count,
           CASE WHEN same_gpu THEN c_total END AS nsys_total_ns
    FROM m
), totals AS (
    SELECT (SELECT sum(duration) FROM gpu_ops WHERE kind IN ('kernel', 'graph')) AS nsys_total,
           (SELECT sum(duration_ns) FROM ncu_kernels) AS ncu_total
)
SELECT launch, name, family, kernel_owner(name) AS owner, first_action_id, profiled, device_name, sm_count, grid_size,
       block_size, registers_per_thread, duration_ns, sm_pct, mem_pct, dram_pct,
       achieved_occupancy_pct, theoretical_occupancy_pct, occupancy_limiter, waves_per_sm,
       issue_active, eligible_warps, tensor_pct, arithmetic_intensity, compute_roof, ridge_flop_per_byte,
       spill_requests, local_sectors, global_ld_bytes_per_sector, global_st_bytes_per_sector,
       smem_bank_conflicts, smem_wavefronts, top_stall, top_stall_ratio, bottleneck, roof, roof_basis, regime, roof_pct,
       has_source_counters, nsys_match, nsys_count, nsys_total_ns,
       CASE WHEN nsys_total_ns IS NOT NULL THEN 'nsys' WHEN NOT has_kernels THEN 'ncu' END AS time_basis,
       CASE WHEN nsys_total_ns IS NOT NULL THEN nsys_total_ns WHEN NOT has_kernels THEN duration_ns * profiled END AS weight_ns,
       100.0 * CASE WHEN nsys_total_ns IS NOT NULL THEN nsys_total_ns / totals.nsys_total
                    WHEN NOT has_kernels THEN duration_ns * profiled / totals.ncu_total END AS share_pct
FROM w, totals;
