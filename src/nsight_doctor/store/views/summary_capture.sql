-- summary_capture: the capture as a whole (one row; the summary's first lines).
--
-- capture_ns: capture length, ns.
-- gpu_start_ns: start of the first GPU operation on any GPU, ns.
-- gpu_end_ns: end of the last GPU operation on any GPU, ns.
-- gpu_window_ns: gpu_end_ns - gpu_start_ns, the GPU activity window, ns.
-- has_cuda_trace: whether any CUDA API call or GPU operation was recorded.
-- gpu_busy_pct: the mean busy_pct (summary_gpus) of the GPUs that ran work.
-- profiler_overhead_ns: time nsys spent on the profiled threads (profiler_overhead), ns.
CREATE VIEW summary_capture AS
SELECT duration AS capture_ns, gpu_start AS gpu_start_ns, gpu_end AS gpu_end_ns,
       gpu_window AS gpu_window_ns, has_cuda_trace,
       (SELECT avg(busy_pct) FROM summary_gpus WHERE busy_ns > 0) AS gpu_busy_pct,
       (SELECT coalesce(sum(duration), 0) FROM profiler_overhead) AS profiler_overhead_ns
FROM capture;
