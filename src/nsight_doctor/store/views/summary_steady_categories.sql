-- summary_steady_categories: each GPU's kernel time in its steady state by kernel category
-- (kernels.category), most time first. Summed over the GPUs, these are
-- summary_kernel_categories where that counts the steady state.
--
-- device_id: CUDA device id.
-- category: gemm, attention, norm, activation, ... (store/kernel_categories.yaml).
-- count: kernels.
-- total_ns: their total time, ns.
CREATE VIEW summary_steady_categories AS
SELECT k.device_id, k.category, count(*) AS count, sum(k.duration) AS total_ns
FROM kernels k JOIN phases p
  ON p.device_id = k.device_id AND k.start >= p.start AND k.start < p."end" AND p.steady
GROUP BY k.device_id, k.category ORDER BY k.device_id, total_ns DESC, k.category;
