-- ncu_metrics: every metric of every kernel in the Nsight Compute reports, as a long table.
--
-- action_id: the profiled kernel (ncu_kernels).
-- kernel: its short name.
-- metric: metric name, e.g. "sm__throughput.avg.pct_of_peak_sustained_elapsed".
-- value: numeric value (NULL for text metrics).
-- text: text value (e.g. the device name), else NULL.
-- unit: unit as ncu reports it (ns, %, byte, ...), often NULL.
CREATE VIEW ncu_metrics AS
SELECT m.action_id, a.name AS kernel, m.metric, m.value, m.text, m.unit
FROM base_ncu_metrics m JOIN base_ncu_actions a USING (action_id);
