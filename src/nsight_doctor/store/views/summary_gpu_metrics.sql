-- summary_gpu_metrics: the sampled GPU metrics that the summary shows, per GPU (one metric per
-- key; empty when no metrics were sampled).
--
-- device_id: the GPU.
-- key: sm_active, sm_issue, tensor_active, dram_read or dram_write.
-- metric: the metric's name in the export.
-- avg: its average over all samples.
-- avg_busy: its average while the GPU was busy (see gpu_metric_averages), NULL when the samples saw work the trace did not.
-- samples: samples of the metric.
CREATE VIEW summary_gpu_metrics AS
SELECT device_id, key, arg_min(metric, metric) AS metric, arg_min(avg, metric) AS avg,
       arg_min(avg_busy, metric) AS avg_busy, arg_min(samples, metric) AS samples
FROM gpu_metric_averages WHERE key IS NOT NULL
GROUP BY device_id, key
ORDER BY device_id, list_position(['sm_active', 'sm_issue', 'tensor_active', 'dram_read', 'dram_write'], key);
