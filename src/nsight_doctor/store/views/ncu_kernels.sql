-- ncu_kernels: one row per kernel profiled by Nsight Compute, with the metrics that explain
-- its performance. A column is NULL when the report's section set, ncu version or GPU did not
-- collect it (e.g. stall reasons need --set full; cache hit rates --set detailed). A table, made
-- once when the store is built: every kernel rule reads it through ncu_groups.
--
-- action_id: id of the profiled kernel in this store.
-- report_id: which Nsight Compute report it came from (0 for the first).
-- name: short kernel name (matches kernels.name of Nsight Systems).
-- launch: name and launch configuration, name<<<(grid),(block)>>>: the key of ncu_groups.
-- demangled_name: full demangled name.
-- family: the kernel's category from its name (as kernels.category: gemm, attention, norm, ...).
-- nvtx: the NVTX ranges open when it ran (with --nvtx), e.g. "decode_step".
-- sections: the report sections collected for it, comma-separated (e.g. LaunchStats,Occupancy,SpeedOfLight).
-- device_name: the GPU, e.g. "NVIDIA H200".
-- sm_count: streaming multiprocessors of that GPU.
-- compute_capability: e.g. "9.0".
-- grid_x: grid dimension x.
-- grid_y: grid dimension y.
-- grid_z: grid dimension z.
-- block_x: block dimension x.
-- block_y: block dimension y.
-- block_z: block dimension z.
-- grid_size: blocks in the grid.
-- block_size: threads per block.
-- registers_per_thread: registers per thread.
-- static_smem_bytes: static shared memory per block.
-- dynamic_smem_bytes: dynamic shared memory per block.
-- duration_ns: gpu__time_duration.sum under the profiler, ns.
-- sm_pct: SM throughput, % of peak (sm__throughput).
-- mem_pct: memory throughput, % of peak, the busiest of DRAM, L2 and L1 (gpu__compute_memory_throughput).
-- dram_pct: DRAM throughput, % of peak (gpu__dram_throughput, or dram__throughput).
-- l1_hit_pct: L1/TEX sector hit rate, %.
-- l2_hit_pct: L2 sector hit rate, %.
-- achieved_occupancy_pct: achieved occupancy, % of the maximum warps per SM.
-- theoretical_occupancy_pct: theoretical occupancy, %.
-- occ_limit_registers: blocks per SM allowed by registers.
-- occ_limit_shared_mem: blocks per SM allowed by shared memory.
-- occ_limit_warps: blocks per SM allowed by the warp limit.
-- occ_limit_blocks: blocks per SM allowed by the block limit.
-- occupancy_limiter: which of registers, shared_mem, warps, blocks allows the fewest blocks per SM.
-- waves_per_sm: waves of blocks per SM (under 1: the grid cannot fill the GPU).
-- issue_active: instructions issued per cycle per scheduler (0-1).
-- eligible_warps: warps eligible to issue per cycle per scheduler.
-- tensor_pct: tensor-core pipe utilisation, % of peak: the busiest of the Hopper (gmma) and the older (hmma) tensor pipe metrics.
-- tensor_gmma_pct: Hopper warpgroup MMA instructions, % of peak (sm__inst_executed_pipe_tensor_op_gmma).
-- tensor_hmma_pct: HMMA tensor pipe, % of peak (sm__pipe_tensor_op_hmma_cycles_active or sm__inst_executed_pipe_tensor_op_hmma).
-- flops: non-tensor floating-point operations (FP16, FP32, FP64 add, mul and fma x2), as ncu's roofline counts them.
-- ops: all operations against the compute roofs: non-tensor FLOPs and tensor-core operations (ncu_roofline).
-- dram_bytes: bytes read from and written to DRAM.
-- arithmetic_intensity: ops / dram_bytes, operations per DRAM byte.
-- compute_roof: the compute roof its operations are bound by (ncu_roofline.label: "FP32", "tensor BF16").
-- peak_ops_per_s: that roof's peak at the kernel's clock.
-- peak_fp32_flops_per_s: FP32 peak at the measured SM clock (ncu's roofline peak).
-- peak_dram_bytes_per_s: DRAM peak at the measured memory clock.
-- ridge_flop_per_byte: peak_ops_per_s / peak_dram_bytes_per_s: below it a kernel is memory-bound on
--   its compute roof's roofline.
-- spill_requests: local-memory requests caused by register spilling (derived__local_spilling_requests; 2025.x).
-- local_sectors: local-memory sectors loaded and stored (spills and stack), where reported.
-- global_ld_bytes_per_sector: bytes used per 32-byte sector of global loads (32 is perfectly coalesced).
-- global_st_bytes_per_sector: the same for global stores.
-- smem_bank_conflicts: shared-memory bank conflicts (loads and stores).
-- smem_wavefronts: shared-memory wavefronts (loads and stores); conflicts add wavefronts.
-- top_stall: the stall reason with the most warps per issued instruction ('selected' is not a stall).
-- top_stall_ratio: its warps per issued instruction.
-- long_scoreboard_ratio: warps stalled on L1TEX (global, local, texture) results per issued instruction.
-- roof: the roof whose time at peak is the largest (ncu_roofline.label): the one that bounds the kernel.
-- roof_basis: roofline (from its bytes and operations against each roof) or speed of light
--   (ncu's throughput percentages, where the report lacks the roofline's counters, the GPU's
--   architecture is unknown, or tensor cores ran without the tensor operation counters).
-- regime: memory or compute: the kind of its binding roof (roofline), or which of its memory
--   throughput (DRAM or memory system) and compute throughput (SM or tensor pipes) is the larger
--   share of its peak (speed of light); NULL without those metrics.
-- roof_pct: how close the kernel comes to its roof, %: its binding roof's time at peak as a share
--   of its duration (roofline), or the larger throughput percentage (speed of light). A kernel at
--   80% or more is at its roof: occupancy and issue efficiency can no longer speed it up.
-- bottleneck: memory-bound or compute-bound when its binding roof (roofline) is at 60% of its
--   peak or more, else when its busiest unit (speed of light: DRAM or memory throughput, L1 and
--   shared memory included, above SM; or SM throughput, pipes other than FLOPs included) is;
--   memory-bound when long-scoreboard stalls dominate with memory at 40% or more; else
--   latency-bound (no unit near its peak: too little parallel work or long dependency chains).
CREATE TABLE ncu_kernels AS
WITH m AS (
    SELECT *,
           greatest(tensor_cycles_pct, tensor_cycles_elapsed_pct, tensor_gmma_pct, tensor_hmma_pct) AS tensor_pct
    FROM base_ncu_kernel_metrics
), s AS (
    SELECT action_id,
           arg_max(reason, ratio) FILTER (WHERE reason <> 'selected' AND ratio > 0) AS top_stall,
           max(ratio) FILTER (WHERE reason <> 'selected' AND ratio > 0) AS top_stall_ratio,
           max(ratio) FILTER (WHERE reason = 'long_scoreboard') AS long_scoreboard_ratio
    FROM base_ncu_stalls GROUP BY action_id
), r AS (
    SELECT action_id,
           arg_max(label, time_at_peak_ns) AS roof_label, arg_max(kind, time_at_peak_ns) AS roof_kind,
           max(pct_of_peak) AS roofline_pct,
           sum(amount) FILTER (WHERE kind = 'compute') AS ops,
           arg_max(label, time_at_peak_ns) FILTER (WHERE kind = 'compute') AS compute_roof,
           arg_max(peak_per_s, time_at_peak_ns) FILTER (WHERE kind = 'compute') AS peak_ops_per_s,
           bool_or(roof LIKE 'tensor%') AS has_tensor_ops,
           count(*) FILTER (WHERE peak_per_s IS NULL) = 0 AS complete
    FROM ncu_roofline GROUP BY action_id
), k AS (
    SELECT a.*, m.* EXCLUDE (action_id), s.top_stall, s.top_stall_ratio, s.long_scoreboard_ratio,
           r.* EXCLUDE (action_id, ops),
           CASE WHEN m.add_mul_per_cycle IS NOT NULL THEN coalesce(r.ops, 0) END AS ops,
           -- The roofline holds where the report counted operations, every roof the kernel used
           -- has a peak, and its tensor work was counted (old reports show the tensor pipe busy
           -- but have no tensor operation counters).
           coalesce(m.add_mul_per_cycle IS NOT NULL AND r.complete AND (r.has_tensor_ops OR coalesce(m.tensor_pct, 0) < 5), false) AS on_roofline,
           n.flops, n.dram_bytes, n.peak_fp32_flops_per_s, n.peak_dram_bytes_per_s,
           m.sm_pct IS NOT NULL OR m.mem_pct IS NOT NULL OR m.dram_pct IS NOT NULL AS sol
    FROM base_ncu_actions a LEFT JOIN m USING (action_id) LEFT JOIN s USING (action_id) LEFT JOIN r USING (action_id)
    LEFT JOIN ncu_measures n USING (action_id)
)
SELECT action_id, report_id, name,
       name || '<<<(' || grid_x || ',' || grid_y || ',' || grid_z || '),(' || block_x || ',' || block_y || ',' || block_z || ')>>>' AS launch,
       demangled_name, kernel_category(name, demangled_name) AS family, nvtx, sections,
       device_name, sm_count,
       CASE WHEN cc_major IS NOT NULL THEN cc_major || '.' || cc_minor END AS compute_capability,
       grid_x, grid_y, grid_z, block_x, block_y, block_z, grid_size, block_size,
       registers_per_thread, static_smem_bytes, dynamic_smem_bytes, duration_ns,
       sm_pct, mem_pct, dram_pct, l1_hit_pct, l2_hit_pct,
       achieved_occupancy_pct, theoretical_occupancy_pct,
       occ_limit_registers, occ_limit_shared_mem, occ_limit_warps, occ_limit_blocks,
       CASE least(occ_limit_registers, occ_limit_shared_mem, occ_limit_warps, occ_limit_blocks)
           WHEN occ_limit_registers THEN 'registers' WHEN occ_limit_shared_mem THEN 'shared_mem'
           WHEN occ_limit_warps THEN 'warps' WHEN occ_limit_blocks THEN 'blocks' END AS occupancy_limiter,
       waves_per_sm, issue_active, eligible_warps,
       tensor_pct, tensor_gmma_pct, tensor_hmma_pct,
       flops, ops, dram_bytes,
       CASE WHEN dram_bytes > 0 THEN ops / dram_bytes END AS arithmetic_intensity,
       compute_roof, peak_ops_per_s, peak_fp32_flops_per_s, peak_dram_bytes_per_s,
       peak_ops_per_s / nullif(peak_dram_bytes_per_s, 0) AS ridge_flop_per_byte,
       spill_requests, local_sectors, global_ld_bytes_per_sector, global_st_bytes_per_sector,
       smem_bank_conflicts, smem_wavefronts, top_stall, top_stall_ratio, long_scoreboard_ratio,
       CASE WHEN on_roofline THEN roof_label END AS roof,
       CASE WHEN on_roofline THEN 'roofline'
            WHEN sol THEN 'speed of light' END AS roof_basis,
       CASE WHEN on_roofline THEN roof_kind
            WHEN NOT sol THEN NULL
            WHEN greatest(coalesce(mem_pct, 0), coalesce(dram_pct, 0))
                 >= greatest(coalesce(sm_pct, 0), coalesce(tensor_pct, 0)) THEN 'memory'
            ELSE 'compute' END AS regime,
       CASE WHEN on_roofline THEN roofline_pct
            WHEN sol THEN greatest(coalesce(mem_pct, 0), coalesce(dram_pct, 0), coalesce(sm_pct, 0), coalesce(tensor_pct, 0)) END AS roof_pct,
       CASE
           WHEN on_roofline AND roofline_pct >= 60 THEN roof_kind || '-bound'
           WHEN on_roofline AND roof_kind = 'memory' AND top_stall = 'long_scoreboard' AND roofline_pct >= 40 THEN 'memory-bound'
           -- Below every roof, a unit the roofline does not count can still be the limit: SM
           -- pipes other than FLOPs (exp, integer, issue) or L1 and shared memory.
           WHEN greatest(mem_pct, dram_pct) >= 60 AND greatest(mem_pct, dram_pct) >= coalesce(sm_pct, 0) THEN 'memory-bound'
           WHEN top_stall = 'long_scoreboard' AND greatest(mem_pct, dram_pct) >= 40
                AND greatest(mem_pct, dram_pct) >= coalesce(sm_pct, 0) THEN 'memory-bound'
           WHEN sm_pct >= 60 THEN 'compute-bound'
           WHEN NOT sol THEN NULL
           ELSE 'latency-bound'
       END AS bottleneck
FROM k;
