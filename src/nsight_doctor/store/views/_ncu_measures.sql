-- Per profiled kernel, the quantities that ncu_roofline and ncu_kernels both use, defined once:
-- FLOPs from the per-cycle instruction counters (an FMA counts two), DRAM bytes (read plus
-- written, else the byte rate times the duration) and the peaks Nsight Compute reports at the
-- measured clocks. See ncu_kernels for each column's meaning.
CREATE VIEW ncu_measures AS
SELECT a.action_id,
       -- thread instructions per cycle x SMSP cycles per second x duration = instructions
       a.duration_ns * 1e-9 * m.smsp_hz * (m.add_mul_per_cycle + 2 * coalesce(m.fma_per_cycle, 0)) AS flops,
       a.duration_ns * 1e-9 * m.smsp_hz
           * (coalesce(m.fp64_add_mul_per_cycle, 0) + 2 * coalesce(m.fp64_fma_per_cycle, 0)) AS fp64_flops,
       CASE WHEN coalesce(m.dram_read_bytes, 0) + coalesce(m.dram_write_bytes, 0) > 0
            THEN coalesce(m.dram_read_bytes, 0) + coalesce(m.dram_write_bytes, 0)
            ELSE m.dram_bytes_per_s * a.duration_ns * 1e-9 END AS dram_bytes,
       32 * m.l2_sectors AS l2_bytes,
       m.ffma_peak_per_cycle * 2 * m.sm_hz AS peak_fp32_flops_per_s,
       m.dram_peak_bytes_per_cycle * m.dram_hz AS peak_dram_bytes_per_s,
       32 * m.l2_peak_sectors_per_cycle * m.l2_slice_cycles_per_s AS peak_l2_bytes_per_s
FROM base_ncu_actions a LEFT JOIN base_ncu_kernel_metrics m USING (action_id);
