-- gpu_metric_averages: each sampled GPU metric averaged per GPU, over all its samples and over
-- the time the GPU was busy (empty when no metrics were sampled).
--
-- device_id: GPU index (as in gpu_metrics).
-- metric: metric name, e.g. "SMs Active [Throughput %]".
-- key: sm_active, sm_issue, tensor_active, dram_read or dram_write for the metrics that the
--   summary and rules read (names vary a little between nsys versions), else NULL.
-- samples: samples of the metric.
-- avg: their average.
-- window_samples: samples inside the GPU's activity window (first to last operation).
-- window_avg: their average.
-- busy_ns: the GPU's busy time (gpu_busy).
-- busy_share: busy time over the activity window.
-- avg_busy: the average while the GPU was busy, window_avg / busy_share (each sample averages
--   its metric over the sampling period); NULL above 100.5%, where the samples saw GPU work
--   that the trace did not (another process, or work outside the traced window).
CREATE VIEW gpu_metric_averages AS
WITH w AS (
    SELECT device_id, start AS s, "end" AS e, busy_ns FROM gpu_activity
), a AS (
    SELECT m.device_id, m.metric, count(*) AS samples, avg(m.value) AS avg,
           count(*) FILTER (WHERE m.timestamp BETWEEN w.s AND w.e) AS window_samples,
           avg(m.value) FILTER (WHERE m.timestamp BETWEEN w.s AND w.e) AS window_avg,
           any_value(w.busy_ns) AS busy_ns,
           any_value(w.busy_ns) / any_value(w.e - w.s) AS busy_share
    FROM gpu_metrics m LEFT JOIN w ON w.device_id = m.device_id
    GROUP BY m.device_id, m.metric
)
SELECT device_id, metric,
       CASE WHEN starts_with(metric, 'SMs Active') OR starts_with(metric, 'SM Active') THEN 'sm_active'
            WHEN starts_with(metric, 'SM Issue') THEN 'sm_issue'
            WHEN starts_with(metric, 'Tensor Active') THEN 'tensor_active'
            WHEN starts_with(metric, 'DRAM Read') THEN 'dram_read'
            WHEN starts_with(metric, 'DRAM Write') THEN 'dram_write' END AS key,
       samples, avg, window_samples, window_avg, busy_ns, busy_share,
       CASE WHEN window_avg / busy_share <= 100.5 THEN window_avg / busy_share END AS avg_busy
FROM a;
