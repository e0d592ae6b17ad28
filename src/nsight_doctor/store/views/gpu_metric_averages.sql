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
--
-- A table, made once when the store is built (the summary and low-sm-activity read it): the
-- samples are summed per metric id first, and named after (a sampled export holds millions).
CREATE TABLE gpu_metric_averages AS
WITH w AS (
    SELECT device_id, start AS s, "end" AS e, busy_ns FROM gpu_activity
), per_id AS (
    SELECT m.device_id, m.source_id, m.metric_id, count(*) AS n, sum(m.value) AS total,
           count(*) FILTER (WHERE m.timestamp BETWEEN w.s AND w.e) AS window_n,
           sum(m.value) FILTER (WHERE m.timestamp BETWEEN w.s AND w.e) AS window_total,
           any_value(w.busy_ns) AS busy_ns, any_value(w.e - w.s) AS window_ns
    FROM base_gpu_metrics m LEFT JOIN w ON w.device_id = m.device_id
    GROUP BY m.device_id, m.source_id, m.metric_id
), a AS (
    SELECT p.device_id, n.metric_name AS metric, sum(p.n)::BIGINT AS samples, sum(p.total) / sum(p.n) AS avg,
           sum(p.window_n)::BIGINT AS window_samples, sum(p.window_total) / nullif(sum(p.window_n), 0) AS window_avg,
           any_value(p.busy_ns) AS busy_ns, any_value(p.busy_ns) / any_value(p.window_ns) AS busy_share
    FROM per_id p JOIN base_gpu_metric_names n ON n.source_id = p.source_id AND n.metric_id = p.metric_id
    GROUP BY p.device_id, n.metric_name
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
