-- gpu_metrics: GPU metrics sampled by nsys --gpu-metrics-devices (empty when not sampled).
--
-- timestamp: sample time, ns.
-- device_id: the GPU sampled.
-- metric: metric name, e.g. "SMs Active [Throughput %]".
-- value: sampled value (percentages are 0-100).
CREATE VIEW gpu_metrics AS
SELECT m.timestamp, m.device_id, n.metric_name AS metric, m.value
FROM base_gpu_metrics m
JOIN base_gpu_metric_names n ON n.source_id = m.source_id AND n.metric_id = m.metric_id;
