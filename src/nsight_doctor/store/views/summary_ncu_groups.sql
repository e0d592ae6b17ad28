-- summary_ncu_groups: the profiled launch configurations (ncu_groups), most GPU time first.
--
-- launch: name<<<(grid),(block)>>> (NULL when the report has no launch configuration for it).
-- name: the kernel's short name.
-- family: kernel family.
-- profiled: profiled instances.
-- bottleneck: memory-bound, compute-bound or latency-bound.
-- share_pct: its share of GPU time (see ncu_groups).
-- time_basis: nsys (timeline time) or ncu (profiled time).
-- weight_ns: the time its findings are scaled by, ns.
-- duration_ns: mean profiled duration, ns.
-- sm_pct: SM throughput, % of peak.
-- mem_pct: memory throughput, % of peak.
-- dram_pct: DRAM throughput, % of peak.
-- achieved_occupancy_pct: achieved occupancy, %.
-- waves_per_sm: waves of blocks per SM.
-- tensor_pct: tensor pipe utilisation, %.
-- top_stall: the most common top stall reason.
-- arithmetic_intensity: operations per DRAM byte (ncu_groups).
-- roof: the roof that bounds it, e.g. "DRAM" or "tensor BF16" (ncu_kernels.roof; NULL without the roofline's counters).
-- regime: memory or compute: its side of the roofline (ncu_kernels.regime).
-- roof_pct: how close it comes to that roof, % (ncu_kernels.roof_pct).
-- owner: who owns its code (ncu_groups.owner), NULL for the user's own.
CREATE VIEW summary_ncu_groups AS
SELECT launch, name, family, profiled, bottleneck, share_pct, time_basis, weight_ns,
       duration_ns, sm_pct, mem_pct, dram_pct, achieved_occupancy_pct, waves_per_sm,
       tensor_pct, top_stall, arithmetic_intensity, roof, regime, roof_pct, owner
FROM ncu_groups ORDER BY weight_ns DESC, launch;
